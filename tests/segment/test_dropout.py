"""BPE-dropout through `Tokenizer.encode(dropout=p)`: p=0 is plain BPE, p=1 leaves the single
bytes, any p decodes back, seeds repeat whatever the thread count, and only merges tokenisers
accept it."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from polytok.errors import ConfigError
from polytok.tokenizer import Tokenizer

# A small merge list over 'a', 'b', 'c': ids 256.. in order.
A, B, C = ord("a"), ord("b"), ord("c")
MERGES = [(A, B), (256, C), (B, C), (A, A), (259, 257), (C, C)]
VOCAB = [bytes([b]) for b in range(256)]
for left, right in MERGES:
    VOCAB.append(VOCAB[left] + VOCAB[right])
SEEDS = st.integers(0, 2**64 - 1)


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


def naive_rank_bpe(vocab: list[bytes], piece: bytes) -> list[int]:
    """tiktoken's rule: join the adjacent pair whose bytes form the lowest-id token, leftmost."""
    ids = {token: i for i, token in enumerate(vocab)}
    parts = [bytes([b]) for b in piece]
    while True:
        found = [(ids[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in ids]
        if not found:
            return [ids[p] for p in parts]
        _, i = min(found)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


# One pre-token each (pattern None): the merge rules act on exactly these bytes.
WITH_MERGES = Tokenizer(VOCAB, segmenter="merges", pattern=None, merges=MERGES)
WITH_RANKS = Tokenizer(VOCAB, segmenter="merges", pattern=None)
# tiktoken-style ranks whose single bytes are not ids 0..255 (as in cl100k): byte b is id 255 - b.
SHUFFLED = [bytes([255 - b]) for b in range(256)] + VOCAB[256:]
WITH_SHUFFLED_RANKS = Tokenizer(SHUFFLED, segmenter="merges", pattern=None)
pieces = st.binary(min_size=1, max_size=14).map(lambda b: bytes(b"abcx"[x % 4] for x in b))


@settings(max_examples=150, deadline=None)
@given(pieces, SEEDS)
def test_zero_dropout_is_plain_bpe(piece, seed):
    # p = 0 is the plain encoder; a p so small that no merge ever drops runs the dropout loop.
    for p in (0.0, 1e-12):
        assert WITH_MERGES.encode(piece, dropout=p, seed=seed) == naive_bpe(piece)
        assert WITH_RANKS.encode(piece, dropout=p, seed=seed) == naive_rank_bpe(VOCAB, piece)
        assert WITH_SHUFFLED_RANKS.encode(piece, dropout=p, seed=seed) == naive_rank_bpe(SHUFFLED, piece)


@settings(max_examples=150, deadline=None)
@given(pieces, st.floats(0.0, 1.0), SEEDS)
def test_any_dropout_decodes_back_and_repeats_with_its_seed(piece, p, seed):
    for tokenizer in (WITH_MERGES, WITH_RANKS, WITH_SHUFFLED_RANKS):
        ids = tokenizer.encode(piece, dropout=p, seed=seed)
        assert tokenizer.decode_bytes(ids) == piece
        assert tokenizer.encode(piece, dropout=p, seed=seed) == ids


def test_full_dropout_leaves_bytes_and_half_dropout_varies():
    assert WITH_MERGES.encode(b"aabcabc", dropout=1.0, seed=3) == list(b"aabcabc")
    assert WITH_SHUFFLED_RANKS.encode(b"aabcabc", dropout=1.0, seed=3) == [255 - b for b in b"aabcabc"]
    cuts = Counter(tuple(ids) for ids in WITH_MERGES.encode_batch([b"abcabc"] * 400, dropout=0.5, seed=1))
    assert len(cuts) >= 5
    # Dropout only removes merges: the plain BPE cut stays the most frequent outcome at a small p.
    light = Counter(tuple(ids) for ids in WITH_MERGES.encode_batch([b"abcabc"] * 400, dropout=0.1, seed=2))
    assert light.most_common(1)[0][0] == tuple(naive_bpe(b"abcabc"))


TEXT = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["<|endoftext|>", "<|im_start|>"])), max_size=4).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, p=st.floats(0.0, 1.0), seed=SEEDS)
def test_trained_tokenizers_with_dropout_decode_back(trained_tokenizers, text, p, seed):
    for name in ("polytok-cl100k", "hf-o200k"):
        tokenizer = trained_tokenizers[name]
        plain = tokenizer.encode(text, allowed_special="all")
        assert tokenizer.encode(text, allowed_special="all", dropout=0.0, seed=seed) == plain
        ids = tokenizer.encode(text, allowed_special="all", dropout=p, seed=seed)
        assert tokenizer.decode(ids) == text
        # Special tokens stay whole; at p = 1 everything else is single bytes.
        assert [i for i in ids if i >= len(tokenizer.vocab)] == [i for i in plain if i >= len(tokenizer.vocab)]
        at_one = tokenizer.encode(text, allowed_special="all", dropout=1.0, seed=seed)
        assert all(len(tokenizer.token_bytes(i)) == 1 or i >= len(tokenizer.vocab) for i in at_one)


def test_batch_is_independent_of_thread_count(trained_tokenizers, text_excerpts):
    tokenizer = trained_tokenizers["polytok-cl100k"]
    texts = [text[:3000] for text in text_excerpts.values()] * 3
    one = tokenizer.encode_batch(texts, num_threads=1, dropout=0.2, seed=9)
    two = tokenizer.encode_batch(texts, num_threads=2, dropout=0.2, seed=9)
    assert one == two
    assert one[0] == tokenizer.encode(texts[0], dropout=0.2, seed=9)
    # Repeated texts are different documents with their own draws.
    assert one[0] != one[len(text_excerpts)]
    assert all(tokenizer.decode(ids) == text for ids, text in zip(one, texts))


def test_unsupported_and_invalid_options_raise():
    with pytest.raises(ConfigError, match="sample=True needs segmenter 'viterbi'.*supports dropout=p"):
        WITH_MERGES.encode("abc", sample=True)
    with pytest.raises(ConfigError, match="encode_nbest needs .*'viterbi'.*supports dropout=p"):
        WITH_MERGES.encode_nbest("abc", 2)
    with pytest.raises(ConfigError, match="not both"):
        WITH_MERGES.encode("abc", sample=True, dropout=0.1)
    for p in (-0.1, 1.5, float("nan"), "0.1"):
        with pytest.raises(ConfigError, match="dropout"):
            WITH_MERGES.encode("abc", dropout=p)
    for seed in (-1, 2**64, 1.5):
        with pytest.raises(ConfigError, match="seed"):
            WITH_MERGES.encode("abc", dropout=0.1, seed=seed)
    wordpiece = Tokenizer(
        [bytes([b]) for b in range(256)], segmenter="longest_match", pattern=None, continuation_marker=None
    )
    with pytest.raises(ConfigError, match="dropout=p needs segmenter 'merges'.*no subword regularisation"):
        wordpiece.encode("abc", dropout=0.1)
