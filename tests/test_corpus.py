"""Reading corpora: every format and compression, directories and globs, iterables, invalid UTF-8,
bad records, and streaming with flat memory."""
from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
import polytok.corpus as corpus
from polytok.corpus import default_corpus, iter_documents, texts
from polytok.errors import ConfigError, CorpusError

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """Lines of several languages and a code file, the documents of the jsonl and parquet tests."""
    picked = []
    for name in ("kjv.txt", "handbook-zh-CN.txt", "handbook-de-DE.txt", "python-textwrap.py.txt"):
        picked += (DATA / name).read_text(encoding="utf-8").splitlines(keepends=True)[:40]
    return picked


def compress(path: Path, data: bytes, compression: str) -> Path:
    """Write `data` to `path` plus the compression suffix ('' for none)."""
    target = path.with_name(path.name + compression)
    if compression == ".gz":
        target.write_bytes(gzip.compress(data))
    elif compression == ".zst":
        target.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        target.write_bytes(data)
    return target


def write_parquet(path: Path, table: pyarrow.Table, compression: str) -> Path:
    plain = path.with_name(path.name + ".plain")
    pyarrow.parquet.write_table(table, plain, row_group_size=7)
    target = compress(path, plain.read_bytes(), compression)
    plain.unlink()
    return target


COMPRESSIONS = ["", ".gz", ".zst"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_plain_text_documents_rejoin_to_the_file_and_cut_only_between_non_space(tmp_path, monkeypatch, compression):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 300)
    text = (DATA / "handbook-fr-FR.txt").read_text(encoding="utf-8")
    path = compress(tmp_path / "book.txt", text.encode("utf-8"), compression)
    documents = list(iter_documents(path))
    assert "".join(documents) == text
    assert len(documents) > 50
    for before, after in zip(documents, documents[1:]):
        # A cut is either "X\n|Y" or "X| Y", with X and Y not white space.
        if before.endswith("\n"):
            assert not before[-2].isspace() and not after[0].isspace()
        else:
            assert after[0] == " " and not before[-1].isspace() and not after[1].isspace()


def test_a_line_longer_than_a_chunk_is_cut_at_single_spaces(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 64)
    text = "word " * 200 + "end\n" + "x" * 500 + "\n"
    path = tmp_path / "long.txt"
    path.write_text(text)
    documents = list(iter_documents(path))
    assert "".join(documents) == text
    assert all(len(document) < 200 for document in documents[:-1])
    # 500 bytes with no space or line break cannot be cut: that line stays whole.
    assert "x" * 500 in documents[-1]


def test_white_space_runs_are_never_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 16)
    text = "a\n\nb  \nc\u3000\nd\n\u00a0e\n \nf\ng\nhij\n"
    path = tmp_path / "spaces.txt"
    path.write_text(text)
    documents = list(iter_documents(path))
    # The only cuts between non-space characters are f|g and g|hij; the last one is taken.
    assert documents == ["a\n\nb  \nc\u3000\nd\n\u00a0e\n \nf\ng\n", "hij\n"]


def test_text_without_a_safe_cut_is_cut_at_line_breaks_as_a_last_resort(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 16)
    text = "".join(f"第{i}行没有空格。\r\n" for i in range(400))
    path = tmp_path / "crlf.txt"
    path.write_text(text, newline="")
    documents = list(iter_documents(path))
    assert "".join(documents) == text
    assert len(documents) > 5
    assert all(document.endswith("\r\n") for document in documents)
    assert max(len(document.encode()) for document in documents) < (corpus.LAST_RESORT_CHUNKS + 1) * 16 + 30


def test_a_cut_waits_for_the_whole_next_character(tmp_path, monkeypatch):
    # The stream delivers 8 bytes at a time; after "x\n" come the bytes of U+00A0 (white space),
    # whose second byte is not read yet when the first buffer is searched.
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 8)
    text = "abcdex\n\u00a0y\nzzzz\n"
    path = tmp_path / "split.txt"
    path.write_text(text)
    documents = list(iter_documents(path))
    assert "".join(documents) == text
    assert not any(document.startswith("\u00a0") for document in documents)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_jsonl_field_of_every_line(tmp_path, lines, compression):
    records = "".join(json.dumps({"id": i, "body": line}) + "\n" for i, line in enumerate(lines))
    path = compress(tmp_path / "docs.jsonl", records.encode("utf-8") + b"\n  \n", compression)
    assert list(iter_documents(path, text_field="body")) == lines
    assert list(iter_documents(path, text_field="body", errors="bytes")) == [line.encode() for line in lines]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_parquet_column_in_record_batches(tmp_path, lines, monkeypatch, compression):
    monkeypatch.setattr(corpus, "PARQUET_BATCH_ROWS", 5)
    table = pyarrow.table({"id": list(range(len(lines))), "content": lines})
    path = write_parquet(tmp_path / "docs.parquet", table, compression)
    assert list(iter_documents(path, text_column="content")) == lines


