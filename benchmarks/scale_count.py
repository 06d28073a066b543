"""Counting at scale: time and peak memory of polytok.count on one machine, and with --ray on a
local Ray cluster of 1 and 2 workers, on the same files in one run; the saved counts are checked
byte-identical.

    python benchmarks/bench_scale.py --ray                           # ../shared/data repeated to 1 GB
    python benchmarks/bench_scale.py --ray --corpus /work/large/*.txt  # the corpus of build_large.py
    python benchmarks/bench_scale.py --ray --workers 2 --corpus /work/large/*.txt --repeat 8 --shuffled /work/large/shuffled.txt

--repeat N counts the corpus files N times over (no copies on disk); --shuffled PATH adds a copy
of the corpus whose documents (separated by form-feed lines, as build_large.py writes them) are
shuffled, written to PATH once, so that the documents are not all repeats.

Each contender runs in a fresh Python process. Peak memory is what the count added: for the
local count, the process's peak resident size less its size before the count; for Ray, the peak
of the summed proportional set size (PSS, which splits shared pages such as Ray's object store
fairly) of the driver and every process Ray started, sampled every 0.1 s, less what they held
idle before the count, each worker with polytok imported ("idle MB"); "largest MB" is the largest single process's peak PSS, "most
added" the most one process added above its own idle PSS (all of it for a process that started
during the count), "driver" what the driver process added. MB are 10^6 bytes. Ray's start-up
time is reported apart from the count.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polytok.counts
from bench_count import build_mix, data_directory, resident_kilobytes  # the same ../shared/data mix

DOCUMENT_SEPARATOR = b"\n\f\n"
#: Memory is reported in MB of 10^6 bytes, as the counts file is; /proc and wait4 give KiB.
KB_PER_MB = 1e6 / 1024


def build_shuffled(files: list[Path], path: Path) -> None:
    """The documents of `files` in a random (seeded) order, in one file."""
    documents: list[bytes] = []
    for file in files:
        documents += [document for document in file.read_bytes().split(DOCUMENT_SEPARATOR) if document]
    random.Random(0).shuffle(documents)
    temporary = path.with_suffix(".partial")
    with open(temporary, "wb") as out:
        for document in documents:
            out.write(document)
            out.write(DOCUMENT_SEPARATOR)
    temporary.rename(path)


# ---- the child processes ------------------------------------------------------------------------


def proportional_kilobytes(pid: int) -> int:
    """The PSS of a process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found


