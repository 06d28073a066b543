"""How much `polytok.evaluate` costs over the tokeniser's own batch encoding (target: at least 90%
of `encode_batch`'s throughput), on a ~25 MB mix of ../shared/data, one document per line.

Both sides get the same documents in the same batches; the encoder side only encodes and drops
the ids. Peak memory is the growth of the process's resident set over the run (Linux: the
high-water mark is reset through /proc/self/clear_refs before each run).

    python benchmarks/bench_evaluate.py                       # trains a BPE tokeniser first
    python benchmarks/bench_evaluate.py --tokenizer tok.json  # or any file polytok reads
    python benchmarks/bench_evaluate.py --tokenizer cl100k.tiktoken --pattern cl100k

A tiktoken.Encoding of the same ranks is measured too (evaluate accepts tiktoken encodings), when
the tokeniser can be exported to tiktoken or is a tiktoken file.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polytok
from polytok.metrics import BATCH_CHARACTERS, evaluate_documents

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside a clone of the repository, or beside the folder of a git worktree.
DATA_CANDIDATES = (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data")


def corpus_lines(directory: Path, megabytes: float) -> list[str]:
    """Lines of every .txt file in `directory`, in name order, repeated until `megabytes` MB of UTF-8."""
    files = sorted(directory.glob("*.txt"))
    if not files:
        sys.exit(f"no .txt files in {directory}; pass --data")
    lines = [line for path in files for line in path.read_text(encoding="utf-8").splitlines(keepends=True)]
    wanted, total, taken = megabytes * 1e6, 0, []
    for line in itertools.cycle(lines):
        if total >= wanted:
            break
        taken.append(line)
        total += len(line.encode("utf-8"))
    return taken


def batches(lines: list[str]) -> list[list[str]]:
    """The batches evaluate forms: consecutive documents until BATCH_CHARACTERS characters."""
    grouped, batch, size = [], [], 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= BATCH_CHARACTERS:
            grouped.append(batch)
            batch, size = [], 0
    return grouped + ([batch] if batch else [])


def _status_megabytes(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(work, repeats: int) -> tuple[float, float]:
    """Median wall seconds of `work` over `repeats` runs, and the most its resident set grew.
    In-process: a forked child would inherit the parent's rayon pool without its threads."""
    times, growth = [], []
    for _ in range(repeats):
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM, the peak resident set, to the current one
        before = _status_megabytes("VmRSS")
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
        growth.append(_status_megabytes("VmHWM") - before)
    return statistics.median(times), max(growth)


def encode_only(tokenizer, grouped: list[list[str]]):
    def work():
        for batch in grouped:
            tokenizer.encode_batch(batch)
    return work


def evaluate_all(tokenizer, lines: list[str]):
    def work():
        evaluate_documents(tokenizer, lines)
    return work


def tiktoken_twin(tokenizer, path: str | None, pattern: str | None):
    """A tiktoken.Encoding with the same ranks and pattern, or None (with the reason printed)."""
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        print("tiktoken is not installed: no tiktoken row")
        return None
    if path and Path(path).suffix == ".tiktoken":
        ranks_file = path
    elif hasattr(tokenizer, "save_tiktoken") and getattr(tokenizer, "pattern", None):
        pattern = tokenizer.pattern
        ranks_file = os.path.join(tempfile.mkdtemp(), "ranks.tiktoken")
        try:
            tokenizer.save_tiktoken(ranks_file)
        except polytok.Error as error:
            print(f"no tiktoken row: {error}")
            return None
    else:
        print("no tiktoken row: the tokeniser has no tiktoken export")
        return None
    from polytok.pretokenize import resolve_pattern

    return tiktoken.Encoding("bench", pat_str=resolve_pattern(pattern), mergeable_ranks=load_tiktoken_bpe(ranks_file),
                             special_tokens={})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=next((p for p in DATA_CANDIDATES if p.is_dir()), DATA_CANDIDATES[0]),
                        help="directory of .txt files (default: ../shared/data)")
    parser.add_argument("--megabytes", type=float, default=25.0, help="corpus size in MB")
    parser.add_argument("--tokenizer", help="tokeniser file; default: train BPE on the corpus's first 5 MB")
    parser.add_argument("--pattern", default="cl100k", help="pattern for tiktoken files and for training")
    parser.add_argument("--vocab-size", type=int, default=32768, help="vocabulary size when training")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    args = parser.parse_args()

    lines = corpus_lines(args.data, args.megabytes)
    size = sum(len(line.encode("utf-8")) for line in lines)
    if args.tokenizer:
        from polytok.compare import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer, pattern=args.pattern)
        source = args.tokenizer
    else:
        training, total = [], 0
        for line in lines:
            if total >= 5e6:
                break
            training.append(line)
            total += len(line.encode("utf-8"))
        started = time.perf_counter()
        tokenizer = polytok.train(training, algorithm="bpe", vocab_size=args.vocab_size, pattern=args.pattern,
                                  progress=False)
        source = f"BPE, vocab {args.vocab_size}, {args.pattern}, trained on 5 MB in {time.perf_counter() - started:.1f} s"

    print(f"corpus: {size / 1e6:.1f} MB, {len(lines):,} documents (lines) from {args.data.resolve()}")
    print(f"tokeniser: {source}")
    print(f"machine: {os.cpu_count()} cores; median of {args.repeats} runs; RSS = peak growth of the resident set\n")
    grouped = batches(lines)
    rows = [("polytok", tokenizer)]
    twin = tiktoken_twin(tokenizer, args.tokenizer, args.pattern)
    if twin is not None:
        rows.append(("tiktoken", twin))
    print(f"{'tokeniser':<10} {'encode_batch':>14} {'evaluate':>14} {'MB/s enc':>9} {'MB/s eval':>9} "
          f"{'RSS enc':>9} {'RSS eval':>9} {'ratio':>7}")
    for name, encoder in rows:
        encode_seconds, encode_peak = measure(encode_only(encoder, grouped), args.repeats)
        evaluate_seconds, evaluate_peak = measure(evaluate_all(encoder, lines), args.repeats)
        ratio = encode_seconds / evaluate_seconds
        print(f"{name:<10} {encode_seconds:>12.2f} s {evaluate_seconds:>12.2f} s {size / 1e6 / encode_seconds:>9.2f} "
              f"{size / 1e6 / evaluate_seconds:>9.2f} {encode_peak:>6.0f} MB {evaluate_peak:>6.0f} MB {ratio:>7.1%}")
    print("\nratio = evaluate throughput / encode_batch throughput (target: at least 90% for polytok)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
