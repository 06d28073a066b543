"""Killing a Ray worker mid-task: a named pipe as an input file holds a task in its read until
the test has killed the worker; these find that worker and feed the pipe."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable


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


def kill(pid: int) -> None:
    """SIGKILL, as the OOM killer or a lost node would end a worker."""
    os.kill(pid, signal.SIGKILL)


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
