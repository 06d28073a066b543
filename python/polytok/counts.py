"""PreTokenCounts: the unique pre-tokens of a corpus with their counts, the sufficient statistic
that every trainer, the LP and the corpus metrics read; and `count`, which makes one.

Counts files (written by `PreTokenCounts.save`, conventionally `*.ptc`) are little-endian binary:

    magic         8 bytes   b"PTCOUNTS"
    version       uint32    1
    header size   uint32    H
    header        H bytes   UTF-8 JSON: {"pattern": str | null, "words": n, "data_bytes": m,
                            "sha256": hex digest of everything after the header}
    offsets       (n + 1) x int64    pre-token i is data[offsets[i]:offsets[i + 1]]
    counts        n x uint64
    data          m bytes   the pre-tokens back to back, sorted bytewise

The header key "words" is the number n of unique pre-tokens (its name is part of format 1).
`WordCounts` is a deprecated name of `PreTokenCounts`, kept for one release.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import warnings
from typing import Any, Iterator, Mapping

import numpy as np

from polytok import _core, checks
from polytok.files import atomic_write
from polytok.corpus import Source, iter_documents
from polytok.errors import ConfigError, CorpusError, FormatError, PatternError
from polytok.pretokenize import resolve_pattern
from polytok.progress import progress_bar

MAGIC = b"PTCOUNTS"
FORMAT_VERSION = 1
_PREAMBLE = struct.Struct("<8sII")  # magic, version, header size

#: Documents are handed to the Rust counter in batches of about this many bytes per thread (one
#: plain-text chunk each), up to a cap: the batch in flight is part of the counter's peak memory.
#: A batch goes once it holds 15/16 of its bytes, so that chunks a little under CHUNK_BYTES still
#: make one per thread.
BATCH_BYTES_PER_THREAD = 1 << 20
MAX_BATCH_BYTES = 16 << 20


class PreTokenCounts:
    """Unique pre-tokens (bytes), sorted bytewise, with 64-bit counts, stored as flat arrays:
    `data` holds the pre-tokens back to back, `offsets` (int64, n+1) their bounds, `counts`
    (uint64). `pattern` is the pre-tokenisation regex they were cut with (None: no split)."""

    def __init__(self, data: bytes, offsets: np.ndarray, counts: np.ndarray, pattern: str | None = None):
        self.data = data
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.uint64)
        self.pattern = pattern

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Under pickle protocol 5 the data goes out of band, as the arrays do, so that Ray puts
        a shard's counts in its object store without a copy of them in the worker."""
        data = pickle.PickleBuffer(self.data) if protocol >= 5 else self.data
        return _unpickle, (data, self.offsets, self.counts, self.pattern)

    @classmethod
    def from_dict(cls, counts: Mapping[bytes, int], pattern: str | None = None) -> "PreTokenCounts":
        """Build from a {pre-token: count} mapping (small corpora, tests)."""
        pre_tokens = sorted(p for p, c in counts.items() if c > 0 and len(p) > 0)
        offsets = np.zeros(len(pre_tokens) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pre_tokens], out=offsets[1:])
        return cls(b"".join(pre_tokens), offsets, np.array([counts[p] for p in pre_tokens], dtype=np.uint64), pattern)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        for i in range(len(self)):
            yield self.data[self.offsets[i] : self.offsets[i + 1]], int(self.counts[i])

    def to_dict(self) -> dict[bytes, int]:
        return dict(iter(self))

    @property
    def total(self) -> int:
        """The number of pre-tokens in the corpus: the sum of the counts."""
        return int(self.counts.sum(dtype=np.uint64))

    def __add__(self, other: "PreTokenCounts") -> "PreTokenCounts":
        """The counts of two shards together; both must be cut with the same pattern."""
        if not isinstance(other, PreTokenCounts):
            return NotImplemented
        if self.pattern != other.pattern:
            raise ConfigError(
                f"cannot add counts made with different patterns: {self.pattern!r} and {other.pattern!r}"
            )
        try:
            data, offsets, counts = _core.merge_pre_token_counts(
                (self.data, self.offsets, self.counts), (other.data, other.offsets, other.counts)
            )
        except ValueError as error:
            raise ConfigError(f"cannot add malformed PreTokenCounts: {error}") from None
        return PreTokenCounts(data, offsets, counts, self.pattern)

    def __radd__(self, other: object) -> "PreTokenCounts":
        # sum(shards) starts from 0.
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the counts file format above, atomically (a temporary file, then a rename)."""
        offsets = np.ascontiguousarray(self.offsets, dtype="<i8")
        counts = np.ascontiguousarray(self.counts, dtype="<u8")
        digest = hashlib.sha256()
        for part in (offsets, counts, self.data):
            digest.update(part)
        header = json.dumps(
            {"pattern": self.pattern, "words": len(self), "data_bytes": len(self.data), "sha256": digest.hexdigest()},
            ensure_ascii=True,
        ).encode("ascii")
        with atomic_write(path, "wb") as stream:
            stream.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header)))
            stream.write(header)
            for part in (offsets, counts, self.data):
                stream.write(part)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "PreTokenCounts":
        """Read a counts file; FormatError names what is wrong with a truncated or edited one."""
        name = repr(os.fspath(path))
        try:
            with open(path, "rb") as stream:
                offsets, counts, data, pattern = _read_counts(name, stream)
        except OSError as error:
            raise FormatError(f"cannot read counts file {name}: {error.strerror}") from None
        data_bytes = len(data)
        if offsets[0] != 0 or offsets[-1] != data_bytes or (offsets[1:] <= offsets[:-1]).any():
            raise FormatError(f"{name}: offsets must rise strictly from 0 to the data size {data_bytes}")
        if (counts == 0).any():
            raise FormatError(f"{name}: a count is zero; every stored pre-token occurs at least once")
        try:
            _core.check_sorted_counts((data, offsets, counts))
        except ValueError as error:
            raise FormatError(f"{name}: the pre-tokens are not sorted bytewise without repeats: {error}") from None
        return cls(data, offsets, counts, pattern)


def _read_counts(name: str, stream: Any) -> tuple[np.ndarray, np.ndarray, bytes, str | None]:
    """The offsets, counts, data and pattern of an open counts file, read straight into the arrays
    and the data (the file is never held whole besides them), its size and checksum checked."""
    total = os.fstat(stream.fileno()).st_size
    preamble = stream.read(_PREAMBLE.size)
    if len(preamble) < _PREAMBLE.size or preamble[:8] != MAGIC:
        raise FormatError(f"{name} is not a polytok counts file (it does not start with {MAGIC!r})")
    _, version, header_size = _PREAMBLE.unpack(preamble)
    if version != FORMAT_VERSION:
        raise FormatError(f"{name}: counts format version {version}; this polytok reads version {FORMAT_VERSION}")
    if header_size > total - _PREAMBLE.size:  # checked before reading: read(n) allocates n bytes
        raise FormatError(f"{name} is truncated inside its header ({total - _PREAMBLE.size} of {header_size} bytes)")
    header = _parse_header(name, stream.read(header_size), header_size)
    size, data_bytes = header["words"], header["data_bytes"]
    expected = _PREAMBLE.size + header_size + 8 * (size + 1) + 8 * size + data_bytes
    if total != expected:
        state = "truncated" if total < expected else "too long"
        raise FormatError(
            f"{name} is {state}: {total} bytes, but its header ({size} pre-tokens, {data_bytes} data bytes) "
            f"makes it {expected}"
        )
    offsets, counts = np.empty(size + 1, dtype="<i8"), np.empty(size, dtype="<u8")
    digest = hashlib.sha256()
    for part in (offsets, counts):
        if stream.readinto(part) != part.nbytes:
            raise FormatError(f"{name} was truncated while it was read")
        digest.update(part)
    data = stream.read(data_bytes)
    digest.update(data)
    if len(data) != data_bytes:
        raise FormatError(f"{name} was truncated while it was read")
    if digest.hexdigest() != header["sha256"]:
        raise FormatError(f"{name}: the checksum does not match the content; the file was edited or corrupted")
    return offsets.astype(np.int64, copy=False), counts.astype(np.uint64, copy=False), data, header["pattern"]


def _unpickle(data: Any, offsets: np.ndarray, counts: np.ndarray, pattern: str | None) -> PreTokenCounts:
    """A pickled PreTokenCounts (`data` comes back as a buffer when it went out of band)."""
    return PreTokenCounts(data if isinstance(data, bytes) else bytes(data), offsets, counts, pattern)


def _parse_header(name: str, header_bytes: bytes, header_size: int) -> dict:
    """The JSON header of a counts file, with every field checked."""
    if len(header_bytes) != header_size:
        raise FormatError(f"{name} is truncated inside its header ({len(header_bytes)} of {header_size} bytes)")
    try:
        header = json.loads(header_bytes)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:  # ValueError: JSONDecodeError, too many digits
        raise FormatError(f"{name}: the header is not valid JSON ({type(error).__name__}: {str(error)[:200]})") from None
    if not isinstance(header, dict):
        raise FormatError(f"{name}: the header is not a JSON object")
    expected_types = {"pattern": (str, type(None)), "words": (int,), "data_bytes": (int,), "sha256": (str,)}
    for field, types in expected_types.items():
        if field not in header:
            raise FormatError(f"{name}: the header lacks the field {field!r}")
        value = header[field]
        if not isinstance(value, types) or isinstance(value, bool) or (isinstance(value, int) and value < 0):
            raise FormatError(f"{name}: header field {field!r} is {value!r}; expected {' or '.join(t.__name__ for t in types)}")
    return header


def count_local(
    corpus: Source,
    pattern: str | None = checks.DEFAULT_PATTERN,
    special_tokens: list[str] | None = None,
    *,
    num_threads: int | None = None,
    progress: bool = True,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
) -> PreTokenCounts:
    """`polytok.count` in this process: the pre-tokens of a corpus counted in the Rust core on
    `num_threads` threads (None: all cores), special tokens split out and not counted."""
    counter, regex = make_counter(pattern, special_tokens, checks.num_threads(num_threads))

    batch_limit = min(BATCH_BYTES_PER_THREAD * (num_threads or os.cpu_count() or 1), MAX_BATCH_BYTES) * 15 // 16
    documents = non_empty = 0
    batch: list[str | bytes] = []
    batch_size = 0
    # The source is checked before the bar starts, so a bad one fails without printing a bar.
    source = iter_documents(corpus, text_field=text_field, text_column=text_column, errors=errors, as_utf8=True)
    with progress_bar(progress, desc="counting", unit="B", unit_scale=True) as bar:
        for document in source:
            documents += 1
            if not document:
                continue
            non_empty += 1
            if isinstance(document, str) and not document.isascii():
                # Held as str, a batch would take 1, 2 or 4 bytes a character plus the UTF-8 copy
                # the Rust side reads; its UTF-8 alone is smaller (lone surrogates as the core
                # passes them).
                document = document.encode("utf-8", "surrogatepass")
            batch.append(document)
            batch_size += len(document)
            if batch_size >= batch_limit:
                bar.update(counter.add(batch))
                batch, batch_size = [], 0
        if batch:
            bar.update(counter.add(batch))

    data, offsets, counts = counter.finish()
    if len(counts) == 0:
        raise nothing_counted(corpus, documents, non_empty)
    return PreTokenCounts(data, offsets, counts, regex)


def make_counter(pattern: str | None, special_tokens: list[str] | None, num_threads: int | None) -> tuple[Any, str | None]:
    """The Rust counter for `pattern` and `special_tokens`, and the pattern's regex; ConfigError
    or PatternError for a bad one."""
    specials = checks.special_tokens(special_tokens)
    regex = resolve_pattern(pattern)
    try:
        counter = _core.PreTokenCounter(regex, [token.encode("utf-8") for token in specials], num_threads)
    except ValueError as error:
        raise PatternError(f"invalid pre-tokenisation regex {pattern!r}: {error}") from None
    return counter, regex


def nothing_counted(corpus: Source, documents: int, non_empty: int) -> CorpusError:
    """The error for a corpus of `documents` documents (`non_empty` of them not empty) that gave
    no pre-token."""
    if isinstance(corpus, (str, os.PathLike)):
        described = repr(os.fspath(corpus))
    elif isinstance(corpus, (list, tuple)) and corpus and all(isinstance(i, (str, os.PathLike)) for i in corpus):
        described = ", ".join(repr(os.fspath(name)) for name in corpus[:3]) + (" ..." if len(corpus) > 3 else "")
    else:
        described = "the corpus"
    if documents == 0:
        reason = "holds no documents"
    elif non_empty == 0:
        reason = f"holds only empty documents ({documents})"
    else:
        reason = "holds nothing but special tokens"
    return CorpusError(f"{described} {reason}; expected some text to count")


def word_counts_alias() -> type[PreTokenCounts]:
    """`PreTokenCounts` under its deprecated name `WordCounts`, with a DeprecationWarning that
    points at the code using the name (this is called from a module `__getattr__`)."""
    warnings.warn("WordCounts is deprecated; use PreTokenCounts (the same class)",
                  DeprecationWarning, stacklevel=3)
    return PreTokenCounts


def __getattr__(name: str) -> Any:
    """`polytok.counts.WordCounts`: the deprecated name of `PreTokenCounts`, with a warning."""
    if name == "WordCounts":
        return word_counts_alias()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
