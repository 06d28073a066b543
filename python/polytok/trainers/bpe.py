"""Byte-level BPE training: the article's algorithm (merge the most frequent adjacent pair, repeat)
on counted pre-tokens, run by the Rust core with incremental counts and a priority queue.

Ties go to the highest count, then to the smallest (left id, right id). Token ids: 0..255 are the
bytes, merge k makes token 256 + k (always new bytes: see src/train/bpe.rs), special tokens come last.
Training stops early, with a smaller vocabulary, when no pair occurs `min_frequency` times.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from polytok import _core, checks
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.progress import progress_bar
from polytok.tokenizer import Tokenizer

# How many merges between two progress reports: often enough for a smooth bar, rarely enough
# that taking the GIL back costs nothing measurable.
PROGRESS_EVERY = 256


def learn_merges(
    counts: PreTokenCounts,
    num_merges: int,
    *,
    min_frequency: int = 1,
    num_threads: int | None = None,
    progress: bool = True,
) -> tuple[list[bytes], list[tuple[int, int]], list[int]]:
    """Learn at most `num_merges` merges; returns (vocabulary without special tokens, merges,
    the pair count each merge was chosen with)."""
    check_options(min_frequency=min_frequency, num_threads=num_threads)
    merges, merge_counts = run_merge_loop(
        partial(_core.train_bpe, counts.data, counts.offsets, counts.counts, num_merges),
        num_merges, min_frequency, num_threads, progress, "invalid PreTokenCounts arrays",
    )
    vocab = [bytes([b]) for b in range(256)]
    for left, right in merges:
        vocab.append(vocab[left] + vocab[right])
    return vocab, merges, merge_counts


def run_merge_loop(core_loop: Callable[..., Any], num_merges: int, min_frequency: int, num_threads: int | None,
                   progress: bool, failure: str) -> tuple[list[tuple[int, int]], list[int]]:
    """Runs a core merge loop (`_core.train_bpe` or `_core.extend_bpe` with its data bound)
    under a progress bar; its merges and the count each was chosen with. The core's ValueError
    becomes a ConfigError that starts with `failure`."""
    with progress_bar(progress, total=num_merges, desc="BPE merges", unit="merge", leave=False) as bar:
        try:
            merge_array, merge_counts = core_loop(
                min_frequency=int(min_frequency),
                num_threads=None if num_threads is None else int(num_threads),
                progress=(lambda done: bar.update(done - bar.n)) if progress else None,
                progress_every=PROGRESS_EVERY,
            )
        except ValueError as error:
            raise ConfigError(f"{failure}: {error}") from None
    merges = [(int(left), int(right)) for left, right in merge_array.tolist()]
    return merges, [int(count) for count in merge_counts.tolist()]


def train_bpe(
    counts: PreTokenCounts,
    *,
    budget: int,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 1,
    num_threads: int | None = None,
    progress: bool = True,
) -> "Tokenizer":
    """Train a byte-level BPE tokeniser of at most `budget` merges (the 256 bytes, the merges,
    then the special tokens) on counted pre-tokens; the tokeniser keeps the pattern the counts
    were made with."""
    special_tokens = list(special_tokens)
    if len(counts) == 0:
        raise CorpusError("the pre-token counts are empty: there is no text to train on")
    vocab, merges, merge_counts = learn_merges(
        counts, budget, min_frequency=min_frequency, num_threads=num_threads, progress=progress
    )
    training = {
        "budget": int(budget),
        "min_frequency": min_frequency,
        "merges": len(merges),
        "stopped_early": len(merges) < budget,
        "last_merge_count": merge_counts[-1] if merge_counts else None,
        "unique_pre_tokens": len(counts),
        "pre_tokens": int(counts.counts.sum(dtype="uint64")),
    }
    return build_tokenizer(vocab, merges, counts.pattern, special_tokens, training)


def check_options(*, min_frequency: int = 1, num_threads: int | None = None, **_: Any) -> None:
    """Refuses option values BPE training cannot use (`train` checks them before counting)."""
    checks.integer("min_frequency", min_frequency)
    checks.num_threads(num_threads)


def build_tokenizer(
    vocab: list[bytes],
    merges: list[tuple[int, int]],
    pattern: str | None,
    special_tokens: list[str],
    training: dict,
) -> "Tokenizer":
    """Wrap learned tokens into a `merges` tokeniser; special ids follow the learned tokens."""
    return Tokenizer(
        vocab,
        segmenter="merges",
        pattern=pattern,
        special_tokens={token: len(vocab) + i for i, token in enumerate(special_tokens)},
        merges=merges,
        algorithm="bpe",
        training=training,
    )
