"""Validation bits per byte of a small GPT trained per tokeniser (the ConvexTok paper's Table 4
protocol at small scale, through polytok.lm.evaluate): BPE, ConvexTok Det and Unigram at two
vocabulary sizes, several seeds each, and whether the differences to BPE are significant.

Data: handbook-en-US.txt and kjv.txt of ../shared/data. Of each file the last tenth of its lines
is held out for validation; the tokenisers (cl100k regex) and the language models train on the
rest. Every model gets the same hyperparameters and the same training bytes; its context is a
window of bytes, the same text for every tokeniser.

    python benchmarks/bench_lm.py --cache /tmp/lm-tokenizers --budget 6M --valid-bytes 0 --json lm.json
        # the CPU table of docs/benchmarks.md: 6 MB of training a model, all 0.52 MB held out;
        # 26-32 min per tokeniser (3 seeds) at 16k, 7-8 min at 4k, two at a time on 2 cores
    python benchmarks/bench_lm.py --cache /tmp/lm-tokenizers --json lm.json
        # a quick run: 400 KB a model, 150 KB held out, 13 min of language models on 2 busy
        # cores; the tokenisers train first (ConvexTok about 6 min) and stay in --cache

The paper's d12 scale (depth 12, width 768, a context of about 8 KB, billions of training bytes)
needs a GPU and far more text than ../shared/data's 5 MB; run `polytok lm-eval --device cuda`
on such a corpus (docs/lm.md).

Significance: Welch's t-test of each tokeniser's seeds against BPE's at the same vocabulary size
(two-sided, 5%); with 3 seeds it only detects differences of a few standard errors.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from scipy import stats

import polytok
from polytok.cli.lm import byte_count
from polytok.lm import evaluate

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside a clone of the repository, or beside the folder of a git worktree.
DATA_CANDIDATES = (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data")
FILES = ("handbook-en-US.txt", "kjv.txt")
ALGORITHMS = {"bpe": ("bpe", {}), "det": ("convex", {"rounding": "det"}), "unigram": ("unigram", {})}


def split(directory: Path, valid_fraction: float, valid_bytes: int | None) -> tuple[str, str]:
    """Training text and held-out text: of each file, the last `valid_fraction` of its lines, of
    which the first lines up to `valid_bytes` / (number of files) bytes are kept for validation."""
    train, valid = [], []
    for name in FILES:
        lines = (directory / name).read_text(encoding="utf-8").splitlines(keepends=True)
        cut = round(len(lines) * (1 - valid_fraction))
        train.append("".join(lines[:cut]))
        held, kept = [], 0
        for line in lines[cut:]:
            if valid_bytes is not None and kept + len(line.encode()) > valid_bytes // len(FILES):
                break
            held.append(line)
            kept += len(line.encode())
        valid.append("".join(held))
    return "".join(train), "".join(valid)


def train_tokenizers(text: str, algorithms: list[str], vocab_sizes: list[int], cache: Path | None) -> tuple[dict, dict]:
    """Every (algorithm, vocabulary size) tokeniser trained on `text`, with its training seconds;
    with `cache`, tokenisers saved there by an earlier run on the same text are loaded instead."""
    counts = None
    tokenizers, seconds = {}, {}
    for size in vocab_sizes:
        for name in algorithms:
            key = f"{name}-{size}"
            saved = None if cache is None else cache / f"{key}-{len(text.encode())}.json"
            if saved is not None and saved.exists():
                tokenizers[key] = polytok.load(saved)
                continue
            if counts is None:
                counts = polytok.count(polytok.texts([text]), pattern="cl100k", progress=False)
            algorithm, options = ALGORITHMS[name]
            started = time.perf_counter()
            tokenizers[key] = polytok.train(counts, algorithm, vocab_size=size, progress=False, **options)
            seconds[key] = time.perf_counter() - started
            if saved is not None:
                cache.mkdir(parents=True, exist_ok=True)
                tokenizers[key].save(saved)
    return tokenizers, seconds


def significance(report: dict, algorithms: list[str], vocab_sizes: list[int]) -> list[str]:
    """Lines comparing each tokeniser with BPE at the same vocabulary size."""
    lines = []
    results = report["results"]
    for size in vocab_sizes:
        base = results.get(f"bpe-{size}")
        for name in algorithms:
            other = results.get(f"{name}-{size}")
            if name == "bpe" or base is None or other is None:
                continue
            a = [run["valid_bpb"] for run in other["runs"]]
            b = [run["valid_bpb"] for run in base["runs"]]
            difference = statistics.fmean(a) - statistics.fmean(b)
            verdict = "-"
            if len(a) > 1 and len(b) > 1:
                p = stats.ttest_ind(a, b, equal_var=False).pvalue
                verdict = f"p = {p:.3f}, {'significant' if p < 0.05 else 'not significant'} at 5%"
            lines.append(f"  {name}-{size} − bpe-{size}: {difference:+.4f} BpB "
                         f"({statistics.fmean(a) / statistics.fmean(b):.4f}x), {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="folder of the shared corpora (default: ../shared/data)")
    parser.add_argument("--algorithms", default="bpe,det,unigram", help="of: bpe, det, unigram")
    parser.add_argument("--vocab-sizes", default="4096,16384")
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="of each file, the lines held out")
    parser.add_argument("--valid-bytes", type=byte_count, default=150_000,
                        help="validation bytes kept of the held-out lines (0: all)")
    parser.add_argument("--cache", type=Path, help="folder to keep the trained tokenisers in, for the next run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=byte_count, default=400_000, help="training bytes per model (e.g. 4M)")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--context-bytes", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (1: fastest for small models)")
    parser.add_argument("--json", type=Path, help="write the results here (a .json path; a CSV goes beside it)")
    args = parser.parse_args()

    data = args.data or next((path for path in DATA_CANDIDATES if path.is_dir()), None)
    if data is None:
        sys.exit("no ../shared/data; pass --data")
    algorithms, vocab_sizes = args.algorithms.split(","), [int(size) for size in args.vocab_sizes.split(",")]
    train_text, valid_text = split(data, args.valid_fraction, args.valid_bytes or None)
    print(f"data: {', '.join(FILES)}; {len(train_text.encode()):,} training bytes, "
          f"{len(valid_text.encode()):,} validation bytes", flush=True)

    tokenizers, tokenizer_seconds = train_tokenizers(train_text, algorithms, vocab_sizes, args.cache)
    if tokenizer_seconds:
        print("tokeniser training s: " + ", ".join(f"{name} {s:.1f}" for name, s in tokenizer_seconds.items()),
              flush=True)

    started = time.perf_counter()
    report = evaluate(
        tokenizers, polytok.texts([train_text]), polytok.texts([valid_text]),
        budget=args.budget, depth=args.depth, width=args.width, context_bytes=args.context_bytes,
        batch_size=args.batch_size, seeds=args.seeds, learning_rate=args.lr, device=args.device, torch_threads=args.torch_threads,
        output=args.json,
    )
    elapsed = time.perf_counter() - started
    settings = report["settings"]
    print(f"\nlanguage models: depth {settings['depth']}, width {settings['width']}, {settings['heads']} heads, "
          f"context {settings['context_bytes']} bytes, batch {settings['batch_size']}, "
          f"{settings['budget_bytes']:,} training bytes each, lr {settings['learning_rate']}, "
          f"{len(settings['seeds'])} seeds, device {settings['device']}, torch {settings['torch']} "
          f"({settings['torch_threads']} threads); {elapsed:.0f} s in all\n")
    print("| vocab | tokeniser | valid BpB (± s.e.) | uniform bound | tokens/byte | parameters | steps | "
          "train FLOPs | s per model |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in vocab_sizes:
        for name in algorithms:
            result = report["results"][f"{name}-{size}"]
            error = result["valid_bpb_stderr"]
            print(f"| {size} | {name} | {result['valid_bpb']:.4f}" + (f" (± {error:.4f})" if error is not None else "")
                  + f" | {result['uniform_bpb']:.3f} | {result['valid_tokens_per_byte']:.4f} | "
                  f"{result['parameters']:,} | {result['runs'][0]['steps']:,} | {result['train_flops']:.2e} | "
                  f"{result['train_seconds'] / result['seeds']:.1f} |")
    print("\ndifferences to BPE (Welch's t-test over the seeds):")
    print("\n".join(significance(report, algorithms, vocab_sizes)))
    if args.json:
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
