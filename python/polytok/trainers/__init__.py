"""`polytok.train`: one entry point for every training algorithm.

Every trainer takes the same counted corpus (WordCounts) and is called as
`trainer(counts, vocab_size=..., special_tokens=[...], num_threads=..., progress=..., **options)`,
returning a `Tokenizer`; adding an algorithm is adding one entry to TRAINERS.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from polytok.counts import WordCounts
from polytok.errors import ConfigError
from polytok.pretokenize import resolve_pattern
from polytok.trainers.bpe import check_special_tokens, merge_budget, train_bpe
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

# Options that say how to read a corpus; they go to `polytok.count`, not to the trainer.
CORPUS_OPTIONS = ("text_field", "text_column", "errors")

_DEFAULT_PATTERN = "cl100k"
_UNSET: Any = object()


def train(
    corpus_or_counts: WordCounts | str | Iterable[str | bytes],
    algorithm: str = "bpe",
    *,
    vocab_size: int,
    pattern: str | None = _UNSET,
    special_tokens: Sequence[str] = (),
    num_threads: int | None = None,
    progress: bool = True,
    **options: Any,
) -> "Tokenizer":
    """Train a tokeniser of `vocab_size` tokens with `algorithm` on a corpus (anything
    `polytok.count` reads; `pattern` defaults to cl100k) or on WordCounts (their pattern is used)."""
    trainer = TRAINERS.get(algorithm)
    if trainer is None:
        raise ConfigError(f"unknown algorithm {algorithm!r}; known: {', '.join(sorted(TRAINERS))}")
    special_tokens = check_special_tokens(special_tokens)
    merge_budget(vocab_size, special_tokens)
    corpus_options = {name: options.pop(name) for name in CORPUS_OPTIONS if name in options}
    accepted = inspect.signature(trainer).parameters
    unknown = sorted(name for name in options if name not in accepted)
    if unknown:
        known = sorted(name for name in accepted if name not in ("counts", "vocab_size", "special_tokens"))
        raise ConfigError(f"unknown option(s) {unknown} for algorithm {algorithm!r}; it takes {known}")

    if isinstance(corpus_or_counts, WordCounts):
        counts = corpus_or_counts
        if corpus_options:
            raise ConfigError(f"{sorted(corpus_options)} only apply when reading a corpus, not WordCounts")
        if pattern is not _UNSET and resolve_pattern(pattern) != resolve_pattern(counts.pattern):
            raise ConfigError(
                f"pattern {pattern!r} differs from the pattern the WordCounts were counted with "
                f"({counts.pattern!r}); recount the corpus or leave pattern unset"
            )
    else:
        from polytok import count

        counts = count(
            corpus_or_counts,
            pattern=_DEFAULT_PATTERN if pattern is _UNSET else pattern,
            special_tokens=special_tokens,
            num_threads=num_threads,
            progress=progress,
            **corpus_options,
        )
    return trainer(
        counts,
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        num_threads=num_threads,
        progress=progress,
        **options,
    )
