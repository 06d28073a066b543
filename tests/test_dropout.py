"""BPE-dropout: p=0 replays the merges exactly, p=1 leaves bytes, any p decodes back, seeds repeat."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

from polytok import _core

# A small merge list over 'a', 'b', 'c': ids 256.. in order.
A, B, C = ord("a"), ord("b"), ord("c")
MERGES = [(A, B), (256, C), (B, C), (A, A), (259, 257), (C, C)]
VOCAB = [bytes([b]) for b in range(256)]
for left, right in MERGES:
    VOCAB.append(VOCAB[left] + VOCAB[right])


def naive_bpe(piece: bytes) -> list[int]:
    """Apply the lowest-rank adjacent merge (leftmost occurrence) until none applies."""
    ranks = {pair: rank for rank, pair in enumerate(MERGES)}
    symbols = list(piece)
    while True:
        found = [(ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in ranks]
        if not found:
            return symbols
        rank, i = min(found)
        symbols[i : i + 2] = [256 + rank]


def naive_rank_bpe(piece: bytes) -> list[int]:
    """tiktoken's rule: join the adjacent pair whose bytes form the lowest-id token, leftmost."""
    ids = {token: i for i, token in enumerate(VOCAB)}
    parts = [bytes([b]) for b in piece]
    while True:
        found = [(ids[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in ids]
        if not found:
            return [ids[p] for p in parts]
        _, i = min(found)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


pieces = st.lists(st.binary(min_size=1, max_size=12).map(lambda b: bytes(b"abcx"[x % 4] for x in b)), max_size=5)


@settings(max_examples=200, deadline=None)
@given(pieces, st.integers(0, 2**64 - 1))
def test_zero_dropout_is_plain_bpe(words, seed):
    model = _core.DropoutMerges(MERGES)
    assert model.segment(words, 0.0, seed) == [i for w in words for i in naive_bpe(w)]


@settings(max_examples=200, deadline=None)
@given(pieces, st.integers(0, 2**64 - 1))
def test_zero_dropout_with_ranks_is_tiktoken_bpe(words, seed):
    model = _core.DropoutMerges.from_ranks(VOCAB)
    assert model.segment(words, 0.0, seed) == [i for w in words for i in naive_rank_bpe(w)]
    ids = model.segment(words, 0.3, seed)
    assert b"".join(VOCAB[i] for i in ids) == b"".join(words)


@settings(max_examples=200, deadline=None)
@given(pieces, st.floats(0.0, 1.0), st.integers(0, 2**64 - 1))
def test_any_dropout_decodes_back_and_repeats_with_its_seed(words, p, seed):
    model = _core.DropoutMerges(MERGES)
    ids = model.segment(words, p, seed)
    assert b"".join(VOCAB[i] for i in ids) == b"".join(words)
    assert model.segment(words, p, seed) == ids


def test_full_dropout_leaves_bytes_and_half_dropout_varies():
    model = _core.DropoutMerges(MERGES)
    assert model.segment([b"aabcabc"], 1.0, 3) == list(b"aabcabc")
    cuts = Counter(tuple(model.segment([b"abcabc"], 0.5, seed)) for seed in range(400))
    assert len(cuts) >= 5
    # Dropout only removes merges: the plain BPE cut stays the most frequent single outcome
    # at a small p.
    light = Counter(tuple(model.segment([b"abcabc"], 0.1, seed)) for seed in range(400))
    assert light.most_common(1)[0][0] == tuple(naive_bpe(b"abcabc"))
