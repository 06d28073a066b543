"""Reading corpora as a stream of documents (str, or bytes with errors="bytes").

A source names files or holds documents, and is never read the other way round:

- a str or os.PathLike, or a list or tuple of them, names files: paths, directories (read
  recursively, in sorted order) or globs. Every name must match something on disk; a name that
  matches nothing is an error (never read as text), so ``train(["a.txt", "b.txt"])`` trains on the
  files, and ``train(["some text"])`` fails and says how to pass texts. A str that cannot be a
  path (empty, a newline, a NUL, longer than the system allows) fails before anything is looked up, and
  a glob is searched only below an existing directory (see `expand_paths`), so a text is never
  globbed.
- ``texts(documents)`` wraps documents (str or bytes), read as they are, never as file names.
- a list or tuple of bytes holds documents; so does any other iterable (a generator, an
  iterator): its str and bytes items are documents, its os.PathLike items name files.

Files are read by suffix, each optionally compressed (.gz, .zst):

- ``.jsonl``: one JSON object per line; the document is the string in ``text_field``.
- ``.parquet``: the document is the value in ``text_column``; read in record batches.
- anything else: plain UTF-8 text. A document is a group of whole lines of about ``CHUNK_BYTES``,
  cut only where one line ends in a non-space character and the next begins with one other than
  "/" (o200k's punctuation pieces run on over line breaks into slashes), or, on a line longer than
  the chunk, at a single space between two such characters. No preset
  pattern (gpt2, cl100k, o200k, nanochat) matches across such a cut, so counting a file chunk by
  chunk gives exactly the pre-tokens of the whole file, while memory stays flat. A custom regex that
  matches across a line break may see the cut. Text with no such cut in ``LAST_RESORT_CHUNKS``
  chunks (CRLF lines without spaces) is cut after any line break; a single line longer than that
  with no single space in it is never cut.

Nothing is read into memory whole: memory stays flat however large the files are.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Union

from polytok import checks
from polytok.corpus_names import COMPRESSED_SUFFIXES, base_suffix, expand_paths, shown_name, unusable_name
from polytok.errors import CorpusError



class Texts:
    """Documents (str or bytes) given directly: every item is text, never a file name."""

    def __init__(self, documents: Iterable[str | bytes]):
        if isinstance(documents, (str, bytes, bytearray, os.PathLike)):
            raise CorpusError(
                f"texts() takes an iterable of documents, not a single {type(documents).__name__}; "
                "wrap it in a list: texts([document])"
            )
        self.documents = documents

    def __iter__(self) -> Iterator[str | bytes]:
        return iter(self.documents)

    def __repr__(self) -> str:
        return f"texts({self.documents!r})" if isinstance(self.documents, (list, tuple)) else "texts(...)"


def texts(documents: Iterable[str | bytes]) -> Texts:
    """Marks `documents` (str or bytes items) as texts, so that no item is read as a file name."""
    return Texts(documents)


#: A corpus: file names (a path, directory or glob, or a list or tuple of them), `texts(...)`, a
#: list of bytes, or any other iterable of documents and paths (see the module docstring).
Source = Union[str, os.PathLike, Texts, Iterable[Union[str, bytes, os.PathLike]]]

#: Target size in bytes of one plain-text document (a group of whole lines).
CHUNK_BYTES = 1 << 20
#: A document without a safe cut grows to at most this many chunks before it is cut at any line break.
LAST_RESORT_CHUNKS = 64
#: Rows per record batch read from a Parquet file.
PARQUET_BATCH_ROWS = 1024

# Multi-byte UTF-8 forms of the Unicode white-space characters the presets' \s matches: U+0085,
# U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F and U+3000.
_MULTIBYTE_SPACES = (rb"\xc2[\x85\xa0]", rb"\xe1\x9a\x80", rb"\xe2\x80[\x80-\x8a\xa8\xa9\xaf]", rb"\xe2\x81\x9f", rb"\xe3\x80\x80")


def _cut_pattern(delimiter: bytes) -> re.Pattern[bytes]:
    """`delimiter` with a character other than white space on each side, and no "/" after it (see
    the module docstring).

    The pattern starts with the delimiter, so the regex engine can scan for it quickly; the
    lookbehinds then check the character before it (printable ASCII or a multi-byte character
    that is not white space), the lookaheads the character after it.
    """
    after_delimiter = re.escape(delimiter)
    before = rb"(?<=[\x21-\xff]" + after_delimiter + rb")" + b"".join(
        rb"(?<!" + space + after_delimiter + rb")" for space in _MULTIBYTE_SPACES
    )
    after = rb"(?=[\x21-\xff])(?!/)(?!" + b"|".join(_MULTIBYTE_SPACES) + rb")"
    return re.compile(re.escape(delimiter) + before + after)


LINE_CUT = _cut_pattern(b"\n")
SPACE_CUT = _cut_pattern(b" ")

try:
    from zstandard import ZstdError as _ZstdError
except ImportError:  # zstandard is optional; without it .zst files are refused before reading

    class _ZstdError(Exception):
        pass

# Cuts are searched for in the last window of a buffer first, so a typical search is short.
_CUT_WINDOW = 1 << 16
# Plain text read as bytes (as_utf8) is checked to be UTF-8 this many bytes at a time.
_CHECK_BYTES = 1 << 16


def default_corpus() -> Path:
    """The bundled default corpus (gzip text), which `polytok train` uses when given none."""
    return Path(str(resources.files("polytok") / "data" / "default_corpus.txt.gz"))


def iter_documents(
    source: Source,
    *,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
    as_utf8: bool = False,
) -> Iterator[str | bytes]:
    """The documents of `source`, one at a time: str, or bytes when errors="bytes".

    The source is checked before this returns (options, file names that match nothing, a list that
    mixes file names and documents), so a caller can start a progress bar after it. Invalid UTF-8
    in a file raises CorpusError naming the file and byte offset, unless errors="replace" (U+FFFD)
    or errors="bytes" (raw bytes, lossless). Documents given directly pass through unchanged.
    as_utf8=True (for readers of bytes, such as the counter): plain-text files' documents come as
    their bytes, checked as errors="strict" checks them but never decoded whole.
    """
    checks.error_mode(errors)
    options = {"text_field": text_field, "text_column": text_column, "errors": errors, "as_utf8": as_utf8}
    if isinstance(source, (str, os.PathLike)):
        return _files_documents(expand_paths(source), options)
    if isinstance(source, (bytes, bytearray)):
        raise CorpusError("a bare bytes object is not a corpus; pass texts([data])")
    if isinstance(source, Texts):
        return _given_documents(source, options, texts_only=True)
    if isinstance(source, (list, tuple)):
        names = [isinstance(item, (str, os.PathLike)) for item in source]
        if any(names):
            return _files_documents(_named_files(source, names), options)
    try:
        iter(source)
    except TypeError:
        raise CorpusError(
            f"a corpus is a path, a glob, a list of them, or texts([...]); got {type(source).__name__}"
        ) from None
    return _given_documents(source, options, texts_only=False)


def _named_files(names: list | tuple, is_name: list[bool]) -> list[Path]:
    """The files a list or tuple of file names matches; CorpusError for an item that is no name
    or a name that matches nothing (the list was probably meant as texts)."""
    files: list[Path] = []
    for index, (item, named) in enumerate(zip(names, is_name)):
        if not named:
            raise CorpusError(
                f"corpus item {index} is {type(item).__name__}, but item {is_name.index(True)} is a file "
                "name: a list is either file names or documents; pass documents as texts([...])"
            )
        reason = isinstance(item, str) and unusable_name(item)
        if reason:
            raise CorpusError(
                f"corpus item {index} ({shown_name(item)!r}) cannot be a file name ({reason}); a list of str is a "
                "list of file names: to use the strings as texts, pass polytok.texts([...])"
            )
        try:
            files.extend(expand_paths(item))
        except CorpusError:
            if isinstance(item, os.PathLike) or os.path.lexists(item):
                raise
            raise CorpusError(
                f"corpus item {index} ({shown_name(item)!r}) names no file or directory; a list of str is a list "
                "of file names: to use the strings as texts, pass polytok.texts([...])"
            ) from None
    return files


def _files_documents(files: list[Path], options: dict[str, str]) -> Iterator[str | bytes]:
    for path in files:
        yield from read_file(path, **options)


def _given_documents(items: Iterable, options: dict[str, str], texts_only: bool) -> Iterator[str | bytes]:
    """Documents given directly; os.PathLike items name files unless the source is texts(...)."""
    for index, item in enumerate(items):
        if isinstance(item, (str, bytes)):
            yield item
        elif isinstance(item, bytearray):
            yield bytes(item)
        elif isinstance(item, os.PathLike) and not texts_only:
            for path in expand_paths(item):
                yield from read_file(path, **options)
        else:
            expected = "str or bytes" if texts_only else "str or bytes (a document) or a pathlib.Path"
            raise CorpusError(f"corpus item {index} is {type(item).__name__}; expected {expected}")


def read_file(
    path: Path, *, text_field: str = "text", text_column: str = "text", errors: str = "strict", as_utf8: bool = False
) -> Iterator[str | bytes]:
    """Yield the documents of one file, chosen by suffix (see the module docstring); as_utf8: as
    `iter_documents` says."""
    kind = base_suffix(path.name)
    try:
        if kind == ".parquet":
            yield from parquet_documents(path, text_column, errors)
            return
        with _open_binary(path) as stream:
            if kind == ".jsonl":
                yield from jsonl_documents(path, stream, text_field, errors)
            else:
                yield from text_documents(path, stream, errors, as_utf8=as_utf8)
    except (OSError, EOFError, ValueError, _ZstdError) as error:
        # gzip, zstandard and the file system report corrupt or unreadable input this way.
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None


def _open_binary(path: Path) -> IO[bytes]:
    """`path` opened for binary reading, decompressing .gz and .zst on the fly."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix == ".zst":
        try:
            import zstandard
        except ImportError:
            raise CorpusError(
                f"reading {str(path)!r} needs the zstandard package: pip install polytok[zstd]"
            ) from None
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")


