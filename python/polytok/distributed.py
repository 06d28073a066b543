"""Counting on a Ray cluster: the corpus files are cut into shards, each Ray task counts one
shard with the Rust core (`polytok.count` on its documents), and this process adds each shard's
counts into one Rust counter as they come in (see `_count_and_add`), so that memory is bounded by
the counts, not the corpus.

A shard is a list of spans: whole files, or parts of a large file: of plain text, cut where the
corpus reader would cut a document (`polytok.file_parts.next_cut`); of .jsonl, between lines; of
.parquet, between row groups. So the spans of a file hold exactly its pre-tokens. Counts add
exactly, so the result is byte-identical to the local count whatever the number of workers, shards
or retries.

The driver (this process) lists the files and finds the cuts; every node reads the files at the
same path, so they must be on storage that every node sees. A task whose worker dies is retried
(`retries` times); one that fails on bad input raises that input's polytok.Error here, and the
other tasks are cancelled. Nothing is written: `count` returns the counts or raises.
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from polytok import checks, corpus, corpus_names, file_parts
from polytok.corpus import Source, texts
from polytok.counts import PreTokenCounts, count_local, make_counter, nothing_counted
from polytok.errors import ClusterError, ConfigError, CorpusError, Error
from polytok.progress import progress_bar
from polytok.version import __version__

#: What `address` may name besides host:port (see `connect`).
ADDRESS_KEYWORDS = ("local", "auto")
#: Shards get about this many per cluster CPU, so that a slow shard does not hold the others up...
SHARDS_PER_CPU = 4
#: ...within these sizes (bytes of the files on disk).
MIN_SHARD_BYTES = 4 << 20
MAX_SHARD_BYTES = 256 << 20
#: Shards counted at a time per task slot: enough to keep the CPUs busy while counts are added.
IN_FLIGHT_PER_CPU = 2
#: How often a task whose worker died is run again (Ray's own default).
DEFAULT_RETRIES = 3
#: Seconds to wait for a cluster's host:port to accept a connection.
CONNECT_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Span:
    """Bytes [start, stop) of a file (row groups [start, stop) of a Parquet file), or the whole
    file (stop None); `size` is its length on disk."""

    path: str
    start: int
    stop: int | None
    size: int

    def __str__(self) -> str:
        if self.stop is None:
            return self.path
        unit = "row groups" if corpus.file_format(Path(self.path)) == "parquet" else "bytes"
        return f"{self.path} {unit} {self.start}..{self.stop}"


def corpus_files(source: Source) -> list[Path]:
    """The files a corpus of file names names (a path, directory or glob, or a list of them), as
    absolute paths: Ray workers do not run in the driver's working directory."""
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    if isinstance(source, (list, tuple)) and source and all(isinstance(item, (str, os.PathLike)) for item in source):
        return [Path(os.path.abspath(path)) for item in source for path in corpus_names.expand_paths(item)]
    raise ConfigError(
        "engine='ray' counts files that every node can read: pass a path, a directory, a glob or a list of "
        f"them, not {type(source).__name__}; documents in memory are counted by the local engine"
    )


def plan_shards(files: list[Path], shard_bytes: int) -> list[list[Span]]:
    """The files as shards of about `shard_bytes` each: small files grouped, larger files cut into
    spans: plain text at safe cuts, .jsonl between lines, .parquet between row groups (compressed
    files stay whole)."""
    spans: list[Span] = []
    for path in files:
        size = _file_size(path)
        parts = _file_spans(path, size, shard_bytes) if size > shard_bytes and file_parts.is_splittable(path) else []
        spans += parts if len(parts) > 1 else [Span(str(path), 0, None, size)]
    shards: list[list[Span]] = []
    filled = 0
    for span in spans:
        if not shards or filled + span.size > shard_bytes:
            shards.append([])
            filled = 0
        shards[-1].append(span)
        filled += span.size
    return shards


