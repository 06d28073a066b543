"""Counting pre-tokens: exact agreement with Counter over regex.findall, shards that add up,
64-bit counts, deterministic saved files, and clear errors on bad input and bad files."""
from __future__ import annotations

import collections
import gzip
import json
import pickle
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import polytok
import polytok.progress
import polytok.corpus as corpus
from polytok import PreTokenCounts
from polytok.errors import ConfigError, CorpusError, FormatError, PatternError
from polytok.pretokenize import PRESETS, PreTokenizer

DATA = Path(__file__).parent / "data"
EXCERPTS = sorted(DATA.glob("*.txt"))
SPECIALS = ["<|endoftext|>", "<|fim|>", "<|end"]


def reference_counts(documents: list[str], pattern: str, special_tokens: list[str] = ()) -> dict[bytes, int]:
    """Counter over regex.findall on each document, with special tokens split out first."""
    counts: collections.Counter = collections.Counter()
    # Longest first, so the alternation finds the leftmost-longest special token.
    splitter = "|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True)))
    for document in documents:
        parts = re.split(splitter, document) if special_tokens else [document]
        for part in parts:
            counts.update(piece.encode("utf-8") for piece in regex.findall(PRESETS.get(pattern, pattern), part))
    return dict(counts)


@pytest.fixture(scope="module")
def excerpts() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in EXCERPTS}


@pytest.mark.parametrize("pattern", sorted(PRESETS))
def test_counts_of_excerpt_files_equal_regex_findall_on_whole_files(excerpts, pattern, monkeypatch):
    # Small chunks: many cuts inside every file, none of which may change a pre-token.
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 500)
    counts = polytok.count(EXCERPTS, pattern=pattern, progress=False)
    assert counts.to_dict() == reference_counts(list(excerpts.values()), pattern)
    assert counts.pattern == PRESETS[pattern]


def test_counts_of_lines_with_special_tokens_equal_the_reference(excerpts):
    lines = [line for text in excerpts.values() for line in text.splitlines(keepends=True)]
    documents = [line + SPECIALS[i % 3] if i % 5 else line for i, line in enumerate(lines)]
    counts = polytok.count(polytok.texts(documents), "cl100k", SPECIALS, progress=False)
    assert counts.to_dict() == reference_counts(documents, "cl100k", SPECIALS)
    assert not any(special.encode() in word for word, _ in counts for special in SPECIALS)


# Text rich in what pre-tokenisation turns on: white space of every kind, line breaks, letters,
# digits, apostrophes, punctuation, special-token fragments, plus arbitrary characters.
PIECES = [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "\u2028", "'s", "'LL", "ab", "Zé",
          "日本", "123", "4567", "!?", "<|", "|>", "<|fim|>", "<|endoftext|>", "\U0001f600"]
# Arbitrary characters are limited to those assigned in this Python's Unicode database: newer ones
# (e.g. U+12550) get different categories from the `regex` module and from Rust's tables, a
# pre-tokeniser question that tests/test_pretokenize.py owns, not one of counting.
assigned_text = st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=4)
text_strategy = st.lists(st.sampled_from(PIECES) | assigned_text, max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(documents=st.lists(text_strategy, max_size=8), pattern=st.sampled_from(sorted(PRESETS)))
def test_counts_of_generated_documents_equal_the_reference(documents, pattern):
    expected = reference_counts(documents, pattern, SPECIALS)
    if not expected:
        with pytest.raises(CorpusError):
            polytok.count(polytok.texts(documents), pattern, SPECIALS, progress=False)
        return
    counts = polytok.count(polytok.texts(documents), pattern, SPECIALS, num_threads=2, progress=False)
    assert counts.to_dict() == expected
    assert counts.total == sum(expected.values())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(text_strategy, min_size=1, max_size=20).map("\n".join), pattern=st.sampled_from(sorted(PRESETS)))
@example(text="!?\n/0\x80", pattern="o200k")  # o200k's punctuation pieces run on over "\n" into "/"
@example(text="ab.\n//cd\n/ e\n\n/f", pattern="o200k")
def test_chunked_files_count_as_the_whole_file(tmp_path, text, pattern):
    path = tmp_path / "generated.txt"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    expected = reference_counts([text], pattern)
    # Tiny chunks, and no last-resort cuts (which may split "\r\n" runs differently for gpt2).
    previous = corpus.CHUNK_BYTES, corpus.LAST_RESORT_CHUNKS
    corpus.CHUNK_BYTES, corpus.LAST_RESORT_CHUNKS = 7, 1 << 40
    try:
        if expected:
            assert polytok.count(path, pattern, progress=False).to_dict() == expected
    finally:
        corpus.CHUNK_BYTES, corpus.LAST_RESORT_CHUNKS = previous