def _where(path: Path) -> str:
    """How a byte offset is described: compressed files count offsets in the decompressed text."""
    if path.suffix.lower() in COMPRESSED_SUFFIXES:
        return f"{str(path)!r} (decompressed)"
    return repr(str(path))


def _decode(path: Path, data: bytes, offset: int, line: int | None, errors: str, as_utf8: bool = False) -> str | bytes:
    """`data` (which starts at byte `offset`, line `line` of the file; None: line unknown) as the
    errors mode asks; with as_utf8 and errors="strict", `data` itself once it is checked."""
    if errors == "bytes":
        return data
    if as_utf8 and errors == "strict":
        _check_utf8(path, data, offset, line)
        return data
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        raise _invalid_utf8(path, data, offset, line, error.start) from None


def _check_utf8(path: Path, data: bytes, offset: int, line: int | None) -> None:
    """CorpusError unless `data` is UTF-8, checked in slices of about `_CHECK_BYTES` that end
    before a character's first byte, so that no str of the whole is made; the first error is
    found where decoding the whole would find it."""
    view = memoryview(data)
    start = 0
    while start < len(data):
        stop = min(start + _CHECK_BYTES, len(data))
        for _ in range(3):  # a character has at most 3 continuation bytes (0b10xxxxxx)
            if stop < len(data) and data[stop] & 0xC0 == 0x80:
                stop += 1
        try:
            str(view[start:stop], "utf-8")
        except UnicodeDecodeError as error:
            raise _invalid_utf8(path, data, offset, line, start + error.start) from None
        start = stop


