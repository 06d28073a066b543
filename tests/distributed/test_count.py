"""Counting on a local Ray cluster: the saved counts are byte-identical to the local count's,
whatever the shards; polytok.count(engine="ray") and `polytok count --ray` reach it."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest

import polytok
from polytok.cli import main
from polytok.distributed import count_on_ray
from polytok.errors import ConfigError, CorpusError

from ray_cluster import cluster

DATA = Path(__file__).parents[1] / "data"
SPECIALS = ["<|endoftext|>", "<|fim|>"]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    """Text files, a gzip file, a jsonl file and a parquet file, with special tokens in some."""
    directory = tmp_path_factory.mktemp("corpus")
    for path in sorted(DATA.glob("*.txt")):
        (directory / path.name).write_bytes(path.read_bytes())
    kjv = (DATA / "kjv.txt").read_text(encoding="utf-8")
    (directory / "kjv-copy.txt.gz").write_bytes(gzip.compress(kjv.replace("\n\n", "\n<|endoftext|>\n").encode(), mtime=0))
    lines = kjv.splitlines()[:200]
    (directory / "verses.jsonl").write_text("".join(json.dumps({"text": line + "<|fim|>"}) + "\n" for line in lines))
    # Ten rows per row group, so that small shards cut it between row groups.
    with pyarrow.parquet.ParquetWriter(directory / "verses.parquet", pyarrow.schema([("text", pyarrow.string())])) as writer:
        for start in range(0, len(lines), 10):
            writer.write_table(pyarrow.table({"text": [line + " <|endoftext|>" for line in lines[start : start + 10]]}))
    return directory


def saved(counts: polytok.PreTokenCounts, path: Path) -> bytes:
    counts.save(path)
    return path.read_bytes()


@pytest.mark.parametrize("pattern, shard_bytes", [("cl100k", None), ("cl100k", 5000), ("gpt2", 20000), ("o200k", 3000)])
def test_counts_on_ray_save_the_same_bytes_as_the_local_count(cluster, corpus_dir, tmp_path, pattern, shard_bytes):
    local = polytok.count(corpus_dir, pattern, SPECIALS, progress=False)
    distributed = count_on_ray(corpus_dir, pattern, SPECIALS, shard_bytes=shard_bytes, progress=False)
    assert saved(distributed, tmp_path / "ray.ptc") == saved(local, tmp_path / "local.ptc")


def test_polytok_count_with_engine_ray_counts_on_the_connected_cluster(cluster, tmp_path):
    files = [DATA / "kjv.txt", DATA / "handbook-zh-CN.txt"]
    local = polytok.count(files, "nanochat", progress=False, errors="bytes")
    distributed = polytok.count(files, "nanochat", progress=False, errors="bytes", engine="ray", address=cluster)
    assert saved(distributed, tmp_path / "ray.ptc") == saved(local, tmp_path / "local.ptc")


def test_cli_count_with_ray_writes_the_local_counts_file(cluster, corpus_dir, tmp_path):
    local, distributed = tmp_path / "local.ptc", tmp_path / "ray.ptc"
    assert main(["-q", "count", str(corpus_dir), "--special", SPECIALS[0], "-o", str(local)]) == 0
    assert main(["-q", "count", str(corpus_dir), "--special", SPECIALS[0], "--ray", cluster, "-o", str(distributed)]) == 0
    assert distributed.read_bytes() == local.read_bytes()


def test_a_corpus_with_nothing_to_count_fails_as_the_local_count_does(cluster, tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("<|endoftext|>")
    with pytest.raises(CorpusError) as local:
        polytok.count(tmp_path, special_tokens=["<|endoftext|>"], progress=False)
    with pytest.raises(CorpusError) as distributed:
        count_on_ray(tmp_path, special_tokens=["<|endoftext|>"], shard_bytes=1, progress=False)
    assert str(distributed.value) == str(local.value)
    assert "nothing but special tokens" in str(local.value)


def test_another_address_than_the_connected_cluster_is_refused(cluster):
    with pytest.raises(ConfigError, match=f"connected to the Ray cluster at {cluster}"):
        polytok.count(DATA / "kjv.txt", engine="ray", address="10.0.0.1:6379", progress=False)


def test_more_threads_per_task_than_a_node_has_is_refused(cluster):
    with pytest.raises(ConfigError, match="num_threads=3, but the largest node of the Ray cluster has 2 CPUs"):
        polytok.count(DATA / "kjv.txt", engine="ray", num_threads=3, progress=False)
    assert count_on_ray(DATA / "kjv.txt", num_threads=2, progress=False).to_dict() == polytok.count(DATA / "kjv.txt", progress=False).to_dict()
