"""WordPiece training: BPE's greedy merge loop, scored by n(a, b) / (n(a) · n(b)).

The score prefers pairs that occur together more often than their parts' own frequencies
predict (pointwise mutual information), not merely often. Encoding is the `longest_match`
segmenter: no merge list is kept, each position takes the longest token that fits.

Vocabulary accounting: ids 0..255 are the 256 bytes as tokens that begin a pre-token. With a
continuation marker (default "##") ids 256..511 are the same bytes as continuation tokens,
spelled b"##" + byte, so nothing is ever unknown; learned tokens follow, then special tokens. So
the base (`base_size`) is 512 tokens and `vocab_size = 512 + len(special_tokens) + K` for a
budget of K learned tokens. Without a marker (`continuation_marker=None`) tokens carry no
position and the base is the 256 bytes.

The score rewards pairs whose parts are rare: two byte sequences seen once, always together,
score 1, the maximum, while " t"+"he" scores tiny. On real text at the default
`min_frequency=1` the vocabulary fills with such hapax pieces and compresses held-out text
poorly (see benchmarks/bench_subword.py); `min_frequency` (pairs seen fewer times are never
merged) is the lever that trades the score's purity for compression.
"""
from __future__ import annotations

from typing import Any, Sequence


from polytok import _core, checks
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.progress import progress_bar
from polytok.tokenizer import Tokenizer


CONTINUATION_MARKER = "##"
"""The default continuation marker, BERT's."""

def base_size(continuation_marker: str | None) -> int:
    """Tokens every WordPiece vocabulary starts with: 256 bytes, twice with a marker."""
    return 512 if continuation_marker else 256


def check_options(
    *, continuation_marker: str | None = CONTINUATION_MARKER, min_frequency: int = 1, **_: Any
) -> None:
    """Refuses option values WordPiece training cannot use (`train` checks them before counting)."""
    if continuation_marker is not None and not isinstance(continuation_marker, str):
        raise ConfigError(f"continuation_marker must be a string or None, got {continuation_marker!r}")
    checks.integer("min_frequency", min_frequency)


def learn_wordpiece(
    counts: PreTokenCounts,
    budget: int,
    continuation_marker: str | None = CONTINUATION_MARKER,
    min_frequency: int = 1,
    progress: bool = False,
) -> tuple[list[bytes], list[tuple[int, int, int]]]:
    """Learn up to `budget` tokens; returns the spellings by id (continuations carry the marker)
    and the merges (left, right, result) in the order applied."""
    check_options(continuation_marker=continuation_marker, min_frequency=min_frequency)
    marker = continuation_marker.encode("utf-8") if continuation_marker else None
    with progress_bar(progress, total=budget, desc="WordPiece tokens", unit="token", leave=False) as bar:
        vocab, merges = _core.train_wordpiece(
            counts.data, counts.offsets, counts.counts, budget, marker, min_frequency,
            progress=lambda learned: bar.update(learned - bar.n),
        )
    return list(vocab), [tuple(m) for m in merges]


def train_wordpiece(
    counts: PreTokenCounts,
    *,
    budget: int,
    special_tokens: Sequence[str] = (),
    continuation_marker: str | None = CONTINUATION_MARKER,
    min_frequency: int = 1,
    num_threads: int | None = None,
    progress: bool = True,
) -> "Tokenizer":
    """Train a WordPiece tokeniser (the `longest_match` segmenter) of at most `budget` learned
    tokens on counted pre-tokens, with a progress bar of learned tokens. Training is one
    sequential loop, so `num_threads` is accepted for the common trainer interface and has no
    effect."""
    special_tokens = list(special_tokens)
    if len(counts) == 0:
        raise CorpusError("the pre-token counts are empty: there is no text to train on")
    vocab, merges = learn_wordpiece(counts, budget, continuation_marker, min_frequency, progress)
    training = {
        "budget": budget,
        "continuation_marker": continuation_marker,
        "min_frequency": min_frequency,
        "learned_tokens": len(vocab) - base_size(continuation_marker),
        "merges": len(merges),
        "stopped_early": len(vocab) - base_size(continuation_marker) < budget,
        "unique_pre_tokens": len(counts),
        "pre_tokens": int(counts.counts.sum(dtype="uint64")),
    }

    return Tokenizer(
        vocab,
        segmenter="longest_match",
        pattern=counts.pattern,
        special_tokens={token: len(vocab) + i for i, token in enumerate(special_tokens)},
        algorithm="wordpiece",
        continuation_marker=continuation_marker,
        training=training,
    )