def _file_spans(path: Path, size: int, shard_bytes: int) -> list[Span]:
    """The spans of about `shard_bytes` of one uncompressed file of `size` bytes."""
    spans: list[Span] = []
    if corpus.file_format(path) == "parquet":
        first = filled = 0
        groups = file_parts.parquet_row_group_sizes(path)
        for index, group in enumerate(groups):
            filled += group
            if filled >= shard_bytes or index == len(groups) - 1:
                spans.append(Span(str(path), first, index + 1, filled))
                first, filled = index + 1, 0
        return spans
    next_cut = file_parts.next_line_start if corpus.file_format(path) == "jsonl" else file_parts.next_cut
    start = 0
    while start < size:
        cut = next_cut(path, start + shard_bytes) if start + shard_bytes < size else None
        stop = size if cut is None or cut >= size else cut
        spans.append(Span(str(path), start, stop, stop - start))
        start = stop
    return spans


def shard_size(total_bytes: int, cpus: int) -> int:
    """Shard bytes for a corpus of `total_bytes` on `cpus` CPUs (see SHARDS_PER_CPU)."""
    return max(MIN_SHARD_BYTES, min(MAX_SHARD_BYTES, total_bytes // max(1, SHARDS_PER_CPU * cpus) + 1))


def count_on_ray(
    source: Source,
    pattern: str | None = checks.DEFAULT_PATTERN,
    special_tokens: list[str] | None = None,
    *,
    address: str | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
    shard_bytes: int | None = None,
    retries: int = DEFAULT_RETRIES,
) -> PreTokenCounts:
    """`polytok.count(source, ..., engine="ray", address=address)`: the counts of the corpus files,
    counted on a Ray cluster in shards of `shard_bytes` (None: see `shard_size`), each task on
    `num_threads` threads (None: 1), a task whose worker dies retried `retries` times."""
    checks.error_mode(errors)
    checks.optional_integer("shard_bytes", shard_bytes)
    checks.integer("retries", retries, 0)
    checks.num_threads(num_threads)
    # The pattern and special tokens are checked before any cluster is started.
    _, regex = make_counter(pattern, special_tokens, 1)
    files = corpus_files(source)
    with connect(address) as ray:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        total = sum(_file_size(path) for path in files)
        shards = plan_shards(files, shard_bytes or shard_size(total, cpus))
        options = {"text_field": text_field, "text_column": text_column, "errors": errors}
        threads = num_threads or 1
        largest_node = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node["Alive"]), default=0)
        if threads > largest_node:
            raise ConfigError(
                f"num_threads={threads}, but the largest node of the Ray cluster has {largest_node:g} CPUs: "
                "a task could never be placed"
            )
        count_shard = ray.remote(_count_shard).options(num_cpus=threads, num_returns=2, max_retries=retries)
        arguments = (__version__, regex, special_tokens, threads, options)
        window = IN_FLIGHT_PER_CPU * max(1, cpus // threads)
        with progress_bar(progress, desc="counting", unit="B", unit_scale=True, total=total) as bar:
            counts, documents, non_empty = _count_and_add(ray, count_shard, shards, arguments, window, retries, bar)
    if counts is None:
        raise nothing_counted(source, documents, non_empty)
    return counts


def _file_size(path: Path) -> int:
    """The size of a corpus file on disk; CorpusError if it cannot be read."""
    try:
        return os.path.getsize(path)
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error.strerror}") from None


def _count_and_add(
    ray: Any, count_shard: Any, shards: list[list[Span]], arguments: tuple, window: int, retries: int, bar: Any
) -> tuple[PreTokenCounts | None, int, int]:
    """The sum of the shards' counts, with their documents and non-empty documents.

    At most `window` shards are counted at a time. Each shard's counts are fetched as soon as
    they are done and added into one Rust counter here (`PreTokenCounter.add_counts`), then dropped:
    the cluster holds the counts of at most `window` shards and this process one running sum,
    whatever the corpus size. The sum is exact in any order.
    """
    _, regex, special_tokens, _, _ = arguments
    counter, _ = make_counter(regex, special_tokens, None)
    waiting = iter(shards)
    counting: dict[Any, tuple[list[Span], Any]] = {}  # summary reference -> (shard, counts reference)
    documents = non_empty = 0
    added = False

    def start_next() -> None:
        shard = next(waiting, None)
        if shard is not None:
            summary, counts = count_shard.remote(shard, *arguments)
            counting[summary] = (shard, counts)

    try:
        for _ in range(window):
            start_next()
        while counting:
            (done,), _ = ray.wait(list(counting), num_returns=1)
            shard, reference = counting.pop(done)
            what = "counting " + ", ".join(map(str, shard))
            shard_documents, shard_non_empty = get_result(ray, done, what, retries)
            documents += shard_documents
            non_empty += shard_non_empty
            start_next()
            counts = get_result(ray, reference, what, retries)
            del reference  # the cluster may free the shard's counts now
            if counts is not None:
                counter.add_counts((counts.data, counts.offsets, counts.counts))
                added = True
            del counts
            bar.update(sum(span.size for span in shard))
    except BaseException:
        for summary in counting:
            ray.cancel(summary, force=True)
        raise
    if not added:
        return None, documents, non_empty
    data, offsets, counts = counter.finish()
    return PreTokenCounts(data, offsets, counts, regex), documents, non_empty


