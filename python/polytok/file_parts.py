"""Parts of one corpus file read alone, so that counting can be spread over machines.

An uncompressed file is cut where the whole-file reader of corpus.py could cut a document: a
plain-text file at `next_cut`, a .jsonl file at `next_line_start`, a .parquet file between row
groups. Reading every span of a file with these readers gives exactly the documents' pre-tokens of
reading the file whole.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from polytok import checks
from polytok.corpus import (CHUNK_BYTES, LAST_RESORT_CHUNKS, LINE_CUT, SPACE_CUT, BoundedStream,
                            jsonl_documents, load_pyarrow, parquet_documents, text_documents)
from polytok.corpus_names import COMPRESSED_SUFFIXES
from polytok.errors import CorpusError


def is_splittable(path: Path) -> bool:
    """Whether a part of `path` can be read alone: an uncompressed plain-text file (`next_cut`,
    `read_text_span`), .jsonl file (`next_line_start`, `read_jsonl_span`) or .parquet file (by
    row group: `parquet_row_group_sizes`, `read_parquet_row_groups`)."""
    return path.suffix.lower() not in COMPRESSED_SUFFIXES


def next_line_start(path: Path, position: int) -> int | None:
    """The first byte at or after `position` of `path` that starts a line (0, or one just after a
    line break); None if no line starts there before the end of the file."""
    if position <= 0:
        return 0
    try:
        with open(path, "rb") as stream:
            stream.seek(position - 1)
            base = position - 1
            while block := stream.read(CHUNK_BYTES):
                found = block.find(b"\n")
                if found >= 0:
                    return base + found + 1
                base += len(block)
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None
    return None


def read_jsonl_span(path: Path, start: int, stop: int, text_field: str = "text", errors: str = "strict") -> Iterator[str | bytes]:
    """The documents of the lines in bytes [start, stop) of the uncompressed .jsonl file `path`,
    where start and stop are 0, cuts from `next_line_start` or the file's end. Errors name the
    line by its byte offset in the file (its number is not known without reading from the start)."""
    checks.error_mode(errors)
    try:
        with open(path, "rb") as stream:
            stream.seek(start)
            yield from jsonl_documents(path, BoundedStream(stream, stop - start), text_field, errors, start, 1 if start == 0 else None)
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None


def parquet_row_group_sizes(path: Path) -> list[int]:
    """The bytes on disk of each row group of the uncompressed Parquet file `path`."""
    pyarrow = load_pyarrow(path)
    try:
        metadata = pyarrow.parquet.ParquetFile(str(path)).metadata
    except (OSError, pyarrow.ArrowException) as error:
        raise CorpusError(f"cannot read {str(path)!r} as Parquet: {error}") from None
    return [
        sum(group.column(index).total_compressed_size for index in range(group.num_columns))
        for group in map(metadata.row_group, range(metadata.num_row_groups))
    ]


def read_parquet_row_groups(
    path: Path, first: int, stop: int, text_column: str = "text", errors: str = "strict"
) -> Iterator[str | bytes]:
    """The documents of row groups [first, stop) of the uncompressed Parquet file `path`."""
    checks.error_mode(errors)
    try:
        yield from parquet_documents(path, text_column, errors, range(first, stop))
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None


def next_cut(path: Path, position: int) -> int | None:
    """The first place at or after byte `position` of the plain-text file `path` where a document
    may end (a cut between lines, else at a single space, as the reader cuts; see corpus.py's
    docstring), searched for up to LAST_RESORT_CHUNKS chunks on; None if there is none there."""
    # The lookbehinds see a few bytes before the window; the lookaheads need 3 bytes after a cut.
    margin = 8
    start = max(0, position - margin)
    try:
        with open(path, "rb") as stream:
            for window in range(LAST_RESORT_CHUNKS):
                base = start + window * CHUNK_BYTES
                stream.seek(base)
                buffer = stream.read(CHUNK_BYTES + 2 * margin)
                skip = max(0, position - base)
                line = LINE_CUT.search(buffer, skip)
                if line is not None and line.end() + 3 <= len(buffer):
                    return base + line.end()
                space = SPACE_CUT.search(buffer, skip)
                if space is not None and space.end() + 3 <= len(buffer):
                    return base + space.start()
                if len(buffer) < CHUNK_BYTES + 2 * margin:
                    return None  # the end of the file
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None
    return None


def read_text_span(
    path: Path, start: int, stop: int, errors: str = "strict", as_utf8: bool = False
) -> Iterator[str | bytes]:
    """The documents of bytes [start, stop) of the plain-text file `path`, where start and stop
    are 0, cuts from `next_cut` or the file's end: together the spans of a file hold exactly the
    pre-tokens of the whole file. Invalid UTF-8 is reported at its byte offset in the file;
    as_utf8: as `iter_documents` says."""
    checks.error_mode(errors)
    try:
        with open(path, "rb") as stream:
            stream.seek(start)
            span = BoundedStream(stream, stop - start)
            yield from text_documents(path, span, errors, offset=start, line=1 if start == 0 else None, as_utf8=as_utf8)
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error}") from None
