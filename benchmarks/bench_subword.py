r"""WordPiece and Unigram against their peers: polytok vs SentencePiece (Unigram) and Hugging Face
`tokenizers` (WordPiece, Unigram), same vocabulary sizes, same corpus, same held-out text.

The corpus mixes /work/shared/data (English, German, Spanish, French and Chinese prose, the KJV)
with the Python standard library's source, to `--mb` megabytes; about 5% of it is held out.
Each training run is its own subprocess, so peak memory (max RSS) is that trainer's alone; the
same subprocess then measures bytes per token on the held-out text and single-threaded encoding
throughput. polytok and HF use the cl100k pre-tokenisation regex on raw bytes; SentencePiece uses
its own (whitespace-as-symbol, NFKC) pipeline with byte fallback. polytok-wordpiece-f100 is
WordPiece with min_frequency=100 (see python/polytok/trainers/wordpiece.py for why);
polytok-unigram-ws pre-tokenises like SentencePiece's whitespace split (" ?\S+|\s+"), to
compare compression with it on an equal footing.

    python benchmarks/bench_subword.py --mb 25 --vocab 32768 [--only polytok-unigram,spm-unigram]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path("/work/shared/data")
# SentencePiece-like pre-tokens: a word with the space before it, or a run of whitespace.
WHITESPACE = r" ?\S+|\s+"
CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""


def build_mix(megabytes: float, directory: Path) -> tuple[Path, Path]:
    """Write train.txt and heldout.txt: paragraphs of the data files and stdlib modules, in a
    fixed order, about 5% of the bytes held out."""
    documents: list[bytes] = []
    for path in sorted(DATA.glob("*.txt")):
        # Documents of 100 lines: the KJV has one verse per line and no blank lines.
        lines = path.read_bytes().splitlines(keepends=True)
        documents += [b"".join(lines[i : i + 100]) for i in range(0, len(lines), 100)]
    stdlib = os.path.dirname(os.__file__)
    for path in sorted(glob.glob(f"{stdlib}/**/*.py", recursive=True)):
        source = Path(path).read_bytes()
        if "site-packages" not in path and is_utf8(source):  # peers read only valid UTF-8
            documents.append(source)
    # Interleave prose and code, then cut at the requested size.
    documents.sort(key=lambda d: hash_of(d))
    train, heldout, size, heldout_size = [], [], 0, 0
    for document in documents:
        if size >= megabytes * 1e6:
            break
        size += len(document)
        if heldout_size < size / 20:
            heldout.append(document)
            heldout_size += len(document)
        else:
            train.append(document)
    train_path, heldout_path = directory / "train.txt", directory / "heldout.txt"
    train_path.write_bytes(b"".join(train))
    heldout_path.write_bytes(b"".join(heldout))
    return train_path, heldout_path


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def hash_of(data: bytes) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


# Each runner is the source of a subprocess: it trains, prints {"train_s", "peak_mb"}, then
# measures the held-out text. TRAIN, HELDOUT and VOCAB are substituted.
RUNNER_PRELUDE = """
import collections, json, resource, sys, time
TRAIN, HELDOUT, VOCAB = {train!r}, {heldout!r}, {vocab}
CL100K = {cl100k!r}
WHITESPACE = {whitespace!r}
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def count_words(path, pattern="cl100k"):
    # polytok.count when present (Rust, streaming); otherwise the pre-tokeniser over 1 MB
    # chunks cut at line ends (as HF reads its files line by line) into a Counter.
    import polytok
    from polytok.counts import PreTokenCounts
    from polytok.pretokenize import PreTokenizer
    if hasattr(polytok, "count"):
        return polytok.count([path], pattern=pattern, progress=False)
    pre, counter, rest = PreTokenizer(pattern), collections.Counter(), b""
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            block = rest + block
            cut = block.rfind(b"\\n") + 1 or len(block)
            counter.update(pre.split(block[:cut]))
            rest = block[cut:]
    counter.update(pre.split(rest))
    return PreTokenCounts.from_dict(counter, pre.pattern)
def report(train_s, encode, heldout):
    result = {{"train_s": train_s, "peak_mb": peak_mb()}}
    encode(heldout[:100000])  # warm-up
    start = time.perf_counter()
    tokens = encode(heldout)
    seconds = time.perf_counter() - start
    result["bytes_per_token"] = len(heldout.encode() if isinstance(heldout, str) else heldout) / tokens
    result["encode_mb_s"] = len(heldout.encode() if isinstance(heldout, str) else heldout) / 1e6 / seconds
    print(json.dumps(result))
"""

RUNNERS = {
    "polytok-wordpiece": """
MIN_FREQUENCY = 1
from polytok.tokenizer import Tokenizer
from polytok.pretokenize import PreTokenizer
from polytok.trainers.wordpiece import learn_wordpiece
start = time.perf_counter()
counts = count_words(TRAIN)
pre = PreTokenizer("cl100k")
vocab, _ = learn_wordpiece(counts, VOCAB - 512, "##", MIN_FREQUENCY)
train_s = time.perf_counter() - start
model = Tokenizer(vocab, segmenter="longest_match", pattern=pre.pattern, continuation_marker="##")
report(train_s, lambda text: len(model.encode_ordinary(text)), open(HELDOUT, "rb").read())
""",
    "polytok-wordpiece-f100": """
MIN_FREQUENCY = 100
from polytok.tokenizer import Tokenizer
from polytok.pretokenize import PreTokenizer
from polytok.trainers.wordpiece import learn_wordpiece
start = time.perf_counter()
counts = count_words(TRAIN)
pre = PreTokenizer("cl100k")
vocab, _ = learn_wordpiece(counts, VOCAB - 512, "##", MIN_FREQUENCY)
train_s = time.perf_counter() - start
model = Tokenizer(vocab, segmenter="longest_match", pattern=pre.pattern, continuation_marker="##")
report(train_s, lambda text: len(model.encode_ordinary(text)), open(HELDOUT, "rb").read())
""",
    "polytok-unigram": """
