"""`polytok.train`: one entry point for every training algorithm, and the one `budget` rule.

`train` turns `vocab_size` into the budget K once (`budget`) and calls the algorithm's trainer on
the counted corpus (PreTokenCounts) as
`trainer(counts, budget=K, special_tokens=[...], num_threads=..., progress=..., **options)`,
which returns a `Tokenizer`; adding an algorithm is adding one entry to TRAINERS and one to
OPTION_CHECKS (and to `base_size` if its vocabularies start with more than the 256 bytes).
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from polytok import checks
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.pretokenize import resolve_pattern
from polytok.trainers import bpe, convex, unigram, wordpiece
from polytok.trainers.bpe import train_bpe
from polytok.trainers.convex import train_convex
from polytok.trainers.unigram import train_unigram
from polytok.trainers.wordpiece import train_wordpiece

if TYPE_CHECKING:
    from polytok.tokenizer import Tokenizer

TRAINERS: dict[str, Callable[..., "Tokenizer"]] = {
    "bpe": train_bpe,
    "convex": train_convex,
    "unigram": train_unigram,
    "wordpiece": train_wordpiece,
}

# Each algorithm's check of its option values: run before a corpus is counted, so that a bad
# option fails at once (and before any progress bar), not after minutes of counting.
OPTION_CHECKS: dict[str, Callable[..., None]] = {
    "bpe": bpe.check_options,
    "convex": convex.check_options,
    "unigram": unigram.check_options,
    "wordpiece": wordpiece.check_options,
}

# Options that say how to read a corpus; they go to `polytok.count`, not to the trainer.
CORPUS_OPTIONS = ("text_field", "text_column", "errors")

# Trainer arguments that `train` fills in itself, never from **options.
_GIVEN = ("counts", "budget", "special_tokens")

_UNSET: Any = object()


def train(
    corpus_or_counts: PreTokenCounts | str | Iterable[str | bytes],
    algorithm: str = "bpe",
    *,
    vocab_size: int | Sequence[int],
    pattern: str | None = _UNSET,
    special_tokens: Sequence[str] = (),
    num_threads: int | None = None,
    progress: bool = True,
    **options: Any,
) -> "Tokenizer | list[Tokenizer]":
    """Train a tokeniser of `vocab_size` tokens with `algorithm` on a corpus (anything
    `polytok.count` reads; `pattern` defaults to cl100k) or on PreTokenCounts (their pattern is
    used). With algorithm="convex", a list of sizes trains one tokeniser per size in one run."""
    trainer = TRAINERS.get(algorithm)
    if trainer is None:
        raise ConfigError(f"unknown algorithm {algorithm!r}; known: {', '.join(sorted(TRAINERS))}")
    special_tokens = checks.special_tokens(special_tokens)
    if isinstance(vocab_size, (list, tuple)):
        # One run for several sizes: only ConvexTok shares its solve between them.
        if algorithm != "convex" or not vocab_size:
            raise ConfigError(f"a list of vocab sizes needs algorithm='convex' and at least one size, got "
                              f"{algorithm!r} and {list(vocab_size)!r}")
        learned: int | list[int] = [budget(size, special_tokens, base_size(algorithm, options)) for size in vocab_size]
    else:
        learned = budget(vocab_size, special_tokens, base_size(algorithm, options))
    corpus_options = {name: options.pop(name) for name in CORPUS_OPTIONS if name in options}
    accepted = inspect.signature(trainer).parameters
    unknown = sorted(name for name in options if name not in accepted or name in _GIVEN)
    if unknown:
        known = sorted(name for name in accepted if name not in _GIVEN)
        raise ConfigError(f"unknown option(s) {unknown} for algorithm {algorithm!r}; it takes {known}")
    OPTION_CHECKS[algorithm](num_threads=num_threads, **options)

    if isinstance(corpus_or_counts, PreTokenCounts):
        counts = corpus_or_counts
        if corpus_options:
            raise ConfigError(f"{sorted(corpus_options)} only apply when reading a corpus, not PreTokenCounts")
        if pattern is not _UNSET and resolve_pattern(pattern) != resolve_pattern(counts.pattern):
            raise ConfigError(
                f"pattern {pattern!r} differs from the pattern the PreTokenCounts were counted with "
                f"({counts.pattern!r}); recount the corpus or leave pattern unset"
            )
    else:
        counts = count(
            corpus_or_counts,
            pattern=checks.DEFAULT_PATTERN if pattern is _UNSET else pattern,
            special_tokens=special_tokens,
            num_threads=num_threads,
            progress=progress,
            **corpus_options,
        )
    return trainer(
        counts,
        budget=learned,
        special_tokens=special_tokens,
        num_threads=num_threads,
        progress=progress,
        **options,
    )


def budget(vocab_size: int, special_tokens: Sequence[str], base: int) -> int:
    """The budget K: how many tokens a trainer may learn when a vocabulary of `vocab_size` ids
    holds `base` tokens before learning (the 256 bytes; see `base_size`) and the special tokens.
    `vocab_size = base + len(special_tokens) + K`."""
    minimum = base + len(special_tokens)
    if not checks.is_integer(vocab_size) or vocab_size < minimum:
        raise ConfigError(
            f"vocab_size must be an integer of at least {minimum} ({base} byte tokens + "
            f"{len(special_tokens)} special tokens), got {vocab_size!r}"
        )
    return int(vocab_size) - minimum


def base_size(algorithm: str, options: dict[str, Any]) -> int:
    """Tokens every vocabulary of `algorithm` with `options` holds before learning: the 256
    bytes, and for WordPiece with a continuation marker the 256 bytes again as continuations."""
    if algorithm == "wordpiece":
        marker = options.get("continuation_marker", wordpiece.CONTINUATION_MARKER)
        return wordpiece.base_size(marker)
    return 256
