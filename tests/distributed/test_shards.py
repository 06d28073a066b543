"""Shards without a cluster: the spans a large plain-text, .jsonl or .parquet file is cut into
hold exactly its documents and pre-tokens, bad input in a span is reported where it is in the
file, and the options of engine="ray" are checked before any cluster is reached."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import json

import polytok
from polytok import corpus
from polytok.file_parts import read_text_span
from polytok.distributed import Span, _span_documents, count_on_ray, plan_shards, shard_size
from polytok.errors import ConfigError, CorpusError, PatternError

DATA = Path(__file__).parents[1] / "data"
PRESETS = ("gpt2", "cl100k", "o200k", "nanochat")

# Characters around which cuts are and are not allowed: line breaks, CR, spaces (ASCII and
# multi-byte), slashes, apostrophes, digits, letters and punctuation.
ALPHABET = st.sampled_from(["a", "b", "Z", "é", "中", " ", "  ", "\n", "\r\n", "\n\n", "/", "'", "s", "1", "23", ".", "\u00a0", "\u3000", "\t"])


OPTIONS = {"text_field": "text", "text_column": "text", "errors": "strict"}


def span_documents(shards: list[list[Span]]) -> list[str | bytes]:
    """The documents of `shards` as the Ray tasks read them (plain text as its UTF-8 bytes)."""
    return [document for shard in shards for span in shard for document in _span_documents(span, OPTIONS)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(ALPHABET, min_size=1, max_size=400), shard_bytes=st.integers(1, 64), pattern=st.sampled_from(PRESETS))
def test_spans_of_a_file_hold_exactly_its_pre_tokens(tmp_path, pieces, shard_bytes, pattern):
    text = "".join(pieces)
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    shards = plan_shards([path], shard_bytes)
    spans = [span for shard in shards for span in shard]
    assert spans[0].start == 0 and all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    assert b"".join(span_documents(shards)) == text.encode("utf-8")
    whole = polytok.count(path, pattern, progress=False)
    cut = polytok.count(polytok.texts(span_documents(shards)), pattern, progress=False)
    assert cut.to_dict() == whole.to_dict()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.lists(ALPHABET, max_size=12).map("".join) | st.none(), min_size=1, max_size=40),
    shard_bytes=st.integers(1, 200),
)
def test_spans_of_a_jsonl_file_hold_exactly_its_documents(tmp_path, records, shard_bytes):
    path = tmp_path / "corpus.jsonl"
    # None is a blank line, which the reader skips.
    path.write_text("".join("\n" if text is None else json.dumps({"text": text}) + "\n" for text in records))
    shards = plan_shards([path], shard_bytes)
    spans = [span for shard in shards for span in shard]
    if len(spans) > 1:
        assert all(a.stop == b.start for a, b in zip(spans, spans[1:])) and spans[-1].stop == path.stat().st_size
        assert all(path.read_bytes()[span.start - 1 : span.start] == b"\n" for span in spans[1:])
    assert span_documents(shards) == list(corpus.read_file(path)) == [text for text in records if text is not None]


def test_a_bad_line_in_a_later_jsonl_span_is_named_by_its_byte_offset(tmp_path):
    path = tmp_path / "corpus.jsonl"
    good = json.dumps({"text": "In the beginning God created the heaven and the earth."}) + "\n"
    path.write_text(good * 100 + "{not json\n" + good * 100)
    spans = [span for shard in plan_shards([path], 1000) for span in shard]
    bad = next(span for span in spans if span.start <= len(good) * 100 < span.stop)
    assert bad.start > 0
    with pytest.raises(CorpusError, match=rf"{path}', the line at byte {len(good) * 100}: invalid JSON"):
        list(_span_documents(bad, OPTIONS))


def write_row_groups(path: Path, lines: list[str | None]) -> None:
    """`lines` as a Parquet file's text column, 10 rows per row group."""
    import pyarrow
    import pyarrow.parquet

    with pyarrow.parquet.ParquetWriter(path, pyarrow.schema([("text", pyarrow.string())])) as writer:
        for start in range(0, len(lines), 10):
            writer.write_table(pyarrow.table({"text": lines[start : start + 10]}))


