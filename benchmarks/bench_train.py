"""BPE training at one vocabulary size: polytok against HF `tokenizers` and `rustbpe`.

All three read the same documents (the lines of a ~25 MB mix of ../shared/data, cycling through
the files until the size is reached) with the same cl100k pre-tokenisation, inside one run of
this script. Each training runs in a fresh subprocess, so that its peak memory (the child's
own maximum resident set) is not mixed with another's; wall time is measured in the child around
the training call, reading the documents included. Prints the median of --repeats runs and the
ratios polytok/HF and polytok/rustbpe, and polytok's counting and merging phases separately.

    python benchmarks/bench_train.py [--size-mb 25] [--vocab-size 32768] [--repeats 3]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

# ../shared/data beside the repository, as the project lays it out; POLYTOK_DATA overrides.
DATA = Path(os.environ.get("POLYTOK_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

# cl100k as tiktoken writes it. Oniguruma (HF) reads `{1,3}+` as "one or more runs of 1-3 digits"
# rather than a possessive `{1,3}`, so HF gets the plain greedy `{1,3}`, which matches the same.
CL100K_HF = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
TOOLS = ("polytok", "hf", "rustbpe")


def documents(size_mb: float) -> Iterator[str]:
    """The lines of the data files, cycling through them until `size_mb` MB have been yielded."""
    files = sorted(DATA.glob("*.txt"))
    budget = int(size_mb * 1e6)
    while True:
        for path in files:
            with open(path, encoding="utf-8") as stream:
                for line in stream:
                    yield line
                    budget -= len(line.encode("utf-8"))
                    if budget <= 0:
                        return


def count_polytok(docs: Iterator[str]):
    """Pre-token counts with polytok's cl100k pre-tokeniser."""
    import polytok

    return polytok.count(docs, pattern="cl100k", progress=False)


def train_polytok(docs: Iterator[str], vocab_size: int) -> tuple[list[bytes], dict]:
    from polytok.trainers.bpe import learn_merges

    started = time.perf_counter()
    counts = count_polytok(docs)
    counted = time.perf_counter()
    vocab, _, _ = learn_merges(counts, vocab_size - 256, progress=False)
    done = time.perf_counter()
    return vocab, {"count_s": counted - started, "merge_s": done - counted, "unique_pre_tokens": len(counts)}


def train_hf(docs: Iterator[str], vocab_size: int) -> tuple[list[bytes], dict]:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    from tokenizers.pre_tokenizers import ByteLevel

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K_HF), behavior="isolated"),
            ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=ByteLevel.alphabet(), special_tokens=[]
    )
    tokenizer.train_from_iterator(docs, trainer=trainer)
    # Undo the byte-to-printable-character mapping of the ByteLevel stage.
    printable = _byte_level_alphabet()
    vocab = [bytes(printable[ch] for ch in token) for token in tokenizer.get_vocab()]
    return vocab, {}


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's map from bytes to printable characters, inverted (character -> byte)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in keep:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def train_rustbpe(docs: Iterator[str], vocab_size: int) -> tuple[list[bytes], dict]:
    import rustbpe

    from polytok.pretokenize import PRESETS

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(docs, vocab_size, pattern=PRESETS["cl100k"])
    return [bytes(token) for token, _ in tokenizer.get_mergeable_ranks()], {}


def worker(tool: str, size_mb: float, vocab_size: int, vocab_out: str) -> None:
    """One training in this (child) process; prints a JSON line with time and peak memory."""
    trainer = {"polytok": train_polytok, "hf": train_hf, "rustbpe": train_rustbpe}[tool]
    # Import before the clock starts: start-up costs are not training time.
    importlib.import_module({"polytok": "polytok.trainers.bpe", "hf": "tokenizers", "rustbpe": "rustbpe"}[tool])
    started = time.perf_counter()
    vocab, phases = trainer(documents(size_mb), vocab_size)
    seconds = time.perf_counter() - started
    Path(vocab_out).write_bytes(b"\n".join(token.hex().encode() for token in vocab))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "vocab": len(vocab), **phases}))


def run_child(tool: str, args: argparse.Namespace, vocab_out: str) -> dict:
    command = [sys.executable, __file__, "--worker", tool, "--size-mb", str(args.size_mb),
               "--vocab-size", str(args.vocab_size), "--vocab-out", vocab_out]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=25.0)
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--vocab-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.size_mb, args.vocab_size, args.vocab_out)
        return

    if not list(DATA.glob("*.txt")):
        raise SystemExit(f"no .txt files in {DATA}; set POLYTOK_DATA to the shared data folder")
    print(f"BPE training, vocab {args.vocab_size}, cl100k, {args.size_mb:g} MB of {DATA}, "
          f"{args.repeats} run(s) each, {os.cpu_count()} CPUs")
    results: dict[str, list[dict]] = {tool: [] for tool in args.tools}
    vocabs: dict[str, set[bytes]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for tool in args.tools:  # interleaved, so load changes on the machine hit all alike
                vocab_out = os.path.join(scratch, f"{tool}.vocab")
                results[tool].append(run_child(tool, args, vocab_out))
                vocabs[tool] = {bytes.fromhex(line) for line in Path(vocab_out).read_text().split()}
                print(f"  run {repeat + 1} {tool:8} {results[tool][-1]['seconds']:7.2f} s "
                      f"{results[tool][-1]['peak_mb']:7.0f} MB", flush=True)

    median = {tool: {key: statistics.median(run[key] for run in runs) for key in ("seconds", "peak_mb")}
              for tool, runs in results.items()}
    print(f"\n{'tool':10} {'median s':>9} {'peak MB':>8} {'vocab':>7}")
    for tool, runs in results.items():
        print(f"{tool:10} {median[tool]['seconds']:9.2f} {median[tool]['peak_mb']:8.0f} {runs[0]['vocab']:7}")
    if "polytok" in results:
        runs = results["polytok"]
        print(f"\npolytok phases (median): counting {statistics.median(r['count_s'] for r in runs):.2f} s, "
              f"merging {statistics.median(r['merge_s'] for r in runs):.2f} s, "
              f"{runs[0]['unique_pre_tokens']:,} unique pre-tokens")
        for peer, target in (("hf", 0.5), ("rustbpe", 1.0)):
            if peer in results:
                time_ratio = median["polytok"]["seconds"] / median[peer]["seconds"]
                memory_ratio = median["polytok"]["peak_mb"] / median[peer]["peak_mb"]
                shared = len(vocabs["polytok"] & vocabs[peer]) / len(vocabs["polytok"])
                print(f"polytok/{peer:8} time {time_ratio:5.2f}x (target <= {target}x)  "
                      f"memory {memory_ratio:5.2f}x  same tokens {shared:.1%}")


if __name__ == "__main__":
    main()
