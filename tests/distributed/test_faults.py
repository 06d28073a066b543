"""Faults on a local Ray cluster: a worker killed mid-count is retried (and without retries the
count fails with a ClusterError), an unreadable shard fails with the CorpusError that names it,
an unreachable cluster address fails at once; none leaves a counts file behind."""
from __future__ import annotations

import gzip
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import polytok
from polytok.cli import main
from polytok.distributed import count_on_ray
from polytok.errors import ClusterError, CorpusError

from ray_cluster import cluster, Fifo, kill, processes_with_open, wait_for, wait_for_reader, wait_until_drained

DATA = Path(__file__).parents[1] / "data"
TEXT = (DATA / "handbook-en-US.txt").read_bytes()  # 30 KB: fits a pipe's buffer


def count_in_background(files: list[Path], **options) -> tuple[threading.Thread, dict]:
    """Counts `files` on the cluster in a thread: in shards of 20 KB (kjv.txt is cut in two)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["counts"] = count_on_ray(files, shard_bytes=20000, progress=False, **options)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_worker_killed_mid_count_is_retried_and_the_counts_are_exact(cluster, tmp_path):
    fifo = Fifo(tmp_path / "stream.txt")
    try:
        fifo.write(TEXT[: len(TEXT) // 2])
        thread, outcome = count_in_background([DATA / "kjv.txt", fifo.path])
        victim = wait_for_reader(fifo.path)
        wait_until_drained(fifo)  # the worker has read half of the file: it is mid-count
        kill(victim, fifo.path)
        fifo.write(TEXT)  # the retried task reads the file from its start
        # Closing the last writer ends the file, once the retried task has opened it.
        wait_for(lambda: bool(processes_with_open(fifo.path) - {victim}))
        fifo.close()
        thread.join(120)
    finally:
        fifo.close()
    assert "error" not in outcome, outcome.get("error")
    copy = tmp_path / "copy.txt"
    copy.write_bytes(TEXT)
    expected = polytok.count([DATA / "kjv.txt", copy], progress=False)
    assert outcome["counts"].to_dict() == expected.to_dict()


def test_a_worker_killed_without_retries_left_fails_with_a_cluster_error(cluster, tmp_path):
    fifo = Fifo(tmp_path / "stream.txt")
    try:
        fifo.write(TEXT[:1000])
        thread, outcome = count_in_background([fifo.path], retries=0)
        victim = wait_for_reader(fifo.path)
        wait_until_drained(fifo)
        kill(victim, fifo.path)
        thread.join(120)
    finally:
        fifo.close()
    error = outcome.get("error")
    assert isinstance(error, ClusterError), error
    assert f"counting {fifo.path}" in str(error) and "after 0 retries" in str(error)


def test_an_unreadable_shard_fails_with_the_error_naming_it_and_writes_no_counts(cluster, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.txt").write_bytes(TEXT)
    (corpus / "bad.txt.gz").write_bytes(gzip.compress(TEXT)[:-100])  # cut short
    output = tmp_path / "counts.ptc"
    with pytest.raises(CorpusError, match=rf"cannot read '{corpus / 'bad.txt.gz'}'.*read on Ray node"):
        count_on_ray(corpus, progress=False)
    assert main(["-q", "count", str(corpus), "--ray", cluster, "-o", str(output)]) == 2
    assert not output.exists() and list(tmp_path.iterdir()) == [corpus]


def test_invalid_utf8_in_a_split_file_names_its_offset_in_the_file(cluster, tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes(TEXT + b"caf\xe9\n" + TEXT)
    with pytest.raises(CorpusError, match=rf"{path}.*invalid UTF-8 at byte offset {len(TEXT) + 3};"):
        count_on_ray(path, shard_bytes=4096, progress=False)


def test_an_unreachable_cluster_fails_at_once_with_a_clear_error(tmp_path):
    output = tmp_path / "counts.ptc"
    command = [sys.executable, "-m", "polytok.cli", "-q", "count", str(DATA / "kjv.txt"), "--ray", "127.0.0.1:9", "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("polytok count: error: cannot reach the Ray cluster at '127.0.0.1:9'")
    assert result.stderr.count("\n") == 1 and not output.exists()
