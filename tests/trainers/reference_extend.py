"""The naive BPE continuation: what `polytok.extend(algorithm="bpe")` must produce, merge for merge.

Each round cuts every pre-token afresh, from its bytes, with the whole current vocabulary and the
base's rule (tiktoken's ranks, or the merge list replayed), counts every adjacent pair weighted by
the pre-token's count, and merges the most frequent pair whose bytes are no token yet (ties: the
highest count, then the smallest (left id, right id)). It is slow and obviously right.
"""
from __future__ import annotations

from collections import Counter


def by_ranks(piece: bytes, rank: dict[bytes, int]) -> list[int]:
    """tiktoken's rule: join the adjacent pair whose bytes are the lowest-ranked token, leftmost first."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while True:
        best = None
        for i in range(len(parts) - 1):
            joined = rank.get(parts[i] + parts[i + 1])
            if joined is not None and (best is None or joined < best[0]):
                best = (joined, i)
        if best is None:
            return [rank[part] for part in parts]
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def by_merges(piece: bytes, byte_ids: dict[int, int], merges: list[tuple[int, int]], merged: list[int]) -> list[int]:
    """The merge list replayed: join the adjacent pair with the lowest merge rank, leftmost first."""
    rank = {pair: (index, merged[index]) for index, pair in enumerate(merges)}
    ids = [byte_ids[byte] for byte in piece]
    while True:
        best = None
        for i in range(len(ids) - 1):
            found = rank.get((ids[i], ids[i + 1]))
            if found is not None and (best is None or found[0] < best[0][0]):
                best = (found, i)
        if best is None:
            return ids
        (_, token), i = best
        ids[i : i + 2] = [token]


def extend(vocab: list[bytes], merges: list[tuple[int, int]] | None, counts: dict[bytes, int], first_id: int,
           new_tokens: int, min_frequency: int = 1) -> list[tuple[int, int]]:
    """The new merges (pairs of ids) of a base `vocab` (empty entries: unused ids) with `merges`
    (None: tiktoken's rule with rank = id); new token k gets id first_id + k."""
    vocab = list(vocab) + [b""] * (first_id - len(vocab))
    ids = {token: token_id for token_id, token in enumerate(vocab) if token}
    byte_ids = {byte: ids[bytes([byte])] for byte in range(256)}
    merges = None if merges is None else list(merges)
    merged = None if merges is None else [ids[vocab[left] + vocab[right]] for left, right in merges]
    learned: list[tuple[int, int]] = []
    for _ in range(new_tokens):
        pairs: Counter = Counter()
        for piece, count in counts.items():
            cut = by_ranks(piece, ids) if merges is None else by_merges(piece, byte_ids, merges, merged)
            for pair in zip(cut, cut[1:]):
                if vocab[pair[0]] + vocab[pair[1]] not in ids:
                    pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        if pairs[best] < min_frequency:
            break
        token_id = len(vocab)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        ids[vocab[-1]] = token_id
        if merges is not None:
            merges.append(best)
            merged.append(token_id)
        learned.append(best)
    return learned
