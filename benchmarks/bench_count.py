"""Pre-token counting speed: polytok.count against a Python regex + Counter baseline and HF
tokenizers, in one process on the same ~25 MB mix of ../shared/data (files repeated to size).

HF tokenizers has no public "count only" call, so its entry runs `train_from_iterator` with the
same regex and a vocabulary of 300 tokens: the word count dominates that run. Peak memory is the
rise of the process's peak resident set (VmHWM, reset before each run) over its size before.

    python benchmarks/bench_count.py [--megabytes 25] [--threads N] [--repeats 3]
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import polytok
from polytok.pretokenize import PRESETS

ROOT = Path(__file__).resolve().parents[1]
FILES = ["kjv.txt", "handbook-en-US.txt", "handbook-es-ES.txt", "handbook-fr-FR.txt",
         "handbook-de-DE.txt", "handbook-zh-CN.txt"]


def data_directory() -> Path:
    for candidate in (ROOT.parent / "shared" / "data", Path("/work/shared/data")):
        if candidate.is_dir():
            return candidate
    raise SystemExit("cannot find the shared data directory (../shared/data)")


def build_mix(target_bytes: int, directory: Path) -> Path:
    """A plain-text file of about `target_bytes`: the data files in turn, repeated to size."""
    texts = [(directory / name).read_bytes() for name in FILES]
    handle, name = tempfile.mkstemp(suffix=".txt", prefix="polytok-bench-count-")
    written = 0
    with os.fdopen(handle, "wb") as out:
        while written < target_bytes:
            for text in texts:
                piece = text[: target_bytes - written]
                out.write(piece)
                written += len(piece)
                if written >= target_bytes:
                    break
    return Path(name)


def resident_kilobytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class PeakMemory:
    """Peak resident memory added during a block, in MB: VmHWM after a reset, or sampling."""

    def __enter__(self) -> "PeakMemory":
        self.baseline = resident_kilobytes("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")  # resets VmHWM to the current resident size
            self.sampler = None
        except OSError:
            self.samples = [self.baseline]
            self.stop = threading.Event()
            self.sampler = threading.Thread(target=self.sample, daemon=True)
            self.sampler.start()
        return self

    def sample(self) -> None:
        while not self.stop.wait(0.01):
            self.samples.append(resident_kilobytes("VmRSS"))

    def __exit__(self, *exception: object) -> None:
        if self.sampler is None:
            peak = resident_kilobytes("VmHWM")
        else:
            self.stop.set()
            self.sampler.join()
            peak = max(self.samples)
        self.megabytes = max(0, peak - self.baseline) / 1024


def measure(run: Callable[[], object], repeats: int) -> tuple[float, float, object]:
    """Median wall time (s), peak added memory (MB) over the runs, and the last result."""
    times, peaks, result = [], [], None
    for _ in range(repeats):
        result = None
        with PeakMemory() as memory:
            started = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - started)
        peaks.append(memory.megabytes)
    return statistics.median(times), max(peaks), result


def python_baseline(path: Path, pattern: str) -> collections.Counter:
    import regex

    compiled = regex.compile(pattern)
    counts: collections.Counter = collections.Counter()
    for document in polytok.corpus.iter_documents(path):
        counts.update(compiled.findall(document))
    return counts


def huggingface(path: Path, pattern: str, threads: int) -> None:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False)
    tokenizer.train_from_iterator(polytok.corpus.iter_documents(path), trainer=trainer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=25.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pattern", default="cl100k")
    arguments = parser.parse_args()

    path = build_mix(int(arguments.megabytes * 1e6), data_directory())
    size_mb = path.stat().st_size / 1e6
    pattern = PRESETS[arguments.pattern]
    print(f"counting {size_mb:.1f} MB ({', '.join(FILES)} repeated), pattern {arguments.pattern}, "
          f"{arguments.threads} threads, {os.cpu_count()} cores, median of {arguments.repeats}")
    try:
        rows = []
        seconds, peak, ours = measure(
            lambda: polytok.count(path, arguments.pattern, num_threads=arguments.threads, progress=False),
            arguments.repeats,
        )
        rows.append(("polytok.count", seconds, peak))
        seconds1, peak1, single = measure(
            lambda: polytok.count(path, arguments.pattern, num_threads=1, progress=False), arguments.repeats
        )
        assert single.to_dict() == ours.to_dict()
        rows.append(("polytok.count, 1 thread", seconds1, peak1))

        seconds, peak, reference = measure(lambda: python_baseline(path, pattern), 1)
        agree = {word.encode("utf-8"): number for word, number in reference.items()} == ours.to_dict()
        rows.append(("Python regex.findall + Counter" + ("" if agree else " (COUNTS DIFFER)"), seconds, peak))
        try:
            seconds, peak, _ = measure(lambda: huggingface(path, pattern, arguments.threads), arguments.repeats)
            rows.append(("HF tokenizers train_from_iterator, vocab 300", seconds, peak))
        except ImportError:
            print("(tokenizers not installed: HF row skipped)")

        ours_seconds = rows[0][1]
        print(f"{'':48} {'seconds':>8} {'MB/s':>8} {'peak MB':>8} {'time / polytok':>15}")
        for name, seconds, peak in rows:
            print(f"{name:48} {seconds:8.2f} {size_mb / seconds:8.1f} {peak:8.0f} {seconds / ours_seconds:15.2f}")
        print(f"{len(ours):,} distinct pre-tokens, {ours.total:,} in all")
    finally:
        path.unlink()


if __name__ == "__main__":
    main()
