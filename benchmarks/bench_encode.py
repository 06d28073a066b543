"""Encoding throughput: polytok vs tiktoken (single thread) and vs HF tokenizers (all cores),
on the same 32k BPE ranks, the cl100k pattern and a ~20 MB mix of ../shared/data.

The ranks are trained once with HF tokenizers (the cl100k regex, made Oniguruma-safe) and cached
under benchmarks/out/. Before timing, the three libraries must give identical ids on a sample.
Each measurement runs in a fresh process, so its peak memory (RSS above the process's baseline
after loading the data and the tokeniser) is its own. Prints median wall time, MB/s, peak
memory and the ratios the targets are stated in.

    python benchmarks/bench_encode.py [--mb 20] [--repeats 3] [--hf-single-thread]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent.parent / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
OUT = Path(__file__).resolve().parent / "out"
VOCAB_SIZE = 32768
DOCUMENT_BYTES = 4096


def documents(megabytes: float) -> list[str]:
    """The shared data files, repeated to `megabytes`, cut into documents of about 4 KB at line ends."""
    files = sorted(DATA.glob("*.txt"))
    texts = [path.read_text(encoding="utf-8") for path in files]
    target = int(megabytes * 1e6)
    docs: list[str] = []
    size = 0
    while size < target:
        for text in texts:
            start = 0
            while start < len(text) and size < target:
                end = text.find("\n", start + DOCUMENT_BYTES)
                end = len(text) if end < 0 else end + 1
                docs.append(text[start:end])
                size += len(docs[-1].encode("utf-8"))
                start = end
    return docs


def trained_tokenizer():
    """The 32k cl100k-pattern BPE tokeniser, trained by HF tokenizers once and cached."""
    import polytok
    from polytok.formats.huggingface.write import to_oniguruma
    from polytok.pretokenize import PRESETS

    cached = OUT / f"bpe-{VOCAB_SIZE}-cl100k.json"
    if cached.exists():
        return polytok.load(cached)
    import tokenizers
    from tokenizers import models, pre_tokenizers, trainers

    OUT.mkdir(exist_ok=True)
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(tokenizers.Regex(to_oniguruma(PRESETS["cl100k"])), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    print(f"training {VOCAB_SIZE} BPE ranks with HF tokenizers (once; cached in {cached}) ...", flush=True)
    hf.train([str(path) for path in sorted(DATA.glob("*.txt"))], trainer)
    hf_path = OUT / "hf-trained-tokenizer.json"
    hf.save(str(hf_path))
    loaded = polytok.load(hf_path)
    # The same tokeniser with the preset's own spelling of the pattern (same split).
    tokenizer = polytok.Tokenizer(loaded.vocab, segmenter="merges", pattern="cl100k", merges=loaded.merges)
    tokenizer.save(cached)
    hf_path.unlink()
    return tokenizer


def tiktoken_encoding(tokenizer):
    import tiktoken

    ranks = {token: rank for rank, token in enumerate(tokenizer.vocab)}
    return tiktoken.Encoding("bench", pat_str=tokenizer.pattern, mergeable_ranks=ranks, special_tokens={})


def hf_tokenizer(tokenizer):
    import tokenizers

    OUT.mkdir(exist_ok=True)
    path = OUT / "bench-tokenizer.json"
    tokenizer.save_huggingface(path)
    return tokenizers.Tokenizer.from_file(str(path))


def make_encoder(library: str, tokenizer, single_thread: bool):
    """A function docs -> total number of tokens, for one library and threading mode."""
    if library == "polytok":
        if single_thread:
            return lambda docs: sum(len(tokenizer.encode_ordinary(doc)) for doc in docs)
        return lambda docs: sum(map(len, tokenizer.encode_ordinary_batch(docs)))
    if library == "tiktoken":
        encoding = tiktoken_encoding(tokenizer)
        if single_thread:
            return lambda docs: sum(len(encoding.encode_ordinary(doc)) for doc in docs)
        threads = os.cpu_count()
        return lambda docs: sum(map(len, encoding.encode_ordinary_batch(docs, num_threads=threads)))
    if library == "hf":
        hf = hf_tokenizer(tokenizer)
        return lambda docs: sum(len(encoding.ids) for encoding in hf.encode_batch(docs, add_special_tokens=False))
    raise ValueError(library)


def reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets the process's peak RSS (VmHWM) to its current RSS."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_mb(field: str) -> float:
    """VmRSS (current) or VmHWM (peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(library: str, single_thread: bool, megabytes: float, repeats: int, queue) -> None:
    """Child process: times `repeats` runs; reports (median s, tokens, peak RSS MB above the RSS
    before the timed runs, i.e. what encoding itself needs: buffers, thread pools, the ids)."""
    if library == "hf" and single_thread:
        os.environ["RAYON_NUM_THREADS"] = "1"
        os.environ["RAYON_RS_NUM_CPUS"] = "1"
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    tokenizer = trained_tokenizer()
    docs = documents(megabytes)
    encode = make_encoder(library, tokenizer, single_thread)
    encode(docs[:50])  # warm up (thread pools, caches)
    reset_peak_rss()
    baseline = rss_mb("VmRSS")
    times, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = encode(docs)
        times.append(time.perf_counter() - start)
    queue.put((statistics.median(times), tokens, rss_mb("VmHWM") - baseline))


def run_child(library: str, single_thread: bool, megabytes: float, repeats: int) -> tuple[float, int, float]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=measure, args=(library, single_thread, megabytes, repeats, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def check_agreement(tokenizer, docs: list[str]) -> None:
    """polytok, tiktoken and HF give the same ids on a sample of the documents."""
    sample = docs[:: max(1, len(docs) // 300)]
    ours = [tokenizer.encode_ordinary(doc) for doc in sample]
    if [tiktoken_encoding(tokenizer).encode_ordinary(doc) for doc in sample] != ours:
        raise SystemExit("tiktoken ids differ from polytok's on the sample")
    hf = hf_tokenizer(tokenizer)
    if [encoding.ids for encoding in hf.encode_batch(sample, add_special_tokens=False)] != ours:
        raise SystemExit("HF ids differ from polytok's on the sample")
    print(f"ids agree on {len(sample)} sample documents (polytok = tiktoken = HF)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="size of the benchmark text in MB")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (median reported)")
    parser.add_argument("--hf-single-thread", action="store_true", help="also time HF on one thread (slow)")
    args = parser.parse_args()

    tokenizer = trained_tokenizer()
    docs = documents(args.mb)
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    print(f"{megabytes:.1f} MB in {len(docs)} documents from {DATA}; {tokenizer.vocab_size} tokens, cl100k pattern; "
          f"{os.cpu_count()} cores; median of {args.repeats}")
    check_agreement(tokenizer, docs)

    cases = [("polytok", True), ("tiktoken", True)]
    if args.hf_single_thread:
        cases.append(("hf", True))
    cases += [("polytok", False), ("tiktoken", False), ("hf", False)]
    results = {}
    print(f"{'library':<10} {'threads':<8} {'seconds':>8} {'MB/s':>8} {'peak MB':>8} {'tokens':>11}")
    for library, single in cases:
        seconds, tokens, peak = run_child(library, single, args.mb, args.repeats)
        results[library, single] = seconds
        threads = "1" if single else "all"
        print(f"{library:<10} {threads:<8} {seconds:8.2f} {megabytes / seconds:8.2f} {peak:8.1f} {tokens:11d}", flush=True)
    print(f"single thread: polytok / tiktoken throughput = {results['tiktoken', True] / results['polytok', True]:.2f}x (target >= 2)")
    print(f"all cores:     polytok / HF encode_batch     = {results['hf', False] / results['polytok', False]:.2f}x (target >= 1.5)")
    print(f"all cores:     polytok / tiktoken batch      = {results['tiktoken', False] / results['polytok', False]:.2f}x")


if __name__ == "__main__":
    main()
