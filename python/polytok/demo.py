"""`make demo`: the main job on the bundled corpus. Count it, train BPE and ConvexTok, certify
both against the fewest tokens any vocabulary of their size could reach, and cut a sample.
Both certificates bound every vocabulary of the same budget, so the larger bound serves both.

Every 20th line of the bundled corpus is held out, so bytes per token are also measured on text
the tokenisers never saw.
"""
from __future__ import annotations

import gzip
import sys
import time
from typing import Any, Callable, TypeVar

import polytok
from polytok.corpus import default_corpus

VOCAB_SIZE = 4096
SPECIAL = "<|endoftext|>"
SAMPLE = "Tokenisers cut text into pieces: «¿Dónde está la biblioteca?» def f(x): return x**2 — 2026."

Result = TypeVar("Result")


def timed(step: str, work: Callable[[], Result], times: dict[str, float]) -> Result:
    """Runs `work`, recording its wall time under `step`."""
    started = time.perf_counter()
    result = work()
    times[step] = time.perf_counter() - started
    return result


def main() -> int:
    """Prints the corpus, each tokeniser's tokens against the certified bound, held-out bytes per
    token, the sample cut by each, and the time every step took."""
    with gzip.open(default_corpus(), "rt", encoding="utf-8") as stream:
        lines = stream.read().splitlines(keepends=True)
    training = [line for number, line in enumerate(lines) if number % 20]
    held_out = "".join(line for number, line in enumerate(lines) if number % 20 == 0)
    times: dict[str, float] = {}

    counts = timed("count", lambda: polytok.count(polytok.texts(training), pattern="cl100k",
                                                  special_tokens=[SPECIAL], progress=False), times)
    options: dict[str, Any] = {"vocab_size": VOCAB_SIZE, "special_tokens": [SPECIAL], "progress": False}
    tokenizers = {
        "BPE": timed("train BPE", lambda: polytok.train(counts, algorithm="bpe", **options), times),
        "ConvexTok": timed("train and certify ConvexTok", lambda: polytok.train(
            counts, algorithm="convex", solver="dual", rounding="det", **options), times),
    }
    certificates = {
        "BPE": timed("certify BPE", lambda: polytok.certify(tokenizers["BPE"], counts, solver="dual"), times),
        # ConvexTok's training solves the same relaxation and certifies the tokeniser it rounds.
        "ConvexTok": polytok.Certificate.from_dict(tokenizers["ConvexTok"].certificate),
    }

    training_bytes = sum(len(line.encode("utf-8")) for line in training)
    held_out_bytes = len(held_out.encode("utf-8"))
    print(f"polytok {polytok.__version__} on the bundled corpus: {training_bytes / 1e6:.1f} MB to train on, "
          f"{len(counts):,} unique pre-tokens (cl100k pattern), {held_out_bytes / 1e3:,.0f} KB held out")
    print(f"vocabulary size {VOCAB_SIZE:,}: 256 bytes + {VOCAB_SIZE - 257:,} learned tokens (budget K) + 1 special")
    print()
    bound = max(certificate.bound for certificate in certificates.values())
    print(f"  certified lower bound for any vocabulary of budget K: {bound:,.0f} tokens on the training text")
    print(f"  {'tokeniser':<10} {'tokens':>10} {'gap to bound':>13} {'held-out bytes/token':>21}")
    for name, tokenizer in tokenizers.items():
        tokens = certificates[name].tokens
        held_out_tokens = len(tokenizer.encode_ordinary(held_out))
        print(f"  {name:<10} {tokens:>10,} {100 * (tokens / bound - 1):>+12.2f}% "
              f"{held_out_bytes / held_out_tokens:>21.2f}")
    print()
    print(f"  sample: {SAMPLE}")
    for name, tokenizer in tokenizers.items():
        ids = tokenizer.encode(SAMPLE)
        assert tokenizer.decode(ids) == SAMPLE
        pieces = [tokenizer.token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]
        print(f"  {name:<10} {len(ids):>3} tokens  " + "|".join(pieces))
    print()
    print("  time: " + ", ".join(f"{step} {seconds:.2f} s" for step, seconds in times.items())
          + f"; {sum(times.values()):.1f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
