"""Small tokenisers of every segmenter, for the tests of healing, streaming, offsets, chunking
and export: trained on the tests/data excerpts plus a little text over the alphabet the property
tests draw from, so that random strings hit multi-token words, partial characters and unstable
pre-token ends. Built once per session (functools.cache)."""
from __future__ import annotations

import functools
import math
from pathlib import Path

from hypothesis import strategies as st

import polytok
from polytok.tokenizer import Tokenizer

DATA = Path(__file__).parent / "data"
SPECIALS = ["<|endoftext|>", "<pad>"]

# Letters of both cases, a contraction, digits, spaces, line ends, punctuation, a 2-byte
# character, a CJK character and an emoji (4 bytes), each split by byte-level tokens.
ALPHABET = "abeht AT'1 2\n.é中😀s"
alphabet_text = st.text(alphabet=ALPHABET, max_size=24)
# Text without the special tokens' text (which `encode` refuses by default).
any_text = st.text(max_size=60).filter(lambda text: not any(special in text for special in SPECIALS))


def _corpus() -> list[str]:
    texts = [path.read_text(encoding="utf-8")[:6000] for path in sorted(DATA.glob("*.txt"))]
    texts.append(" ".join(["the hat", "The bet", "a bat's", "ate 12", "中中 éte", "😀😀 the", "12 1.2\n", "ATE aTe"] * 40))
    return texts


@functools.cache
def tokenizers() -> dict[str, Tokenizer]:
    """name -> tokeniser: BPE on three patterns and none, WordPiece, and the BPE vocabulary cut
    by the viterbi and shortest_path segmenters."""
    texts = _corpus()
    made = {}
    for pattern in ("cl100k", "o200k", "gpt2"):
        made[f"bpe-{pattern}"] = polytok.train(polytok.texts(texts), algorithm="bpe", vocab_size=700, pattern=pattern,
                                               special_tokens=SPECIALS, progress=False)
    made["bpe-none"] = polytok.train(polytok.texts([line for text in texts for line in text.splitlines()]), algorithm="bpe",
                                     vocab_size=600, pattern=None, special_tokens=SPECIALS, progress=False)
    made["wordpiece"] = polytok.train(polytok.texts(texts), algorithm="wordpiece", vocab_size=900, pattern="cl100k",
                                      special_tokens=SPECIALS, progress=False)
    bpe = made["bpe-cl100k"]
    ordinary = bpe.vocab
    specials = bpe.special_tokens
    # Scores that favour long tokens, with ties broken by the merge order: a plausible Unigram.
    scores = [-8.0 if i < 256 else -math.log(2 + i) / max(1, len(token)) for i, token in enumerate(ordinary)]
    made["viterbi"] = Tokenizer(ordinary, segmenter="viterbi", pattern="cl100k", scores=scores, special_tokens=specials)
    made["shortest_path"] = Tokenizer(ordinary, segmenter="shortest_path", pattern="cl100k", special_tokens=specials)
    return made


NAMES = ["bpe-cl100k", "bpe-o200k", "bpe-gpt2", "bpe-none", "wordpiece", "viterbi", "shortest_path"]
PATTERNED = [name for name in NAMES if name != "bpe-none"]
