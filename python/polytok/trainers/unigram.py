"""Unigram training (Kudo, 2018) as SentencePiece does it, on counted pre-tokens.

Start from a large seed vocabulary of frequent substrings, fit token probabilities by EM
(forward-backward on each pre-token's lattice, SentencePiece's Bayesian M-step), and prune the
pieces whose removal costs least likelihood, by `shrinking_factor` per round, until the target
size is reached. The 256 bytes always stay. Encoding is the `viterbi` segmenter, which also
samples segmentations (subword regularisation) and lists the n best.

For a budget of K pieces, learned pieces take ids 256.. by decreasing score, special tokens follow.
"""
from __future__ import annotations

from typing import Any, Sequence


from polytok import _core, checks
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.progress import progress_bar
from polytok.tokenizer import Tokenizer


def check_options(
    *,
    seed_size: int = 1_000_000,
    max_piece_bytes: int = 16,
    shrinking_factor: float = 0.75,
    sub_iterations: int = 2,
    num_threads: int | None = None,
    **_: Any,
) -> None:
    """Refuses option values Unigram training cannot use (`train` checks them before counting)."""
    checks.integer("seed_size", seed_size, 0)
    checks.integer("max_piece_bytes", max_piece_bytes)
    checks.integer("sub_iterations", sub_iterations)
    if not 0.0 < shrinking_factor < 1.0:
        raise ConfigError(f"shrinking_factor must be in (0, 1), got {shrinking_factor!r}")
    checks.num_threads(num_threads)


def learn_unigram(
    counts: PreTokenCounts,
    budget: int,
    *,
    seed_size: int = 1_000_000,
    max_piece_bytes: int = 16,
    shrinking_factor: float = 0.75,
    sub_iterations: int = 2,
    num_threads: int | None = None,
    progress: bool = False,
    base: tuple[list[bytes], list[float]] | None = None,
) -> tuple[list[bytes], list[float], list[tuple[int, float]]]:
    """The pieces (bytes first) with their log-probability scores, and per EM round the number
    of pieces alive after it and the corpus log-likelihood before it. With `base` (pieces, the
    256 bytes first, and their scores) the result is those pieces, unchanged, and at most
    `budget` new ones (trainers/extend_unigram.py)."""
    check_options(seed_size=seed_size, max_piece_bytes=max_piece_bytes, shrinking_factor=shrinking_factor,
                  sub_iterations=sub_iterations, num_threads=num_threads)
    # The number of EM rounds is not known in advance: the bar counts rounds and shows how many
    # pieces are still alive on the way down to the target.
    with progress_bar(progress, desc="Unigram EM", unit="round", leave=False) as bar:
        def report(alive: int) -> None:
            bar.set_postfix(pieces=alive, target=(256 if base is None else len(base[0])) + budget, refresh=False)
            bar.update()

        vocab, scores, history = _core.train_unigram(
            counts.data, counts.offsets, counts.counts, budget,
            seed_size=seed_size, max_piece_bytes=max_piece_bytes, shrinking_factor=shrinking_factor,
            sub_iterations=sub_iterations, num_threads=num_threads, progress=report, base=base,
        )
    return list(vocab), list(scores), [tuple(r) for r in history]


def train_unigram(
    counts: PreTokenCounts,
    *,
    budget: int,
    special_tokens: Sequence[str] = (),
    seed_size: int = 1_000_000,
    max_piece_bytes: int = 16,
    shrinking_factor: float = 0.75,
    sub_iterations: int = 2,
    num_threads: int | None = None,
    progress: bool = True,
) -> "Tokenizer":
    """Train a Unigram tokeniser (the `viterbi` segmenter) of at most `budget` pieces beyond the
    256 bytes, with SentencePiece's defaults; `progress` shows a bar of EM rounds."""
    special_tokens = list(special_tokens)
    if len(counts) == 0:
        raise CorpusError("the pre-token counts are empty: there is no text to train on")
    vocab, scores, history = learn_unigram(
        counts, budget, seed_size=seed_size, max_piece_bytes=max_piece_bytes,
        shrinking_factor=shrinking_factor, sub_iterations=sub_iterations, num_threads=num_threads,
        progress=progress,
    )
    training = {
        "budget": budget,
        "seed_size": seed_size,
        "max_piece_bytes": max_piece_bytes,
        "shrinking_factor": shrinking_factor,
        "sub_iterations": sub_iterations,
        "learned_tokens": len(vocab) - 256,
        "stopped_early": len(vocab) - 256 < budget,
        "em_rounds": [{"pieces": pieces, "log_likelihood": ll} for pieces, ll in history],
        "unique_pre_tokens": len(counts),
        "pre_tokens": int(counts.counts.sum(dtype="uint64")),
    }

    return Tokenizer(
        vocab,
        segmenter="viterbi",
        pattern=counts.pattern,
        special_tokens={token: len(vocab) + i for i, token in enumerate(special_tokens)},
        scores=scores,
        algorithm="unigram",
        training=training,
    )