def _invalid_utf8(path: Path, data: bytes, offset: int, line: int | None, position: int) -> CorpusError:
    """The error for invalid UTF-8 at `position` of `data` (as in `_decode`)."""
    lines_before = 0 if line is None else data.count(b"\n", 0, position)
    bad_line = "" if line is None else f" (line {line + lines_before})"
    return CorpusError(
        f"{_where(path)}: invalid UTF-8 at byte offset {offset + position}{bad_line}; "
        "expected UTF-8 text, or pass errors='replace' (U+FFFD) or errors='bytes' (raw bytes; --errors on the command line)"
    )


def _last_match(pattern: re.Pattern[bytes], buffer: bytearray, start: int) -> re.Match[bytes] | None:
    """The last match of `pattern` after `start` that has a whole character after it to check."""
    last = None
    for match in pattern.finditer(buffer, start):
        # The character after a cut may be up to 3 bytes long; its tail may not have been read yet.
        if match.end() + 3 > len(buffer):
            break
        last = match
    return last


def _last_cut(buffer: bytearray, start: int) -> int:
    """The last position after `start` where a plain-text document may end; 0 if there is none.

    A cut between lines is preferred; a cut at a space only serves lines longer than a chunk.
    """
    # The last window nearly always holds a cut, so the whole buffer is rarely scanned.
    window = max(start, len(buffer) - _CUT_WINDOW)
    line = _last_match(LINE_CUT, buffer, window) or _last_match(LINE_CUT, buffer, start)
    if line is not None:
        return line.end()
    space = _last_match(SPACE_CUT, buffer, window) or _last_match(SPACE_CUT, buffer, start)
    if space is not None:
        return space.start()
    return 0


