"""The naive BPE trainer of the article in shared/seeds, generalised to bytes and weighted counts.

It recounts every pair of every word on every round, so it is slow and obviously right: the
Rust trainer must produce exactly its merges. Ties: the highest count, then the smallest
(left id, right id). Stops early when no pair occurs at least `min_frequency` times.
"""
from __future__ import annotations

from collections import Counter


def pair_counts(words: dict[tuple[int, ...], int]) -> Counter:
    """Every adjacent pair of tokens, weighted by the word's count."""
    counts: Counter = Counter()
    for pieces, count in words.items():
        for pair in zip(pieces, pieces[1:]):
            counts[pair] += count
    return counts


def merge(words: dict[tuple[int, ...], int], pair: tuple[int, int], token: int) -> dict[tuple[int, ...], int]:
    """Replace every occurrence of `pair`, left to right, with `token`."""
    left, right = pair
    updated: dict[tuple[int, ...], int] = {}
    for pieces, count in words.items():
        out, i = [], 0
        while i < len(pieces):
            if i < len(pieces) - 1 and pieces[i] == left and pieces[i + 1] == right:
                out.append(token)
                i += 2
            else:
                out.append(pieces[i])
                i += 1
        updated[tuple(out)] = updated.get(tuple(out), 0) + count
    return updated


def train(
    counts: dict[bytes, int], num_merges: int, min_frequency: int = 1
) -> tuple[list[bytes], list[tuple[int, int]], list[int]]:
    """(vocabulary, merges, the count each merge won with) for `num_merges` merges at most."""
    vocab = [bytes([b]) for b in range(256)]
    words = {tuple(word): count for word, count in counts.items() if count > 0}
    merges: list[tuple[int, int]] = []
    winning: list[int] = []
    for _ in range(num_merges):
        candidates = pair_counts(words)
        if not candidates:
            break
        pair = min(candidates, key=lambda p: (-candidates[p], p))
        if candidates[pair] < min_frequency:
            break
        token = len(vocab)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        merges.append(pair)
        winning.append(candidates[pair])
        words = merge(words, pair, token)
    return vocab, merges, winning