PATTERN = "cl100k"
from polytok.tokenizer import Tokenizer
from polytok.pretokenize import PreTokenizer
from polytok.trainers.unigram import learn_unigram
start = time.perf_counter()
counts = count_words(TRAIN, PATTERN)
pre = PreTokenizer(PATTERN)
vocab, scores, _ = learn_unigram(counts, VOCAB - 256)
train_s = time.perf_counter() - start
model = Tokenizer(vocab, segmenter="viterbi", pattern=pre.pattern, scores=scores)
report(train_s, lambda text: len(model.encode_ordinary(text)), open(HELDOUT, "rb").read())
""",
    "polytok-unigram-ws": """
PATTERN = WHITESPACE
from polytok.tokenizer import Tokenizer
from polytok.pretokenize import PreTokenizer
from polytok.trainers.unigram import learn_unigram
start = time.perf_counter()
counts = count_words(TRAIN, PATTERN)
pre = PreTokenizer(PATTERN)
vocab, scores, _ = learn_unigram(counts, VOCAB - 256)
train_s = time.perf_counter() - start
model = Tokenizer(vocab, segmenter="viterbi", pattern=pre.pattern, scores=scores)
report(train_s, lambda text: len(model.encode_ordinary(text)), open(HELDOUT, "rb").read())
""",
    "spm-unigram": """
import io, sentencepiece as spm
start = time.perf_counter()
model_bytes = io.BytesIO()
spm.SentencePieceTrainer.train(input=TRAIN, model_writer=model_bytes, model_type="unigram", vocab_size=VOCAB,
    byte_fallback=True, num_threads=2, minloglevel=2)
train_s = time.perf_counter() - start
sp = spm.SentencePieceProcessor(model_proto=model_bytes.getvalue())
lines = open(HELDOUT, encoding="utf-8").read()
def encode(text):
    return sum(len(ids) for ids in sp.encode(text.split("\\n"), num_threads=1))
report(train_s, encode, lines)
""",
    "hf-wordpiece": """
from tokenizers import Tokenizer, Regex, models, pre_tokenizers, trainers, decoders
start = time.perf_counter()
tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=10**9))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(CL100K), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=["[UNK]"], show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), continuing_subword_prefix="##")
tok.train([TRAIN], trainer)
train_s = time.perf_counter() - start
report(train_s, lambda text: len(tok.encode(text).ids), open(HELDOUT, encoding="utf-8").read())
""",
    "hf-unigram": """
from tokenizers import Tokenizer, Regex, models, pre_tokenizers, trainers
start = time.perf_counter()
tok = Tokenizer(models.Unigram())
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(CL100K), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
trainer = trainers.UnigramTrainer(vocab_size=VOCAB, show_progress=False, max_piece_length=16,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
tok.train([TRAIN], trainer)
train_s = time.perf_counter() - start
report(train_s, lambda text: len(tok.encode(text).ids), open(HELDOUT, encoding="utf-8").read())
""",
}


def run(name: str, train: Path, heldout: Path, vocab: int, timeout: float) -> dict:
    source = RUNNER_PRELUDE.format(train=str(train), heldout=str(heldout), vocab=vocab, cl100k=CL100K, whitespace=WHITESPACE) + RUNNERS[name]
    env = dict(os.environ, RAYON_NUM_THREADS=os.environ.get("RAYON_NUM_THREADS", "2"))
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=25.0, help="corpus size in MB (train + held out)")
    parser.add_argument("--vocab", type=int, nargs="+", default=[32768], help="vocabulary sizes")
    parser.add_argument("--only", default=",".join(RUNNERS), help="comma-separated runners")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per training run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        train, heldout = build_mix(args.mb, Path(directory))
        print(f"corpus: {train.stat().st_size / 1e6:.1f} MB train, {heldout.stat().st_size / 1e6:.2f} MB held out; "
              f"{os.cpu_count()} CPUs")
        header = f"{'vocab':>6} {'trainer':<18} {'train s':>8} {'peak MB':>8} {'bytes/tok':>9} {'enc MB/s':>8}"
        for vocab in args.vocab:
            print(header)
            results = {}
            for name in args.only.split(","):
                result = results[name] = run(name, train, heldout, vocab, args.timeout)
                if "error" in result:
                    print(f"{vocab:>6} {name:<18} {result['error']}")
                    continue
                print(f"{vocab:>6} {name:<18} {result['train_s']:8.1f} {result['peak_mb']:8.0f} "
                      f"{result['bytes_per_token']:9.3f} {result['encode_mb_s']:8.2f}", flush=True)
            for ours, peer in (("polytok-unigram", "spm-unigram"), ("polytok-unigram-ws", "spm-unigram"),
                               ("polytok-unigram", "hf-unigram"),
                               ("polytok-wordpiece", "hf-wordpiece")):
                a, b = results.get(ours, {}), results.get(peer, {})
                if "train_s" in a and "train_s" in b:
                    print(f"       {ours} / {peer}: train time {a['train_s'] / b['train_s']:.3f}x, "
                          f"peak memory {a['peak_mb'] / b['peak_mb']:.2f}x, "
                          f"encoding throughput {a['encode_mb_s'] / b['encode_mb_s']:.2f}x, "
                          f"bytes/token {a['bytes_per_token'] / b['bytes_per_token']:.3f}x")


if __name__ == "__main__":
    main()