@settings(max_examples=100, deadline=None)
@given(documents=st.lists(st.binary(max_size=30) | text_strategy, min_size=1, max_size=6))
def test_bytes_and_invalid_utf8_count_as_the_pre_tokeniser_splits_them(documents):
    splitter = PreTokenizer("cl100k", SPECIALS)
    expected = collections.Counter(piece for document in documents for piece in splitter.split(document))
    for special in SPECIALS:
        expected.pop(special.encode(), None)
    if not expected:
        return
    assert polytok.count(polytok.texts(documents), "cl100k", SPECIALS, progress=False).to_dict() == dict(expected)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(st.binary(max_size=30) | text_strategy, max_size=5), min_size=1, max_size=4),
    distinct=st.integers(0, 4000),
)
def test_the_counter_equals_a_counter_of_the_split_whatever_the_batches_and_threads(batches, distinct):
    # `distinct` numbered words make every shard's table grow several times.
    batches.append([" ".join(f"w{i}" for i in range(distinct)).encode() + b"\xff"])
    splitter = PreTokenizer("cl100k", SPECIALS)
    expected = collections.Counter(piece for batch in batches for document in batch for piece in splitter.split(document))
    for special in SPECIALS:
        expected.pop(special.encode(), None)
    results = []
    for threads in (1, 2):
        counter = polytok._core.PreTokenCounter(PRESETS["cl100k"], [s.encode() for s in SPECIALS], threads)
        for batch in batches:
            counter.add(batch)
        assert len(counter) == len(expected)
        data, offsets, counts = counter.finish()
        assert counts.dtype == np.uint64 and offsets.dtype == np.int64
        results.append(PreTokenCounts(data, offsets, counts))
    assert results[0].to_dict() == dict(expected)
    assert [word for word, _ in results[0]] == sorted(expected)
    assert results[1].data == results[0].data
    assert np.array_equal(results[1].offsets, results[0].offsets) and np.array_equal(results[1].counts, results[0].counts)


def test_a_counter_refuses_to_add_unsorted_counts():
    counter = polytok._core.PreTokenCounter(None, [], 1)
    with pytest.raises(ValueError, match=r"added operand: pre-tokens 0 and 1 are not in strictly increasing byte order"):
        counter.add_counts((b"ba", np.array([0, 1, 2]), np.array([1, 1], dtype=np.uint64)))


def test_a_finished_counter_is_refused():
    counter = polytok._core.PreTokenCounter(None, [], 1)
    counter.add(["text"])
    counter.finish()
    with pytest.raises(ValueError, match="finished"):
        counter.add(["more"])


@settings(max_examples=60, deadline=None)
@given(documents=st.lists(text_strategy, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=3))
def test_shards_add_up_to_the_whole(documents, cuts):
    documents = [document + " word" for document in documents]  # every shard has something to count
    bounds = sorted({0, len(documents), *(min(cut, len(documents)) for cut in cuts)})
    shards = [polytok.count(polytok.texts(documents[a:b]), "gpt2", progress=False) for a, b in zip(bounds, bounds[1:]) if a < b]
    whole = polytok.count(polytok.texts(documents), "gpt2", progress=False)
    total = sum(shards)
    assert total.to_dict() == whole.to_dict()
    # The Ray driver's way: every shard added into one counter.
    counter = polytok._core.PreTokenCounter(whole.pattern, [], 2)
    for shard in shards:
        counter.add_counts((shard.data, shard.offsets, shard.counts))
    data, offsets, counts = counter.finish()
    assert data == whole.data and np.array_equal(offsets, whole.offsets) and np.array_equal(counts, whole.counts)
    assert total.data == whole.data and np.array_equal(total.offsets, whole.offsets)
    assert total.pattern == whole.pattern


def test_counts_are_64_bit_through_add_save_and_load(tmp_path):
    big = PreTokenCounts.from_dict({b"a": 2**62, b"b": 3}, pattern="x")
    doubled = big + big
    assert doubled.to_dict() == {b"a": 2**63, b"b": 6}
    assert doubled.total == 2**63 + 6
    doubled.save(tmp_path / "big.ptc")
    assert PreTokenCounts.load(tmp_path / "big.ptc").to_dict() == {b"a": 2**63, b"b": 6}


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_counts_pickle_whole_and_with_out_of_band_buffers(protocol):
    counts = polytok.count(polytok.texts(["a pickled count, a count"]), "gpt2", progress=False)
    buffers: list = []
    pickled = pickle.dumps(counts, protocol, buffer_callback=buffers.append if protocol >= 5 else None)
    # Under protocol 5 the data and both arrays travel out of band, as Ray's object store takes them.
    assert len(buffers) == (3 if protocol >= 5 else 0)
    loaded = pickle.loads(pickled, buffers=buffers)
    assert isinstance(loaded.data, bytes) and loaded.data == counts.data
    assert loaded.to_dict() == counts.to_dict() and loaded.pattern == counts.pattern
    assert pickle.loads(pickle.dumps(counts, protocol)).to_dict() == counts.to_dict()


