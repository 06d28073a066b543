"""The local Ray cluster of the tests, and how they kill a worker mid-task.

`cluster` starts a 2-CPU cluster once per test module that imports it (Ray takes seconds to
start). A named pipe as an input file holds a task in its read until the test has killed the
worker; the helpers below find that worker and feed the pipe. (Not a conftest.py: the tests
import each other's conftest by name, and one conftest module name must stay theirs.)
"""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
import ray

import polytok


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A 2-CPU Ray cluster on 127.0.0.1, this process connected; yields its address."""
    # Workers import the polytok these tests import, wherever it lies.
    source = str(Path(polytok.__file__).parents[1])
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = source + (os.pathsep + previous if previous else "")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


def processes_with_open(path: Path) -> set[int]:
    """The other processes that hold `path` open."""
    found = set()
    target = os.path.realpath(path)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{entry}/fd/{descriptor}") == target:
                    found.add(int(entry))
                    break
            except OSError:
                continue
    return found


def wait_for_reader(path: Path, timeout: float = 60) -> int:
    """The id of another process that opened `path`, once one has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        readers = processes_with_open(path)
        if readers:
            return min(readers)
        time.sleep(0.02)
    raise AssertionError(f"no process opened {path} within {timeout} s")


class Fifo:
    """A named pipe as a corpus file: a task that reads it blocks until the test writes, so the
    test can kill the worker mid-read. Opened for writing here first, so readers never block in
    open() and the pipe outlives a killed reader."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path = path
        # O_RDWR opens a FIFO without waiting for a reader (Linux); this end only ever writes.
        self.descriptor = os.open(path, os.O_RDWR)

    def write(self, data: bytes) -> None:
        os.write(self.descriptor, data)

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


def kill(pid: int, reading: Path) -> None:
    """SIGKILL, as the OOM killer or a lost node would end a worker; returns once the process
    has let go of `reading`, so that nothing written to it later can reach the dead worker."""
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: pid not in processes_with_open(reading))


def unread_bytes(fifo: Fifo) -> int:
    """How many bytes written to the pipe no reader has taken yet."""
    import array
    import fcntl
    import termios

    available = array.array("i", [0])
    fcntl.ioctl(fifo.descriptor, termios.FIONREAD, available, True)
    return available[0]


def wait_until_drained(fifo: Fifo, timeout: float = 60) -> None:
    """Returns once a reader has taken everything written so far."""
    deadline = time.monotonic() + timeout
    while unread_bytes(fifo):
        if time.monotonic() > deadline:
            raise AssertionError(f"nobody read {fifo.path} within {timeout} s")
        time.sleep(0.02)


def wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Returns once `condition()` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s in vain")
        time.sleep(0.02)
