"""`make demo`: train a BPE tokeniser on the bundled corpus and show what it does.

Every 20th line of the bundled corpus is held out, so bytes per token are measured on text the
tokeniser never saw.
"""
from __future__ import annotations

import gzip
import sys
import time

import polytok
from polytok.corpus import default_corpus

VOCAB_SIZE = 8192
SAMPLE = "Tokenisers cut text into pieces: «¿Dónde está la biblioteca?» def f(x): return x**2 — 2026."


def main() -> int:
    """Train, report vocabulary size, time, held-out bytes per token, and one sample cut into tokens."""
    with gzip.open(default_corpus(), "rt", encoding="utf-8") as stream:
        lines = stream.read().splitlines(keepends=True)
    training = [line for number, line in enumerate(lines) if number % 20]
    held_out = "".join(line for number, line in enumerate(lines) if number % 20 == 0)

    started = time.perf_counter()
    tokenizer = polytok.train(training, algorithm="bpe", vocab_size=VOCAB_SIZE, pattern="cl100k",
                              special_tokens=["<|endoftext|>"], progress=False)
    seconds = time.perf_counter() - started

    held_out_bytes = len(held_out.encode("utf-8"))
    held_out_tokens = len(tokenizer.encode_ordinary(held_out))
    sample_ids = tokenizer.encode(SAMPLE)
    pieces = [tokenizer.token_bytes(i).decode("utf-8", "replace") for i in sample_ids]

    print(f"polytok {polytok.__version__}: BPE trained on the bundled corpus "
          f"({sum(len(line.encode()) for line in training) / 1e6:.1f} MB, pattern cl100k)")
    print(f"  vocabulary size      {tokenizer.vocab_size:,} (256 bytes + {VOCAB_SIZE - 257:,} merges + 1 special)")
    print(f"  training time        {seconds:.2f} s")
    print(f"  held-out text        {held_out_bytes / 1e3:,.0f} KB -> {held_out_tokens:,} tokens, "
          f"{held_out_bytes / held_out_tokens:.2f} bytes per token")
    print(f"  sample               {SAMPLE}")
    print(f"  {len(sample_ids)} tokens           " + "|".join(pieces))
    assert tokenizer.decode(sample_ids) == SAMPLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