def text_documents(
    path: Path, stream: IO[bytes], errors: str, offset: int = 0, line: int | None = 1, as_utf8: bool = False
) -> Iterator[str | bytes]:
    """Plain text as documents of whole lines, about CHUNK_BYTES each (see the module docstring);
    the stream starts at byte `offset`, line `line` of the file (None: not known). Only the
    unread rest of the text is held here while a document is out (not the block it came in)."""
    buffer = bytearray()
    # offset and line say where buffer[0] lies in the file
    searched = 0  # buffer[:searched] is known to hold no cut
    while block := stream.read(CHUNK_BYTES):
        buffer += block
        del block
        if len(buffer) < CHUNK_BYTES:
            continue
        cut = _last_cut(buffer, searched)
        if cut == 0 and len(buffer) >= LAST_RESORT_CHUNKS * CHUNK_BYTES:
            # No cut that is safe for every preset (e.g. CRLF text without spaces, where gpt2
            # splits "\r\n" differently at the end of a document): cut after the last line
            # break anyway, so that memory stays bounded.
            cut = buffer.rfind(b"\n") + 1
        if cut == 0:
            # Cuts in the last 3 bytes could not be checked yet; search them again next time.
            searched = max(0, len(buffer) - 4)
            continue
        with memoryview(buffer) as view:
            document = bytes(view[:cut])
            buffer = bytearray(view[cut:])
        decoded = _decode(path, document, offset, line, errors, as_utf8)
        offset += cut
        if line is not None:
            line += document.count(b"\n")
        del document
        yield decoded
        del decoded
        searched = 0
    if buffer:
        yield _decode(path, bytes(buffer), offset, line, errors, as_utf8)


def is_plain_text(path: Path) -> bool:
    """Whether `path` is read as plain text (cut into chunks), not as records (.jsonl, .parquet)."""
    return base_suffix(path.name) not in (".jsonl", ".parquet")


def file_format(path: Path) -> str:
    """How `path` is read: "jsonl", "parquet" or "text" (see the module docstring)."""
    kind = base_suffix(path.name)
    return kind[1:] if kind in (".jsonl", ".parquet") else "text"