def get_result(ray: Any, reference: Any, what: str, retries: int) -> Any:
    """ray.get(reference) of a task doing `what`, with the task's polytok.Error raised as itself
    and a lost worker or node as a ClusterError that names `what`."""
    from ray import exceptions

    try:
        return ray.get(reference)
    except exceptions.RayTaskError as error:
        if isinstance(error.cause, Error):
            raise error.cause from None
        raise
    except exceptions.RayError as error:
        raise ClusterError(
            f"a Ray task failed {what} after {retries} retries: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no details'}"
        ) from None


def _count_shard(
    shard: list[Span], version: str, regex: str | None, special_tokens: list[str] | None, threads: int, options: dict[str, str]
) -> tuple[tuple[int, int], PreTokenCounts | None]:
    """A Ray task: the (documents, non-empty documents) of a shard and its counts (None: nothing
    to count, which is an error only if the whole corpus has nothing)."""
    if version != __version__:
        raise ClusterError(
            f"a Ray worker runs polytok {__version__} but the driver runs {version}; "
            "install the same polytok on every node"
        )
    seen = {"documents": 0, "non_empty": 0, "read": False}

    def documents() -> Iterator[str | bytes]:
        for span in shard:
            try:
                for document in _span_documents(span, options):
                    seen["documents"] += 1
                    seen["non_empty"] += bool(document)
                    yield document
            except CorpusError as error:
                raise CorpusError(f"{error} (read on Ray node {socket.gethostname()})") from None
        seen["read"] = True

    try:
        counts = count_local(texts(documents()), regex, special_tokens, num_threads=threads, progress=False)
    except CorpusError:
        if not seen["read"]:
            raise
        counts = None  # every document was read: the shard only had nothing to count
    return (seen["documents"], seen["non_empty"]), counts


def _span_documents(span: Span, options: dict[str, str]) -> Iterator[str | bytes]:
    """The documents of one span, read by the corpus reader (plain text as its UTF-8 bytes, which
    the counter reads)."""
    path = Path(span.path)
    if span.stop is None:
        return corpus.read_file(path, **options, as_utf8=True)
    if corpus.file_format(path) == "parquet":
        return file_parts.read_parquet_row_groups(path, span.start, span.stop, options["text_column"], options["errors"])
    if corpus.file_format(path) == "jsonl":
        return file_parts.read_jsonl_span(path, span.start, span.stop, options["text_field"], options["errors"])
    return file_parts.read_text_span(path, span.start, span.stop, options["errors"], as_utf8=True)


@contextlib.contextmanager
def connect(address: str | None) -> Iterator[Any]:
    """`with connect(address) as ray:` the ray module, connected to the cluster at `address`
    (see `polytok.count`); disconnected at the end if this connected it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("engine='ray' needs the ray package: pip install 'polytok[ray]'") from None
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address not in (None, current):
            raise ConfigError(
                f"this process is connected to the Ray cluster at {current}; pass address=None to use it, not {address!r}"
            )
        yield ray
        return
    if address is not None and address not in ADDRESS_KEYWORDS:
        _check_reachable(address)
    try:
        # Ray's start-up lines would land between the progress bar and the result.
        ray.init(address=address, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as error:
        raise ClusterError(f"cannot connect to the Ray cluster at {address!r}: {error}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """ClusterError unless host:port (optionally ray://host:port) accepts a TCP connection; Ray
    itself would retry for a minute before failing."""
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}; expected 'local', 'auto' or host:port (e.g. 10.0.0.1:6379)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_SECONDS).close()
    except OSError as error:
        raise ClusterError(
            f"cannot reach the Ray cluster at {address!r}: {error.strerror or error}; start one with "
            "`ray start --head` and pass the address it prints"
        ) from None
