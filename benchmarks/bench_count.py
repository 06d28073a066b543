"""Pre-token counting speed: polytok.count against a Python regex + Counter baseline and HF
tokenizers, in one process on the same ~25 MB mix of ../shared/data (files repeated to size).

HF tokenizers has no public "count only" call, so its entry runs `train_from_iterator` with the
same regex and a vocabulary of 300 tokens: the word count dominates that run. Each contender runs
in a child forked from this script; peak memory is the child's peak resident size minus its size
at the start.

    python benchmarks/bench_count.py [--megabytes 25] [--threads N] [--repeats 3]

`--per-language` instead puts counting beside the pre-tokeniser alone and the encoder, one thread,
on the reporting half of each language benchmarks/languages.py builds: the rate of
`PreTokenizer.piece_lengths` (pre-tokenising only), of `polytok.count` of the half, and of
cl100k's `encode_to_numpy` of it (the real ranks, from the bpe-openai wheel), each the best of
`--repeats` runs, and count's time over encode's.

    python benchmarks/bench_count.py --per-language [--languages ar ja ...] [--repeats 5]
"""
from __future__ import annotations

import argparse
import collections
import os
import pickle
import statistics
import tempfile
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


def resident_kilobytes() -> int:
    """This process's resident size now."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(run: Callable[[], object], repeats: int) -> tuple[float, float, float, object]:
    """Median wall time (s) of `repeats` runs, their mean CPU time (s, all threads), the peak
    memory they added (MB), and the result. CPU time shows the work done even when other
    processes share the cores and stretch the wall time.

    The runs happen in a forked child, so each contender starts from the same lean process and
    its peak resident size (from wait4) is not hidden by memory an earlier contender left behind.
    """
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reader)
        try:
            baseline = resident_kilobytes()
            times, result = [], None
            for _ in range(repeats):
                started = time.perf_counter()
                result = run()
                times.append(time.perf_counter() - started)
            payload = pickle.dumps((times, baseline, result))
        except BaseException as error:  # reported by the parent
            payload = pickle.dumps(error)
        with os.fdopen(writer, "wb") as stream:
            stream.write(payload)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as stream:
        answer = pickle.loads(stream.read())
    _, _, usage = os.wait4(child, 0)
    if isinstance(answer, BaseException):
        raise answer
    times, baseline, result = answer
    cpu_seconds = (usage.ru_utime + usage.ru_stime) / repeats
    return statistics.median(times), cpu_seconds, max(0, usage.ru_maxrss - baseline) / 1024, result


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


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """The shortest wall time of `repeats` runs of `run`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def per_language(arguments: argparse.Namespace) -> None:
    """Pre-tokenise-only, count and encode rates of each language's reporting half, one thread."""
    import sys

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]
    import languages
    from real_vocabularies import unpack

    from polytok.pretokenize import PreTokenizer

    files = languages.build(2.0)
    names = arguments.languages or sorted(files)
    with tempfile.TemporaryDirectory() as directory:
        encoder = polytok.load(unpack(Path(directory))["cl100k_base"], pattern="cl100k")
    splitter = PreTokenizer("cl100k")
    print(f"the report half of each language (benchmarks/languages.py), pattern and ranks cl100k, one thread, "
          f"best of {arguments.repeats} runs; {os.cpu_count()} cores")
    print(f"{'language':14} {'MB':>5} {'pre-tokenise MB/s':>18} {'count MB/s':>11} {'encode MB/s':>12} {'count / encode':>15}")
    ratios = []
    for name in names:
        text = languages.SEPARATOR.join(languages.documents(files[name]["report"]))
        size = len(text.encode("utf-8")) / 1e6
        split = best_seconds(lambda: splitter.piece_lengths(text), arguments.repeats)
        counted = best_seconds(lambda: polytok.count(polytok.texts([text]), "cl100k", num_threads=1, progress=False),
                               arguments.repeats)
        encoded = best_seconds(lambda: encoder.encode_to_numpy(text, disallowed_special=()), arguments.repeats)
        ratios.append(counted / encoded)
        print(f"{name:14} {size:5.1f} {size / split:18.0f} {size / counted:11.0f} {size / encoded:12.0f} {counted / encoded:15.2f}")
    print(f"count / encode: {min(ratios):.2f}-{max(ratios):.2f}; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=25.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3, help="runs of polytok (median)")
    parser.add_argument("--peer-repeats", type=int, default=1, help="runs of the slower peers (median)")
    parser.add_argument("--pattern", default="cl100k")
    parser.add_argument("--per-language", action="store_true", help="count beside pre-tokenising and encoding, per language")
    parser.add_argument("--languages", nargs="+", help="--per-language: only these (default: every language built)")
    arguments = parser.parse_args()
    if arguments.per_language:
        per_language(arguments)
        return

    path = build_mix(int(arguments.megabytes * 1e6), data_directory())
    size_mb = path.stat().st_size / 1e6
    pattern = PRESETS[arguments.pattern]
    print(f"counting {size_mb:.1f} MB ({', '.join(FILES)} repeated), pattern {arguments.pattern}, "
          f"{arguments.threads} threads, {os.cpu_count()} cores, median of {arguments.repeats} runs "
          f"({arguments.peer_repeats} for peers)")
    try:
        rows = []
        seconds, cpu, peak, ours = measure(
            lambda: polytok.count(path, arguments.pattern, num_threads=arguments.threads, progress=False),
            arguments.repeats,
        )
        rows.append((f"polytok.count, {arguments.threads} threads", seconds, cpu, peak))
        if arguments.threads != 1:
            seconds, cpu, peak, single = measure(
                lambda: polytok.count(path, arguments.pattern, num_threads=1, progress=False), arguments.repeats
            )
            assert single.to_dict() == ours.to_dict()
            rows.append(("polytok.count, 1 thread", seconds, cpu, peak))

        seconds, cpu, peak, reference = measure(lambda: python_baseline(path, pattern), arguments.peer_repeats)
        agree = {word.encode("utf-8"): number for word, number in reference.items()} == ours.to_dict()
        rows.append(("Python regex.findall + Counter" + ("" if agree else " (COUNTS DIFFER)"), seconds, cpu, peak))
        try:
            seconds, cpu, peak, _ = measure(
                lambda: huggingface(path, pattern, arguments.threads), arguments.peer_repeats
            )
            rows.append(("HF tokenizers train_from_iterator, vocab 300", seconds, cpu, peak))
        except ImportError:
            print("(tokenizers not installed: HF row skipped)")

        ours_seconds = rows[0][1]
        print(f"{'':46} {'wall s':>7} {'MB/s':>7} {'CPU s':>7} {'peak MB':>8} {'wall / polytok':>15}")
        for name, seconds, cpu, peak in rows:
            print(f"{name:46} {seconds:7.2f} {size_mb / seconds:7.1f} {cpu:7.2f} {peak:8.0f} "
                  f"{seconds / ours_seconds:15.2f}")
        print(f"{len(ours):,} distinct pre-tokens, {ours.total:,} in all; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        path.unlink()


if __name__ == "__main__":
    main()
