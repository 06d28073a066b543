"""Encoding a dataset into token shards on a Ray cluster, resumably.

Each input file (jsonl, parquet or plain text, optionally .gz/.zst) becomes one token shard
`shard-NNNNN.bin` in the output directory: the ids of its documents back to back as little-endian
uint16 (vocabularies of at most 65,536 ids) or uint32, with no header, as nanoGPT's
`np.memmap(path, dtype=np.uint16, mode="r")` reads it. A document is a JSON line's `text_field`,
a Parquet row's `text_column`, or a whole text file; `prepend` and `append` name special tokens
put before and after every document (nanochat's BOS, nanoGPT's end-of-text). Special-token text
inside a document is encoded as ordinary text.

One Ray task encodes one shard and writes it atomically, then its record `shard-NNNNN.json`
(input, its size and mtime, documents, tokens, the shard's SHA-256, the options). The record is
what says a shard is done: a rerun skips every shard whose record matches the options and the
input and whose file has the recorded size and checksum, and encodes the others again, so a run
cut short by a dead worker or driver resumes with no document missing or repeated. `index.json`,
written last, lists the shards in input order with their documents, tokens and token offset in
the whole dataset; it exists only when every shard is done.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import socket
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from polytok.formats import load
from polytok import checks, corpus
from polytok.corpus import Source
from polytok.distributed import DEFAULT_RETRIES, connect, corpus_files, get_result
from polytok.errors import ClusterError, ConfigError, CorpusError, FormatError
from polytok.files import atomic_write, read_json
from polytok.progress import progress_bar
from polytok.version import __version__

INDEX_FORMAT = "polytok-token-shards"
INDEX_VERSION = 1
#: Ids below this fit in uint16.
UINT16_IDS = 1 << 16
#: Bytes read at a time to check a shard's checksum.
_HASH_BLOCK = 1 << 22


def encode_dataset(
    source: Source,
    tokenizer: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    address: str | None = None,
    prepend: str | None = None,
    append: str | None = None,
    pattern: str | None = None,
    special_tokens: list[str] | None = None,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
    retries: int = DEFAULT_RETRIES,
    progress: bool = True,
) -> dict[str, Any]:
    """Encode the files of `source` with the tokeniser file `tokenizer` into token shards in the
    directory `output` (made with its parents if missing), on the Ray cluster at `address` (see `polytok.count`); returns the index,
    whose "encoded" and "skipped" say how many shards this run encoded and found already done.
    `pattern` and `special_tokens` complete tokeniser files that lack them (tiktoken)."""
    checks.error_mode(errors)
    checks.integer("retries", retries, 0)
    files = corpus_files(source)
    directory = Path(os.path.abspath(output))
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"output {str(directory)!r} is a file; expected a directory (made, with its parents, if missing)")
    load_options = _load_options(pattern, special_tokens)
    loaded = load(tokenizer, **load_options)
    separators = {name: _special_id(loaded, token, name) for name, token in (("prepend", prepend), ("append", append))}
    # made only once the inputs, the tokeniser and the separators are known to be good
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create the output directory {str(directory)!r}: {error.strerror}") from None
    config = {
        "tokenizer": os.path.abspath(tokenizer),
        "tokenizer_sha256": _file_sha256(Path(tokenizer)),
        "load_options": load_options,
        "dtype": "uint16" if loaded.vocab_size <= UINT16_IDS else "uint32",
        "prepend": separators["prepend"],
        "append": separators["append"],
        "text_field": text_field,
        "text_column": text_column,
        "errors": errors,
    }
    index_path = directory / "index.json"
    # An index claims the dataset is whole; until this run ends, it is not.
    index_path.unlink(missing_ok=True)
    _remove_partial_writes(directory)
    inputs = [_input_record(path) for path in files]
    done = {shard: record for shard, record in enumerate(_done_records(directory, inputs, config)) if record}
    todo = [shard for shard in range(len(inputs)) if shard not in done]
    if todo:
        with connect(address) as ray:
            encode = ray.remote(_encode_shard).options(max_retries=retries)
            tasks = {
                encode.remote(str(directory), shard, inputs[shard], config, __version__): shard
                for shard in todo
            }
            total = sum(inputs[shard]["input_bytes"] for shard in todo)
            try:
                with progress_bar(progress, desc="encoding", unit="B", unit_scale=True, total=total) as bar:
                    pending = list(tasks)
                    while pending:
                        finished, pending = ray.wait(pending, num_returns=1)
                        shard = tasks[finished[0]]
                        done[shard] = get_result(ray, finished[0], f"encoding {inputs[shard]['input']}", retries)
                        bar.update(inputs[shard]["input_bytes"])
            except BaseException:
                for task in tasks:
                    ray.cancel(task, force=True)
                raise
    index = _index(config, [done[shard] for shard in range(len(inputs))])
    with atomic_write(index_path) as stream:
        json.dump(index, stream, indent=1)
        stream.write("\n")
    return {**index, "encoded": len(todo), "skipped": len(inputs) - len(todo)}


def _load_options(pattern: str | None, special_tokens: list[str] | None) -> dict[str, Any]:
    """The keyword arguments of polytok.load that were given."""
    options: dict[str, Any] = {}
    if pattern is not None:
        options["pattern"] = pattern
    if special_tokens:
        options["special_tokens"] = list(special_tokens)
    return options


def _special_id(tokenizer: Any, token: str | None, option: str) -> int | None:
    """The id of the special token `token` (None: no token), or ConfigError."""
    if token is None:
        return None
    specials = tokenizer.special_tokens
    if token not in specials:
        known = ", ".join(map(repr, sorted(specials))) or "none"
        raise ConfigError(f"{option}={token!r} is not a special token of the tokeniser (its special tokens: {known})")
    return specials[token]


def _file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _input_record(path: Path) -> dict[str, Any]:
    """What identifies an input file: its path, size and modification time."""
    try:
        status = path.stat()
    except OSError as error:
        raise CorpusError(f"cannot read {str(path)!r}: {error.strerror}") from None
    return {"input": str(path), "input_bytes": status.st_size, "input_mtime_ns": status.st_mtime_ns}


def _shard_name(shard: int) -> str:
    return f"shard-{shard:05d}"


def _remove_partial_writes(directory: Path) -> None:
    """Temporary files that a killed task left behind (atomic_write's names)."""
    for leftover in directory.glob(".shard-*.tmp"):
        leftover.unlink(missing_ok=True)


def _done_records(directory: Path, inputs: list[dict[str, Any]], config: dict[str, Any]) -> Iterator[dict | None]:
    """For each input, the record of its shard if that shard is done and intact, else None.
    ConfigError for a shard encoded with other options: the directory holds another dataset."""
    for shard, source in enumerate(inputs):
        name = _shard_name(shard)
        record_path = directory / f"{name}.json"
        if not record_path.exists():
            yield None
            continue
        try:
            record = read_json(record_path, "shard record")
        except FormatError:
            yield None  # a record is written atomically; an unreadable one was edited: encode again
            continue
        if not isinstance(record, dict) or record.get("config") != config:
            changed = sorted(
                key for key in config if not isinstance(record, dict) or record.get("config", {}).get(key) != config[key]
            )
            raise ConfigError(
                f"{record_path} was encoded with other options ({', '.join(changed)} differ); "
                "write to an empty directory, or delete the old shards"
            )
        if any(record.get(key) != value for key, value in source.items()):
            yield None  # the input file changed since: encode it again
            continue
        path = directory / record["file"]
        itemsize = np.dtype(config["dtype"]).itemsize
        if not path.exists() or path.stat().st_size != record["tokens"] * itemsize or _file_sha256(path) != record["sha256"]:
            yield None
            continue
        yield record


def _index(config: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The dataset's index: the shards in input order with their token offsets."""
    shards, offset = [], 0
    for record in records:
        shards.append({key: record[key] for key in ("file", "input", "documents", "tokens", "sha256")} | {"offset": offset})
        offset += record["tokens"]
    return {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "config": config,
        "documents": sum(record["documents"] for record in records),
        "tokens": offset,
        "shards": shards,
    }


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str, sha256: str, options: str) -> Any:
    """The tokeniser file at `path`, loaded once per worker process and checked to be the one
    the driver loaded."""
    found = _file_sha256(Path(path))
    if found != sha256:
        raise ConfigError(
            f"tokeniser file {path} on Ray node {socket.gethostname()} differs from the driver's "
            f"(SHA-256 {found[:12]}..., expected {sha256[:12]}...); every node must see the same file"
        )
    return load(path, **json.loads(options))


def _documents(path: Path, options: dict[str, str]) -> Iterator[Iterator[str | bytes]]:
    """The documents of an input file, each as its parts: a record is one part; a plain-text file
    is one document, read in the corpus reader's chunks (no preset pattern matches across their cuts)."""
    parts = corpus.read_file(path, **options)
    if corpus.is_plain_text(path):
        first = next(parts, None)
        if first is not None:
            yield itertools.chain([first], parts)
        return
    for part in parts:
        yield iter([part])


def _encode_shard(directory: str, shard: int, source: dict[str, Any], config: dict[str, Any], version: str) -> dict[str, Any]:
    """A Ray task: encode one input into its shard file, then write the shard's record."""
    if version != __version__:
        raise ClusterError(
            f"a Ray worker runs polytok {__version__} but the driver runs {version}; "
            "install the same polytok on every node"
        )
    try:
        tokenizer = _tokenizer(config["tokenizer"], config["tokenizer_sha256"], json.dumps(config["load_options"]))
    except OSError as error:
        raise ConfigError(f"cannot read tokeniser file {config['tokenizer']} on Ray node {socket.gethostname()}: {error}") from None
    dtype = np.dtype(config["dtype"]).newbyteorder("<")
    name = _shard_name(shard)
    path = Path(source["input"])
    options = {key: config[key] for key in ("text_field", "text_column", "errors")}
    digest = hashlib.sha256()
    documents = tokens = 0

    def write(stream: Any, ids: Any) -> None:
        nonlocal tokens
        data = np.asarray(ids, dtype=dtype).tobytes()
        digest.update(data)
        stream.write(data)
        tokens += len(ids)

    with atomic_write(Path(directory) / f"{name}.bin", "wb") as stream:
        try:
            for document in _documents(path, options):
                if config["prepend"] is not None:
                    write(stream, [config["prepend"]])
                for part in document:
                    write(stream, tokenizer.encode_ordinary(part))
                if config["append"] is not None:
                    write(stream, [config["append"]])
                documents += 1
        except CorpusError as error:
            raise CorpusError(f"{error} (read on Ray node {socket.gethostname()})") from None
    record = {
        "file": f"{name}.bin",
        **source,
        "documents": documents,
        "tokens": tokens,
        "sha256": digest.hexdigest(),
        "config": config,
    }
    with atomic_write(Path(directory) / f"{name}.json") as stream:
        json.dump(record, stream, indent=1)
        stream.write("\n")
    return record