class BoundedStream:
    """The next `size` bytes of a binary stream, as a stream of its own (reading only)."""

    def __init__(self, stream: IO[bytes], size: int):
        self.stream, self.left = stream, size

    def read(self, size: int) -> bytes:
        data = self.stream.read(min(size, self.left))
        self.left -= len(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        """The lines, as a binary stream yields them."""
        while self.left > 0 and (line := self.stream.readline(self.left)):
            self.left -= len(line)
            yield line


def jsonl_documents(
    path: Path, stream: IO[bytes] | BoundedStream, field: str, errors: str, offset: int = 0, line: int | None = 1
) -> Iterator[str | bytes]:
    """The `field` string of each JSON line; blank lines are skipped. The stream starts at byte
    `offset`, line `line` of the file (None: not known, so errors name the line's byte offset)."""
    for number, raw in enumerate(stream, start=line or 1):
        where = f"{str(path)!r}, line {number}" if line is not None else f"{str(path)!r}, the line at byte {offset}"
        if raw.strip():
            # errors="bytes" keeps invalid bytes as lone surrogates, turned back into bytes below.
            text = _decode(path, raw, offset, number if line is not None else None, errors) if errors != "bytes" else raw.decode("utf-8", "surrogateescape")
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise CorpusError(f"{where}: invalid JSON ({error.msg} at column {error.colno})") from None
            if not isinstance(record, dict):
                raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
            if field not in record:
                fields = ", ".join(map(repr, list(record)[:10])) or "none"
                raise CorpusError(f"{where}: no field {field!r} (fields: {fields}); choose one with text_field")
            value = record[field]
            if not isinstance(value, str):
                raise CorpusError(f"{where}: field {field!r} is {type(value).__name__}; expected a string")
            yield value.encode("utf-8", "surrogateescape") if errors == "bytes" else value
        offset += len(raw)


def load_pyarrow(path: Path) -> Any:
    """The pyarrow module with pyarrow.parquet loaded; CorpusError naming `path` if it is missing."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise CorpusError(
            f"reading {str(path)!r} needs the pyarrow package: pip install polytok[parquet]"
        ) from None
    return pyarrow


def parquet_documents(path: Path, column: str, errors: str, row_groups: range | None = None) -> Iterator[str | bytes]:
    """The `column` values of a Parquet file (of `row_groups` only, if given), read one record
    batch at a time."""
    pyarrow = load_pyarrow(path)
    with _seekable(path) as local:
        try:
            parquet = pyarrow.parquet.ParquetFile(local)
        except pyarrow.ArrowException as error:
            raise CorpusError(f"cannot read {str(path)!r} as Parquet: {error}") from None
        schema = parquet.schema_arrow
        if column not in schema.names:
            columns = ", ".join(map(repr, schema.names[:10]))
            raise CorpusError(f"{str(path)!r}: no column {column!r} (columns: {columns}); choose one with text_column")
        kind = schema.field(column).type
        is_text = pyarrow.types.is_string(kind) or pyarrow.types.is_large_string(kind)
        if not (is_text or pyarrow.types.is_binary(kind) or pyarrow.types.is_large_binary(kind)):
            raise CorpusError(f"{str(path)!r}: column {column!r} holds {kind}; expected strings")
        row = 0 if row_groups is None else sum(parquet.metadata.row_group(i).num_rows for i in range(row_groups.start))
        groups = None if row_groups is None else list(row_groups)
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=groups, columns=[column]):
            for value in batch.column(0).to_pylist():
                if value is None:
                    raise CorpusError(f"{str(path)!r}, row {row}: column {column!r} is null; expected a string")
                if is_text:
                    yield value.encode("utf-8") if errors == "bytes" else value
                else:
                    yield _decode_value(path, row, column, value, errors)
                row += 1


def _decode_value(path: Path, row: int, column: str, value: bytes, errors: str) -> str | bytes:
    """A binary Parquet value decoded as the errors mode asks."""
    if errors == "bytes":
        return value
    try:
        return value.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{str(path)!r}, row {row}: invalid UTF-8 at byte offset {error.start} of column {column!r}; "
            "expected UTF-8 text, or pass errors='replace' (U+FFFD) or errors='bytes' (raw bytes; --errors on the command line)"
        ) from None


@contextlib.contextmanager
def _seekable(path: Path) -> Iterator[str]:
    """A seekable local file holding `path`: compressed files are decompressed to a temporary
    file first, because Parquet readers need random access."""
    if path.suffix.lower() not in COMPRESSED_SUFFIXES:
        yield str(path)
        return
    descriptor, temporary = tempfile.mkstemp(suffix=".parquet")
    try:
        with os.fdopen(descriptor, "wb") as target, _open_binary(path) as stream:
            shutil.copyfileobj(stream, target, CHUNK_BYTES)
        yield temporary
    finally:
        os.unlink(temporary)