def test_adding_counts_of_different_patterns_is_refused():
    with pytest.raises(ConfigError, match=r"different patterns"):
        polytok.count(polytok.texts(["a b"]), "gpt2", progress=False) + polytok.count(polytok.texts(["a b"]), "cl100k", progress=False)


def test_adding_malformed_counts_names_the_problem():
    unsorted = PreTokenCounts(b"ba", np.array([0, 1, 2]), np.array([1, 1]))
    with pytest.raises(ConfigError, match=r"left operand: pre-tokens 0 and 1 are not in strictly increasing byte order"):
        unsorted + PreTokenCounts.from_dict({b"a": 1})
    bad_offsets = PreTokenCounts(b"ab", np.array([0, 1, 5]), np.array([1, 1]))
    with pytest.raises(ConfigError, match=r"right operand: offsets run from 0 to 5; expected 0 to 2"):
        PreTokenCounts.from_dict({b"a": 1}) + bad_offsets


def test_save_and_load_round_trip(tmp_path, excerpts):
    counts = polytok.count(polytok.texts(list(excerpts.values())), "o200k", progress=False)
    path = tmp_path / "counts.ptc"
    counts.save(path)
    loaded = PreTokenCounts.load(path)
    assert loaded.data == counts.data and loaded.pattern == counts.pattern == PRESETS["o200k"]
    assert np.array_equal(loaded.offsets, counts.offsets) and np.array_equal(loaded.counts, counts.counts)
    assert loaded.offsets.dtype == np.int64 and loaded.counts.dtype == np.uint64
    no_split = PreTokenCounts.from_dict({b"\x00\xff": 1}, pattern=None)
    no_split.save(path)
    assert PreTokenCounts.load(path).to_dict() == {b"\x00\xff": 1} and PreTokenCounts.load(path).pattern is None
    assert [p.name for p in tmp_path.iterdir()] == ["counts.ptc"]  # no temporary files left behind


def test_saved_files_are_byte_identical_whatever_the_thread_count(tmp_path, excerpts):
    documents = [line for text in excerpts.values() for line in text.splitlines(keepends=True)]
    for threads in (1, 2):
        polytok.count(polytok.texts(documents), "cl100k", SPECIALS, num_threads=threads, progress=False).save(tmp_path / f"{threads}.ptc")
    assert (tmp_path / "1.ptc").read_bytes() == (tmp_path / "2.ptc").read_bytes()


@pytest.fixture
def saved(tmp_path) -> Path:
    path = tmp_path / "c.ptc"
    PreTokenCounts.from_dict({b"hello": 3, b" world": 2, b"!": 1}, pattern="cl100k-ish").save(path)
    return path


def header_end(raw: bytes) -> int:
    return 16 + struct.unpack_from("<I", raw, 12)[0]


def test_load_names_a_truncated_file(saved):
    raw = saved.read_bytes()
    for keep in (len(raw) - 1, header_end(raw) + 3, header_end(raw)):
        saved.write_bytes(raw[:keep])
        with pytest.raises(FormatError, match=rf"c\.ptc' is truncated: {keep} bytes, but its header .* makes it {len(raw)}"):
            PreTokenCounts.load(saved)
    saved.write_bytes(raw[:20])
    with pytest.raises(FormatError, match=r"truncated inside its header"):
        PreTokenCounts.load(saved)
    saved.write_bytes(raw + b"x")
    with pytest.raises(FormatError, match=r"too long"):
        PreTokenCounts.load(saved)


def test_load_names_an_edited_file(saved):
    raw = saved.read_bytes()
    edited = bytearray(raw)
    edited[-2] ^= 1  # one bit of one word
    saved.write_bytes(bytes(edited))
    with pytest.raises(FormatError, match=r"checksum does not match"):
        PreTokenCounts.load(saved)
    saved.write_bytes(b"PTCOUNTX" + raw[8:])
    with pytest.raises(FormatError, match=r"not a polytok counts file"):
        PreTokenCounts.load(saved)
    saved.write_bytes(raw[:8] + struct.pack("<I", 2) + raw[12:])
    with pytest.raises(FormatError, match=r"version 2; this polytok reads version 1"):
        PreTokenCounts.load(saved)