def test_parquet_binary_column_is_decoded_as_the_errors_mode_asks(tmp_path):
    values = [b"caf\xc3\xa9", b"bad \xff byte"]
    path = write_parquet(tmp_path / "raw.parquet", pyarrow.table({"text": pyarrow.array(values, pyarrow.binary())}), "")
    assert list(iter_documents(path, errors="bytes")) == values
    assert list(iter_documents(path, errors="replace")) == ["café", "bad \ufffd byte"]
    with pytest.raises(CorpusError, match=r"raw\.parquet', row 1: invalid UTF-8 at byte offset 4"):
        list(iter_documents(path))


def test_parquet_missing_column_null_and_wrong_type_are_named(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", pyarrow.table({"body": ["a", None], "n": [1, 2]}), "")
    with pytest.raises(CorpusError, match=r"no column 'text' \(columns: 'body', 'n'\)"):
        list(iter_documents(path))
    with pytest.raises(CorpusError, match=r"row 1: column 'body' is null"):
        list(iter_documents(path, text_column="body"))
    with pytest.raises(CorpusError, match=r"column 'n' holds int64; expected strings"):
        list(iter_documents(path, text_column="n"))


def test_not_parquet_is_a_corpus_error(tmp_path):
    path = tmp_path / "fake.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(CorpusError, match="fake.parquet"):
        list(iter_documents(path))


def test_missing_optional_packages_say_what_to_install(tmp_path, monkeypatch):
    parquet = write_parquet(tmp_path / "d.parquet", pyarrow.table({"text": ["a"]}), "")
    zst = compress(tmp_path / "d.txt", b"a", ".zst")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(CorpusError, match=r"pip install polytok\[parquet\]"):
        list(iter_documents(parquet))
    with pytest.raises(CorpusError, match=r"pip install polytok\[zstd\]"):
        list(iter_documents(zst))


def test_jsonl_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    cases = [
        ('{"text": "ok"}\n{"txt": "x", "id": 3}\n', r"bad\.jsonl', line 2: no field 'text' \(fields: 'txt', 'id'\)"),
        ('{"text": "ok"}\n\n{"text": "x",\n', r"line 3: invalid JSON"),
        ('{"text": 5}\n', r"line 1: field 'text' is int; expected a string"),
        ('{"text": null}\n', r"line 1: field 'text' is NoneType; expected a string"),
        ('["text"]\n', r"line 1: expected a JSON object, got list"),
    ]
    for content, message in cases:
        path.write_text(content)
        with pytest.raises(CorpusError, match=message):
            list(iter_documents(path))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_invalid_utf8_names_file_byte_offset_and_line(tmp_path, monkeypatch, compression):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 100)
    good = (DATA / "kjv.txt").read_bytes()[:2000]
    offset = good.index(b"\n", 1500) + 3  # well past the first few documents
    data = good[:offset] + b"\xe2\x82" + good[offset:]  # a truncated three-byte sequence
    path = compress(tmp_path / "broken.txt", data, compression)
    line = data.count(b"\n", 0, offset) + 1
    with pytest.raises(CorpusError, match=rf"broken\.txt.*invalid UTF-8 at byte offset {offset} \(line {line}\)"):
        list(iter_documents(path))
    with pytest.raises(CorpusError, match=rf"broken\.txt.*invalid UTF-8 at byte offset {offset} \(line {line}\)"):
        list(iter_documents(path, as_utf8=True))
    replaced = "".join(iter_documents(path, errors="replace"))
    assert replaced == data.decode("utf-8", "replace") and "\ufffd" in replaced
    assert b"".join(iter_documents(path, errors="bytes")) == data


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_as_utf8_gives_the_bytes_of_the_documents(tmp_path, monkeypatch, compression):
    monkeypatch.setattr(corpus, "CHUNK_BYTES", 300)
    names = ("kjv.txt", "handbook-zh-CN.txt", "handbook-de-DE.txt")
    data = "".join((DATA / name).read_text(encoding="utf-8")[:1500] for name in names).encode("utf-8")
    path = compress(tmp_path / "mixed.txt", data, compression)
    as_bytes = list(iter_documents(path, as_utf8=True))
    assert all(isinstance(document, bytes) for document in as_bytes) and len(as_bytes) > 10
    assert as_bytes == [document.encode("utf-8") for document in iter_documents(path)]
    # Only strict reading of plain text changes: jsonl documents and the other modes stay as they are.
    records = tmp_path / "r.jsonl"
    records.write_text('{"text": "caf\u00e9"}\n')
    assert list(iter_documents(records, as_utf8=True)) == ["café"]
    assert list(iter_documents(path, errors="replace", as_utf8=True)) == list(iter_documents(path, errors="replace"))