class Sampler(threading.Thread):
    """Samples the summed PSS of this process tree, and each process's, until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_total = 0
        self.peaks: dict[int, int] = {}
        self.stopped = threading.Event()

    def sample(self) -> int:
        total = 0
        for pid in descendants(os.getpid()):
            kilobytes = proportional_kilobytes(pid)
            self.peaks[pid] = max(self.peaks.get(pid, 0), kilobytes)
            total += kilobytes
        self.peak_total = max(self.peak_total, total)
        return total

    def run(self) -> None:
        while not self.stopped.wait(0.1):
            self.sample()


def _import_polytok() -> None:
    """A Ray task that loads polytok and its Rust core into its worker (and holds the CPU a while,
    so that each worker gets one)."""
    import polytok.counts  # noqa: F401

    time.sleep(1)


def child(mode: str, files: list[str], pattern: str, output: str, batch_bytes: int | None = None) -> dict:
    """Counts `files` (mode "local", or "ray-N": N worker CPUs) and saves the counts to `output`;
    `batch_bytes`: the local count's batch bytes per thread (None: polytok's default)."""
    import polytok

    if batch_bytes is not None:
        polytok.counts.BATCH_BYTES_PER_THREAD = batch_bytes

    report: dict = {}
    if mode == "local":
        report["baseline_mb"] = resident_kilobytes() / KB_PER_MB
        started = time.perf_counter()
        counts = polytok.count(files, pattern, progress=False)
        report["seconds"] = time.perf_counter() - started
    else:
        import logging

        import ray

        from polytok.distributed import count_on_ray

        started = time.perf_counter()
        ray.init(num_cpus=int(mode.split("-")[1]), include_dashboard=False, logging_level=logging.ERROR,
                 log_to_driver=False)
        report["startup_seconds"] = time.perf_counter() - started
        # Every worker imports polytok before the idle sample, as the local count's baseline is
        # taken after `import polytok`: "added" is then what counting added.
        ray.get([ray.remote(_import_polytok).remote() for _ in range(int(mode.split("-")[1]))])
        time.sleep(1)  # let Ray's own processes settle before the idle sample
        sampler = Sampler()
        idle = sampler.sample()
        idle_by_process = dict(sampler.peaks)
        sampler.peak_total, sampler.peaks = 0, {}
        sampler.start()
        started = time.perf_counter()
        counts = count_on_ray(files, pattern, progress=False)
        report["seconds"] = time.perf_counter() - started
        sampler.stopped.set()
        sampler.join()
        workers = [peak for pid, peak in sampler.peaks.items() if pid != os.getpid()]
        report["idle_mb"] = idle / KB_PER_MB
        report["peak_added_mb"] = (sampler.peak_total - idle) / KB_PER_MB
        report["largest_process_mb"] = max(workers, default=0) / KB_PER_MB
        # What each process added above its own idle size (a process started during the count: all of it).
        added = {pid: peak - idle_by_process.get(pid, 0) for pid, peak in sampler.peaks.items()}
        report["largest_added_mb"] = max(added.values(), default=0) / KB_PER_MB
        report["driver_added_mb"] = added.get(os.getpid(), 0) / KB_PER_MB
        ray.shutdown()
    counts.save(output)
    report["unique"] = len(counts)
    report["counts_mb"] = os.path.getsize(output) / 1e6
    with open(output, "rb") as saved:  # streamed: reading the file whole would add to the peak
        report["sha256"] = hashlib.file_digest(saved, "sha256").hexdigest()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ray", action="store_true", help="also count on a local Ray cluster of 1 and 2 workers")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="the Ray cluster sizes (CPUs) to run with --ray")
    parser.add_argument("--corpus", nargs="+", type=Path, help="files to count (default: ../shared/data repeated to --megabytes)")
    parser.add_argument("--megabytes", type=float, default=1000.0)
    parser.add_argument("--repeat", type=int, default=1, help="count the corpus files this many times over")
    parser.add_argument("--shuffled", type=Path, help="add a document-shuffled copy of the corpus, kept at this path")
    parser.add_argument("--pattern", default="cl100k")
    parser.add_argument("--batch-mib", type=float, help="the local count's batch size per thread in MiB "
                        "(polytok.counts.BATCH_BYTES_PER_THREAD; default: polytok's)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        options = json.loads(arguments.child)
        print(json.dumps(child(options["mode"], options["files"], options["pattern"], options["output"], options["batch_bytes"])))
        return

    made = None
    if arguments.corpus:
        corpus = list(arguments.corpus)
    else:
        made = build_mix(int(arguments.megabytes * 1e6), data_directory())
        corpus = [made]
    try:
        files = [str(path) for path in corpus] * arguments.repeat
        if arguments.shuffled:
            if not arguments.shuffled.exists():
                build_shuffled(corpus, arguments.shuffled)
            files.append(str(arguments.shuffled))
        size_mb = sum(os.path.getsize(path) for path in files) / 1e6
        batch_bytes = None if arguments.batch_mib is None else int(arguments.batch_mib * (1 << 20))
        batch_shown = (batch_bytes or polytok.counts.BATCH_BYTES_PER_THREAD) / (1 << 20)
        print(f"counting {size_mb:,.0f} MB in {len(files)} files, pattern {arguments.pattern}, "
              f"{os.cpu_count()} cores, local batches of {batch_shown:g} MiB a thread, "
              f"load average {os.getloadavg()[0]:.1f} before")
        modes = ["local"] + ([f"ray-{workers}" for workers in arguments.workers] if arguments.ray else [])
        reports = {}
        for mode in modes:
            reports[mode] = measured(mode, files, arguments.pattern, batch_bytes)
        local = reports["local"]
        print(f"{'':26} {'wall s':>7} {'MB/s':>7} {'start s':>8} {'peak MB':>8} {'largest MB':>10} "
              f"{'most added':>10} {'driver':>7} {'idle MB':>8} {'wall / local':>12}")
        for mode, report in reports.items():
            name = "polytok.count (local)" if mode == "local" else f"Ray, {mode.split('-')[1]} worker(s)"
            peak = report["peak_added_mb"]
            print(f"{name:26} {report['seconds']:7.2f} {size_mb / report['seconds']:7.1f} "
                  f"{report.get('startup_seconds', 0):8.2f} {peak:8.0f} {report.get('largest_process_mb', peak):10.0f} "
                  f"{report.get('largest_added_mb', peak):10.0f} {report.get('driver_added_mb', peak):7.0f} "
                  f"{report.get('idle_mb', 0):8.0f} {report['seconds'] / local['seconds']:12.2f}")
        identical = len({report["sha256"] for report in reports.values()}) == 1
        for mode, report in reports.items():
            print(f"{mode}: peak / counts file {report['peak_added_mb'] / local['counts_mb']:.2f}, most added by one "
                  f"process / counts file {report.get('largest_added_mb', report['peak_added_mb']) / local['counts_mb']:.2f}")
        print(f"{local['unique']:,} unique pre-tokens; counts file {local['counts_mb']:.1f} MB; saved counts "
              f"{'byte-identical' if identical else 'DIFFER'}; load average {os.getloadavg()[0]:.1f} after")
    finally:
        if made is not None:
            made.unlink()


def measured(mode: str, files: list[str], pattern: str, batch_bytes: int | None = None) -> dict:
    """The child's report, with its peak resident size (MB) from wait4."""
    with tempfile.TemporaryDirectory(prefix="polytok-bench-scale-") as directory:
        output = os.path.join(directory, "counts.ptc")
        arguments = json.dumps({"mode": mode, "files": files, "pattern": pattern, "output": output,
                                "batch_bytes": batch_bytes})
        process = subprocess.Popen([sys.executable, __file__, "--child", arguments], stdout=subprocess.PIPE)
        stdout = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        if status:
            raise SystemExit(f"{mode} failed with status {status}")
        report = json.loads(stdout)
    if mode == "local":
        report["peak_added_mb"] = usage.ru_maxrss / KB_PER_MB - report["baseline_mb"]
    return report


if __name__ == "__main__":
    main()