def rewrite_header(path: Path, edit) -> None:
    raw = path.read_bytes()
    end = header_end(raw)
    header = json.loads(raw[16:end])
    new = json.dumps(edit(header)).encode()
    path.write_bytes(raw[:12] + struct.pack("<I", len(new)) + new + raw[end:])


def test_load_names_a_bad_header_field(saved):
    rewrite_header(saved, lambda header: {k: v for k, v in header.items() if k != "sha256"})
    with pytest.raises(FormatError, match=r"lacks the field 'sha256'"):
        PreTokenCounts.load(saved)
    rewrite_header(saved, lambda header: {**header, "sha256": "0" * 64, "words": "three"})
    with pytest.raises(FormatError, match=r"header field 'words' is 'three'; expected int"):
        PreTokenCounts.load(saved)
    raw = saved.read_bytes()
    saved.write_bytes(raw[:16] + b"x" + raw[17:])
    with pytest.raises(FormatError, match=r"header is not valid JSON"):
        PreTokenCounts.load(saved)


def test_load_of_a_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match=r"cannot read counts file .*absent\.ptc"):
        PreTokenCounts.load(tmp_path / "absent.ptc")


def test_empty_corpora_are_refused(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    cases = [
        ([], r"holds no documents"),
        (polytok.texts(["", b""]), r"holds only empty documents \(2\)"),
        (polytok.texts(["<|fim|><|endoftext|>"]), r"holds nothing but special tokens"),
        (tmp_path / "empty.txt", r"empty\.txt' holds no documents"),
    ]
    for source, message in cases:
        with pytest.raises(CorpusError, match=message):
            polytok.count(source, special_tokens=SPECIALS, progress=False)


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(CorpusError, match=r"no such file or directory"):
        polytok.count(tmp_path / "missing.txt", progress=False)
    with pytest.raises(PatternError, match=r"invalid pre-tokenisation regex '\(unclosed'"):
        polytok.count(polytok.texts(["text"]), pattern="(unclosed", progress=False)
    with pytest.raises(ConfigError, match=r"num_threads must be an integer of at least 1, or None"):
        polytok.count(polytok.texts(["text"]), num_threads=0, progress=False)
    with pytest.raises(ConfigError, match=r"each special token must be a non-empty string"):
        polytok.count(polytok.texts(["text"]), special_tokens=[""], progress=False)


def test_files_of_every_format_count_the_same(tmp_path, excerpts):
    lines = excerpts["handbook-es-ES.txt"].splitlines(keepends=True)[:200]
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress("".join(lines).encode()))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in lines))
    whole = reference_counts(["".join(lines)], "cl100k")
    assert polytok.count(tmp_path / "a.txt.gz", progress=False).to_dict() == whole
    per_line = reference_counts(lines, "cl100k")
    assert polytok.count(tmp_path / "b.jsonl", progress=False).to_dict() == per_line
    both = polytok.count(tmp_path, progress=False).to_dict()
    assert both == dict(collections.Counter(whole) + collections.Counter(per_line))


def test_lone_surrogates_count_as_the_pre_tokeniser_encodes_them():
    document = "abc\ud800def x"
    expected = collections.Counter(PreTokenizer("cl100k").split(document))
    assert polytok.count(polytok.texts([document]), progress=False).to_dict() == dict(expected)


def test_progress_bar_shows_bytes_only_when_asked(capsys, monkeypatch):
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)  # the count is quicker than the delay
    polytok.count(polytok.texts(["some text " * 100]), progress=False)
    assert capsys.readouterr().err == ""
    polytok.count(polytok.texts(["some text " * 100]), progress=True)
    assert "counting" in capsys.readouterr().err


def test_counting_a_large_file_keeps_python_memory_flat(tmp_path):
    import tracemalloc

    line = b"Streaming keeps memory flat: 40 MB of text, counted a batch at a time.\n"
    path = tmp_path / "large.txt"
    with open(path, "wb") as out:
        out.write(line * (40_000_000 // len(line)))
    tracemalloc.start()
    try:
        # No regex split: each document (a group of lines) is one pre-token, so this runs fast.
        counts = polytok.count(path, None, num_threads=1, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(len(word) * number for word, number in counts) == path.stat().st_size
    # One batch (1 MB for one thread) and its chunks, not the 40 MB file.
    assert peak < 12 << 20


def test_word_counts_is_a_deprecated_name_of_pre_token_counts():
    counts = polytok.PreTokenCounts.from_dict({b"a": 1})
    with pytest.warns(DeprecationWarning, match="use PreTokenCounts"):
        from polytok.counts import WordCounts
    assert WordCounts is polytok.PreTokenCounts and isinstance(counts, WordCounts)
    with pytest.warns(DeprecationWarning, match="use PreTokenCounts"):
        assert polytok.WordCounts is polytok.PreTokenCounts