_UTF8_PIECES = [b"a", b"\n", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xe2\x82", b"\x80", b"\xbf\xbf",
                b"\xff", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_UTF8_PIECES), max_size=40), st.integers(1, 9), st.integers(0, 1000))
def test_utf8_checked_in_slices_fails_where_decoding_whole_fails(pieces, slice_bytes, offset):
    data = b"".join(pieces)
    try:
        data.decode("utf-8")
        expected = None
    except UnicodeDecodeError as error:
        line = 1 + data.count(b"\n", 0, error.start)
        expected = f"invalid UTF-8 at byte offset {offset + error.start} (line {line})"
    saved = corpus._CHECK_BYTES
    corpus._CHECK_BYTES = slice_bytes
    try:
        corpus._check_utf8(Path("x.txt"), data, offset, 1)
        found = None
    except CorpusError as error:
        found = str(error).split(": ", 1)[1].split(";")[0]
    finally:
        corpus._CHECK_BYTES = saved
    assert found == expected


def test_invalid_utf8_in_jsonl_names_line_and_offset(tmp_path):
    path = tmp_path / "bad.jsonl"
    first = b'{"text": "fine"}\n'
    path.write_bytes(first + b'{"text": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=rf"invalid UTF-8 at byte offset {len(first) + 13} \(line 2\)"):
        list(iter_documents(path))
    assert list(iter_documents(path, errors="replace")) == ["fine", "caf\ufffd"]
    assert list(iter_documents(path, errors="bytes")) == [b"fine", b"caf\xe9"]


def test_directory_is_read_recursively_sorted_text_files_only(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "b" / "2.txt").write_text("two\n")
    (tmp_path / "a" / "1.md").write_text("one\n")
    compress(tmp_path / "a" / "3.jsonl", b'{"text": "three"}\n', ".gz")
    (tmp_path / "0.txt").write_text("zero\n")
    (tmp_path / ".hidden" / "x.txt").write_text("hidden\n")
    (tmp_path / ".dot.txt").write_text("dot file\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00\xff")
    (tmp_path / "notes.py").write_text("not read\n")
    assert list(iter_documents(tmp_path)) == ["zero\n", "one\n", "three", "two\n"]
    assert list(iter_documents(str(tmp_path))) == ["zero\n", "one\n", "three", "two\n"]


def test_directory_without_text_files_is_an_error(tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(CorpusError, match=r"holds no text files"):
        list(iter_documents(tmp_path))


def test_globs_and_lists_of_paths(tmp_path):
    for name, text in [("x1.txt", "one\n"), ("x2.txt", "two\n"), ("y.txt", "why\n")]:
        (tmp_path / name).write_text(text)
    assert list(iter_documents(str(tmp_path / "x*.txt"))) == ["one\n", "two\n"]
    assert list(iter_documents(str(tmp_path / "**" / "*.txt"))) == ["one\n", "two\n", "why\n"]
    assert list(iter_documents([tmp_path / "y.txt", tmp_path / "x1.txt"])) == ["why\n", "one\n"]
    with pytest.raises(CorpusError, match=r"no files match"):
        list(iter_documents(str(tmp_path / "z*.txt")))


def test_a_list_of_str_or_paths_names_files(tmp_path):
    (tmp_path / "a.txt").write_text("from a\n")
    (tmp_path / "b.jsonl").write_text('{"text": "from b"}\n')
    a, b = tmp_path / "a.txt", tmp_path / "b.jsonl"
    assert list(iter_documents([a, b])) == ["from a\n", "from b"]
    assert list(iter_documents([str(a), str(b)])) == ["from a\n", "from b"]
    assert list(iter_documents((str(tmp_path / "*.jsonl"), a))) == ["from b", "from a\n"]
    assert list(iter_documents(str(a))) == ["from a\n"]
    with pytest.raises(CorpusError, match=r"no such file or directory: 'missing\.txt'"):
        iter_documents([a, Path("missing.txt")])


def test_a_list_of_str_that_names_no_file_is_refused_before_reading(tmp_path):
    (tmp_path / "a.txt").write_text("from a\n")
    # Checked when iter_documents returns, before any document is read or a progress bar starts.
    with pytest.raises(CorpusError, match=r"corpus item 1 \('hello world'\) names no file.*polytok\.texts"):
        iter_documents([str(tmp_path / "a.txt"), "hello world"])
    with pytest.raises(CorpusError, match=r"corpus item 0 \('x{40}\.\.\.'\) names no file"):
        iter_documents(["x" * 100])
    with pytest.raises(CorpusError, match=r"item 1 is bytes, but item 0 is a file name"):
        iter_documents([str(tmp_path / "a.txt"), b"raw"])


def test_texts_are_documents_even_when_they_name_files(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("from a\n")
    assert list(iter_documents(texts([str(a), "/", "notes.txt"]))) == [str(a), "/", "notes.txt"]
    assert list(iter_documents(texts(line for line in ["x", b"\xff"]))) == ["x", b"\xff"]
    with pytest.raises(CorpusError, match=r"corpus item 0 is PosixPath; expected str or bytes"):
        list(iter_documents(texts([a])))
    with pytest.raises(CorpusError, match=r"not a single str.*texts\(\[document\]\)"):
        texts("one document")


def test_lists_of_bytes_and_other_iterables_are_documents(tmp_path):
    (tmp_path / "f.txt").write_text("from a file\n")
    assert list(iter_documents([b"raw \xff bytes", bytearray(b"array")])) == [b"raw \xff bytes", b"array"]
    documents = ["text", b"raw \xff bytes", bytearray(b"array"), tmp_path / "f.txt", ""]
    assert list(iter_documents(iter(documents))) == ["text", b"raw \xff bytes", b"array", "from a file\n", ""]
    assert list(iter_documents(line for line in ["a", "b"])) == ["a", "b"]


def test_training_on_a_list_of_file_names_reads_the_files(tmp_path):
    # What users of HF tokenizers write (train(files=[...])): the files are read, not their names.
    names = []
    for index, text in enumerate(["the quick brown fox\n" * 50, "jumps over the lazy dog\n" * 50]):
        path = tmp_path / f"part{index}.txt"
        path.write_text(text)
        names.append(str(path))
    counts = polytok.count(names, pattern="gpt2", progress=False)
    assert counts.to_dict()[b" fox"] == 50 and counts.to_dict()[b" lazy"] == 50
    tokenizer = polytok.train(names, algorithm="bpe", vocab_size=300, pattern="gpt2", progress=False)
    assert tokenizer.training == polytok.train(counts, algorithm="bpe", vocab_size=300, progress=False).training
    assert len(tokenizer.encode(" quick brown")) < len(" quick brown")
    with pytest.raises(CorpusError, match=r"names no file"):
        polytok.train(["the quick brown fox", "jumps"], algorithm="bpe", vocab_size=300, progress=False)


def test_bad_sources_and_items_are_named():
    with pytest.raises(CorpusError, match=r"corpus item 1 is int"):
        list(iter_documents(iter(["fine", 3])))
    with pytest.raises(CorpusError, match=r"corpus item 1 is int"):
        list(iter_documents(texts(["fine", 3])))
    with pytest.raises(CorpusError, match=r"got int"):
        list(iter_documents(42))
    with pytest.raises(CorpusError, match=r"bare bytes"):
        list(iter_documents(b"some text"))
    with pytest.raises(ConfigError, match=r"errors='ignore'"):
        list(iter_documents(texts(["x"]), errors="ignore"))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(CorpusError, match=r"no such file or directory: '.*nothing-here\.txt'"):
        list(iter_documents(tmp_path / "nothing-here.txt"))


def test_truncated_gzip_is_a_corpus_error(tmp_path):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(b"hello world\n" * 1000)[:-30])
    with pytest.raises(CorpusError, match=r"cannot read .*cut\.txt\.gz"):
        list(iter_documents(path))


def test_default_corpus_is_bundled_text():
    path = default_corpus()
    assert path.is_file() and path.name.endswith(".txt.gz")
    first = next(iter_documents(path))
    assert isinstance(first, str) and len(first.encode()) > 100_000


def test_reading_a_large_file_keeps_memory_flat(tmp_path):
    line = b"The quick brown fox jumps over the lazy dog; numbers 12345 and symbols #!?\n"
    path = tmp_path / "large.txt"
    with open(path, "wb") as out:
        out.write(line * (48_000_000 // len(line)))
    tracemalloc.start()
    try:
        total = sum(len(document) for document in iter_documents(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == path.stat().st_size
    # A few chunks' worth at most, however large the file: 48 MB read with under 8 MB.
    assert peak < 8 * corpus.CHUNK_BYTES
