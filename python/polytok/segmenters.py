"""Segmenters: how a pre-token is cut with a vocabulary. Each kind is a Rust encoder
(`polytok._core.Encoder`); this module builds the one a native Tokenizer names.

- merges (BPE): replay the merge list in order, or without one tiktoken's rule with rank = id;
- longest_match (WordPiece): greedy longest prefix, continuation tokens carrying the marker;
- viterbi (Unigram): the cut of largest total log-probability (`scores`);
- shortest_path (ConvexTok): fewest tokens, ties to the longest token from the left.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from polytok import _core

if TYPE_CHECKING:
    from polytok.tokenizer import Tokenizer

SpecialPairs = list[tuple[bytes, int]]

# Distinct pre-tokens each thread caches per encoder (pre-token bytes -> ids; an 8 MB table and a
# map of at most 8 MB):
# enough to answer most pieces of real text from the cache. Ids never depend on it.
DEFAULT_CACHE_SIZE = 1 << 19

# The algorithm a tokeniser was trained with, when the caller does not say.
DEFAULT_ALGORITHM = {"merges": "bpe", "longest_match": "wordpiece", "viterbi": "unigram", "shortest_path": "convex"}


def build_encoder(tokenizer: Tokenizer) -> Any:
    """The core encoder of `tokenizer`'s segmenter. ValueError when its data does not fit the
    segmenter, `_core.InvalidPattern` for a pattern the core cannot compile."""
    specials = [(text.encode("utf-8"), token_id) for text, token_id in tokenizer.special_tokens.items()]
    encoder = SEGMENTERS[tokenizer.segmenter](tokenizer, specials)
    encoder.set_cache_size(DEFAULT_CACHE_SIZE)
    return encoder


def merges_encoder(
    pattern: str | None, vocab: list[bytes], merges: list[tuple[int, int]] | None, specials: Iterable[tuple[bytes, int]] = ()
) -> Any:
    """BPE's encoder: replay `merges` (pairs of ids, in order), or without them use tiktoken's
    rule with rank = id. Loaded byte-level BPE files use it too."""
    triples = None if merges is None else merge_triples(vocab, merges)
    encoder = _core.Encoder.merges(pattern, vocab, triples, list(specials))
    encoder.set_cache_size(DEFAULT_CACHE_SIZE)
    return encoder


def _merges(tokenizer: Tokenizer, specials: SpecialPairs) -> Any:
    return merges_encoder(tokenizer.pattern, tokenizer.vocab, tokenizer.merges, specials)


def _longest_match(tokenizer: Tokenizer, specials: SpecialPairs) -> Any:
    marker = tokenizer.continuation_marker.encode("utf-8") if tokenizer.continuation_marker else None
    return _core.Encoder.longest_match(tokenizer.pattern, tokenizer.vocab, marker, specials)


def _viterbi(tokenizer: Tokenizer, specials: SpecialPairs) -> Any:
    if tokenizer.scores is None or len(tokenizer.scores) != len(tokenizer.vocab):
        raise ValueError("a viterbi tokeniser needs one score per token")
    return _core.Encoder.viterbi(tokenizer.pattern, tokenizer.vocab, tokenizer.scores, specials)


def _shortest_path(tokenizer: Tokenizer, specials: SpecialPairs) -> Any:
    return _core.Encoder.shortest_path(tokenizer.pattern, tokenizer.vocab, specials)


SEGMENTERS: dict[str, Callable[[Tokenizer, SpecialPairs], Any]] = {
    "merges": _merges,
    "longest_match": _longest_match,
    "viterbi": _viterbi,
    "shortest_path": _shortest_path,
}

# The segmenters whose vocabulary may have empty entries: ids no ordinary token has (a gap, or a
# special token's id), which extending a vocabulary past its special ids leaves (trainers/extend.py).
SEGMENTERS_WITH_UNUSED_IDS = frozenset({"merges", "shortest_path", "viterbi"})


def merge_triples(vocab: list[bytes], merges: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(left, right, merged id) per merge. polytok's layout (256 bytes, then merge k is id 256+k)
    is used when it fits; otherwise each merge yields the one token with its bytes."""
    standard = len(vocab) == 256 + len(merges) and all(vocab[i] == bytes([i]) for i in range(256))
    if standard:
        triples = [(left, right, 256 + k) for k, (left, right) in enumerate(merges)]
        for left, right, merged in triples:
            if vocab[merged] != vocab[left] + vocab[right]:
                raise ValueError(
                    f"merge {merged - 256} ({left}, {right}) joins {vocab[left] + vocab[right]!r} "
                    f"but token {merged} is {vocab[merged]!r}"
                )
        return triples
    ids: dict[bytes, list[int]] = {}
    for token_id, token in enumerate(vocab):
        ids.setdefault(token, []).append(token_id)
    triples = []
    for index, (left, right) in enumerate(merges):
        joined = vocab[left] + vocab[right]
        found = ids.get(joined, [])
        if len(found) != 1:
            problem = "is no token" if not found else f"is several tokens {found}"
            raise ValueError(f"merge {index} ({left}, {right}) joins {joined!r}, which {problem}")
        triples.append((left, right, found[0]))
    return triples
