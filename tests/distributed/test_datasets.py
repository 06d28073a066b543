"""`polytok encode-dataset` on a local Ray cluster: token shards that decode to the documents,
an index that adds up, and a rerun after a killed worker that encodes only what was not done."""
from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import numpy as np
import pyarrow
import pyarrow.parquet
import pytest

import polytok
from polytok.cli import main
from polytok.datasets import encode_dataset
from polytok.errors import ClusterError, ConfigError

from ray_cluster import cluster, Fifo, kill, wait_for, wait_for_reader, wait_until_drained

DATA = Path(__file__).parents[1] / "data"
SPECIALS = ["<|endoftext|>", "<|bos|>"]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer") / "bpe.json"
    tokenizer = polytok.train([DATA / "kjv.txt", DATA / "handbook-en-US.txt"], "bpe", vocab_size=512,
                              special_tokens=SPECIALS, progress=False)
    tokenizer.save(path)
    return path


def documents_of(inputs: dict[str, list[str]]) -> list[str]:
    return [document for name in sorted(inputs) for document in inputs[name]]


def write_inputs(directory: Path) -> dict[str, list[str]]:
    """A jsonl, a gzip jsonl, a parquet and a text file; their documents by file name."""
    lines = (DATA / "kjv.txt").read_text(encoding="utf-8").splitlines()
    german = (DATA / "handbook-de-DE.txt").read_text(encoding="utf-8").split("\n\n")
    inputs = {
        "a.jsonl": lines[:50] + ["<|endoftext|> is ordinary text in a document"],
        "b.jsonl.gz": lines[50:90],
        "c.parquet": german[:30],
        "d.txt": [(DATA / "handbook-fr-FR.txt").read_text(encoding="utf-8")],
    }
    directory.mkdir(exist_ok=True)
    (directory / "a.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in inputs["a.jsonl"]))
    (directory / "b.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps({"text": line}) + "\n" for line in inputs["b.jsonl.gz"]).encode()))
    pyarrow.parquet.write_table(pyarrow.table({"text": inputs["c.parquet"]}), directory / "c.parquet")
    (directory / "d.txt").write_text(inputs["d.txt"][0], encoding="utf-8")
    return inputs


def read_shards(output: Path) -> list[np.ndarray]:
    index = json.loads((output / "index.json").read_text())
    return [np.fromfile(output / shard["file"], dtype=index["config"]["dtype"]) for shard in index["shards"]]


def test_encoded_shards_hold_every_document_once_between_its_separators(cluster, tokenizer_file, tmp_path):
    inputs = write_inputs(tmp_path / "in")
    output = tmp_path / "out"
    output.mkdir()
    index = encode_dataset(tmp_path / "in", tokenizer_file, output, prepend="<|bos|>", append="<|endoftext|>", progress=False)
    tokenizer = polytok.load(tokenizer_file)
    bos, eot = tokenizer.special_tokens["<|bos|>"], tokenizer.special_tokens["<|endoftext|>"]
    expected = [[bos, *tokenizer.encode_ordinary(document), eot] for document in documents_of(inputs)]
    shards = read_shards(output)
    assert index["config"]["dtype"] == "uint16" and all(shard.dtype == np.uint16 for shard in shards)
    assert np.concatenate(shards).tolist() == [token for document in expected for token in document]
    assert index["documents"] == len(expected) and index["tokens"] == sum(map(len, expected))
    assert [shard["documents"] for shard in index["shards"]] == [len(inputs[name]) for name in sorted(inputs)]
    offsets = [shard["offset"] for shard in index["shards"]]
    assert offsets == [0, *np.cumsum([len(shard) for shard in shards])[:-1].tolist()]
    assert (index["encoded"], index["skipped"]) == (4, 0)
    assert json.loads((output / "index.json").read_text())["shards"] == index["shards"]


def test_a_rerun_after_a_killed_worker_encodes_only_the_unfinished_shard(cluster, tokenizer_file, tmp_path):
    write_inputs(tmp_path / "in")
    output = tmp_path / "out"
    output.mkdir()
    fifo = Fifo(tmp_path / "in" / "e.txt")  # sorted last: shard 4
    outcome: dict = {}

    def run() -> None:
        try:
            encode_dataset(tmp_path / "in", tokenizer_file, output, append="<|endoftext|>", retries=0, progress=False)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = error

    try:
        fifo.write(b"half a document ")
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        victim = wait_for_reader(fifo.path)
        wait_until_drained(fifo)
        wait_for(lambda: len(list(output.glob("shard-*.json"))) == 4)  # the other shards are done
        kill(victim, fifo.path)
        thread.join(120)
    finally:
        fifo.close()
    assert isinstance(outcome.get("error"), ClusterError), outcome.get("error")
    assert not (output / "index.json").exists()
    done = sorted(path.name for path in output.glob("shard-*.json"))
    assert done == [f"shard-{shard:05d}.json" for shard in range(4)]
    written = {path.name: path.stat().st_mtime_ns for path in output.glob("shard-*.bin")}

    fifo.path.unlink()
    fifo.path.write_text("the whole document, at last", encoding="utf-8")
    corrupted = bytearray((output / "shard-00002.bin").read_bytes())
    corrupted[0] ^= 0xFF
    (output / "shard-00002.bin").write_bytes(bytes(corrupted))
    index = encode_dataset(tmp_path / "in", tokenizer_file, output, append="<|endoftext|>", progress=False)
    assert (index["encoded"], index["skipped"]) == (2, 3)
    for name, mtime in written.items():
        if name != "shard-00002.bin":
            assert (output / name).stat().st_mtime_ns == mtime

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    expected = encode_dataset(tmp_path / "in", tokenizer_file, fresh, append="<|endoftext|>", progress=False)
    assert expected["shards"] == index["shards"]
    assert [shard.tolist() for shard in read_shards(output)] == [shard.tolist() for shard in read_shards(fresh)]
    assert not list(output.glob(".*.tmp"))


def test_a_directory_of_another_encoding_is_refused(cluster, tokenizer_file, tmp_path):
    write_inputs(tmp_path / "in")
    output = tmp_path / "out"
    output.mkdir()
    encode_dataset(tmp_path / "in" / "a.jsonl", tokenizer_file, output, progress=False)
    with pytest.raises(ConfigError, match=r"shard-00000.json was encoded with other options \(append differ\)"):
        encode_dataset(tmp_path / "in" / "a.jsonl", tokenizer_file, output, append="<|endoftext|>", progress=False)


def test_cli_encode_dataset_writes_the_index_and_refuses_unknown_separators(cluster, tokenizer_file, tmp_path, capsys):
    write_inputs(tmp_path / "in")
    output = tmp_path / "new" / "out"  # made, with its parents, once the options are known to be good
    arguments = ["-q", "encode-dataset", str(tmp_path / "in" / "a.jsonl"), "-t", str(tokenizer_file), "-o", str(output), "--ray", cluster]
    assert main([*arguments, "--append", "<|eos|>"]) == 2
    assert "append='<|eos|>' is not a special token of the tokeniser" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    (tmp_path / "file").write_text("")
    assert main([*arguments[:-3], str(tmp_path / "file"), *arguments[-2:], "--append", "<|endoftext|>"]) == 2
    assert "is a file; expected a directory" in capsys.readouterr().err
    assert main([*arguments, "--append", "<|endoftext|>"]) == 0
    index = json.loads((output / "index.json").read_text())
    assert index["documents"] == 51 and len(index["shards"]) == 1