def test_a_parquet_file_is_cut_between_row_groups(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "corpus.parquet"
    lines = (DATA / "kjv.txt").read_text(encoding="utf-8").splitlines()
    write_row_groups(path, lines)
    shards = plan_shards([path], 2000)
    spans = [span for shard in shards for span in shard]
    assert len(spans) > 3 and all(span.stop is not None for span in spans)
    assert spans[0].start == 0 and all(a.stop == b.start for a, b in zip(spans, spans[1:])) and spans[-1].stop == 18
    assert "row groups 0.." in str(spans[0])
    assert span_documents(shards) == lines
    # A null in a later row group is named by its row in the whole file.
    write_row_groups(path, lines[:45] + [None] + lines[46:])
    bad = next(span for span in spans if span.start <= 4 < span.stop)
    with pytest.raises(CorpusError, match=rf"{path}', row 45: column 'text' is null"):
        list(_span_documents(bad, OPTIONS))


def test_a_large_file_is_cut_into_spans_of_about_the_shard_size():
    path = DATA / "kjv.txt"
    shards = plan_shards([path], 4096)
    spans = [span for shard in shards for span in shard]
    assert len(spans) == len(shards) > 5
    assert all(4096 <= span.size < 4096 + 200 for span in spans[:-1])
    assert sum(span.size for span in spans) == path.stat().st_size


@pytest.mark.parametrize("suffix", [".txt.gz", ".jsonl.gz"])
def test_small_files_are_grouped_and_compressed_ones_stay_whole(tmp_path, suffix):
    import gzip

    big = tmp_path / f"big{suffix}"
    lines = (DATA / "kjv.txt").read_text(encoding="utf-8").splitlines()
    text = "".join(json.dumps({"text": line}) + "\n" for line in lines) if "jsonl" in suffix else "\n".join(lines)
    big.write_bytes(gzip.compress(text.encode(), mtime=0))
    small = [tmp_path / f"small-{i}.txt" for i in range(4)]
    for path in small:
        path.write_text("a few words\n" * 10)
    shards = plan_shards([big, *small], 250)
    assert [[span.path for span in shard] for shard in shards] == [[str(big)], [str(small[0]), str(small[1])], [str(small[2]), str(small[3])]]
    assert all(span.stop is None for shard in shards for span in shard)


def test_an_empty_file_is_a_shard_too(tmp_path):
    (tmp_path / "empty.txt").touch()
    assert plan_shards([tmp_path / "empty.txt"], 100) == [[Span(str(tmp_path / "empty.txt"), 0, None, 0)]]


def test_invalid_utf8_in_a_later_span_names_its_offset_in_the_file(tmp_path):
    path = tmp_path / "latin.txt"
    good = "In the beginning God created the heaven and the earth.\n" * 100
    path.write_bytes(good.encode() + b"caf\xe9 au lait\n" + good.encode())
    spans = [span for shard in plan_shards([path], 1000) for span in shard]
    bad = next(span for span in spans if span.start <= len(good) + 3 < span.stop)
    assert bad.start > 0
    with pytest.raises(CorpusError, match=rf"{path}.*invalid UTF-8 at byte offset {len(good) + 3};"):
        list(read_text_span(path, bad.start, bad.stop))


def test_shard_size_gives_a_few_shards_per_cpu_within_bounds():
    assert shard_size(10 << 30, 2) == 256 << 20
    assert shard_size(1 << 20, 2) == 4 << 20
    assert (64 << 20) < shard_size(1 << 30, 2) <= (128 << 20) + 1


@pytest.mark.parametrize(
    "source, options, error, message",
    [
        (polytok.texts(["in memory"]), {}, ConfigError, "counts files that every node can read"),
        (DATA / "kjv.txt", {"pattern": "cl100K"}, PatternError, "cl100K"),
        (DATA / "kjv.txt", {"shard_bytes": 0}, ConfigError, "shard_bytes must be an integer of at least 1, got 0"),
        (DATA / "kjv.txt", {"retries": -1}, ConfigError, "retries must be an integer of at least 0, got -1"),
        (DATA / "missing.txt", {}, CorpusError, "no such file"),
        (DATA / "kjv.txt", {"address": "no-port"}, ConfigError, "expected 'local', 'auto' or host:port"),
    ],
)
def test_bad_options_fail_before_a_cluster_is_reached(source, options, error, message):
    with pytest.raises(error, match=message):
        count_on_ray(source, progress=False, **options)


def test_count_names_its_engines():
    with pytest.raises(ConfigError, match="engine='spark'; expected one of 'local', 'ray'"):
        polytok.count(DATA / "kjv.txt", engine="spark")
    with pytest.raises(ConfigError, match="address='auto' is for engine='ray'"):
        polytok.count(DATA / "kjv.txt", address="auto")
