"""The shortest-path segmenter: fewest tokens, the documented tie-break, any bytes."""
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polytok import _core
from polytok.counts import PreTokenCounts

BYTES = [bytes([b]) for b in range(256)]


def brute_force(piece: bytes, tokens: set[bytes]) -> tuple[int, tuple[int, ...]]:
    """(fewest tokens, lexicographically greatest length sequence among fewest) by recursion."""

    @functools.lru_cache(maxsize=None)
    def best(i: int) -> tuple[int, tuple[int, ...]]:
        if i == len(piece):
            return 0, ()
        options = []
        for j in range(i + 1, len(piece) + 1):
            if piece[i:j] in tokens:
                count, lengths = best(j)
                options.append((count + 1, (j - i,) + lengths))
        fewest = min(count for count, _ in options)
        return fewest, max(lengths for count, lengths in options if count == fewest)

    return best(0)


small_text = st.binary(min_size=0, max_size=14).map(lambda b: bytes(98 + x % 3 for x in b))
small_vocab = st.lists(st.binary(min_size=2, max_size=5).map(lambda b: bytes(98 + x % 3 for x in b)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(small_text, small_vocab)
def test_fewest_tokens_and_tie_break_match_brute_force(piece, extra):
    vocab = BYTES + extra
    segmenter = _core.ShortestPathSegmenter(vocab)
    ids = segmenter.segment(piece)
    assert b"".join(vocab[i] for i in ids) == piece
    fewest, lengths = brute_force(piece, set(vocab))
    assert len(ids) == fewest
    assert tuple(len(vocab[i]) for i in ids) == lengths


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.lists(st.binary(min_size=1, max_size=8), max_size=40))
def test_any_bytes_round_trip(piece, extra):
    vocab = BYTES + extra
    ids = _core.ShortestPathSegmenter(vocab).segment(piece)
    assert b"".join(vocab[i] for i in ids) == piece


def test_duplicate_token_takes_the_lower_id():
    vocab = BYTES + [b"ab", b"ab"]
    assert _core.ShortestPathSegmenter(vocab).segment(b"ab") == [256]


def test_vocabulary_must_hold_every_byte():
    with pytest.raises(ValueError, match="0x07"):
        _core.ShortestPathSegmenter([t for t in BYTES if t != b"\x07"] + [b"ab"])
    # an empty entry is an id no token has: never cut into
    assert _core.ShortestPathSegmenter(BYTES + [b"", b"ab"]).segment(b"abab") == [257, 257]


def test_count_pre_tokens_is_the_weighted_sum():
    vocab = BYTES + [b"he", b"hell", b"llo", b" wor", b"ld"]
    counts = PreTokenCounts.from_dict({b"hello": 3, b" world": 2, b"\xff\xfe": 5, b"x": 1})
    segmenter = _core.ShortestPathSegmenter(vocab)
    expected = sum(len(segmenter.segment(w)) * c for w, c in counts)
    assert segmenter.count_pre_tokens(counts.data, counts.offsets, counts.counts) == expected == 2 * 3 + 2 * 2 + 10 + 1
    with pytest.raises(ValueError):
        segmenter.count_pre_tokens(counts.data, counts.offsets[:-1], counts.counts)
