"""Token healing. A prompt that ends inside what is usually one token ("El niño juega en el "
ends in a lone space token, " jum" in the start of " jumped") puts the model where training
never put it. Healing removes the prompt's unstable last tokens and lets generation restart
them: the next token must start with the removed bytes (or, when they are longer than any
token, be a prefix of them and leave the rest to the tokens after it).

`heal(ids)` backs up to the last boundary that text appended to the prompt cannot move: the
start of a pre-token such that appending any text leaves every pre-token before it as it is
(then the segmenter cuts them as before, so `encode(prompt + continuation)` starts with the
healed prefix). Which pre-tokens appending can change is decided by pre-tokenising the end of
the prompt with short probe continuations of every character class the pre-tokenisation
patterns tell apart (letters of each case, digits, spaces, line ends, punctuation, marks, CJK).
Without a pattern (one pre-token per text) and for loaded tokenisers, whose pipelines have no
such boundaries, it backs up while the removed bytes with the token before them still start
some token (llama.cpp's dynamic rule). It never backs up past a special token.

`tokens_starting_with(bytes)` is a binary search in the tokens sorted by their bytes.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from polytok.errors import EncodeError
from polytok.pretokenize import PreTokenizer
from polytok.token_index import as_id_array, token_index

if TYPE_CHECKING:
    from polytok.tokenizer import BaseTokenizer

# Continuations that exercise each alternative of the preset patterns: contractions ('s 'll
# 've 're), runs of letters of each case, digit groups, whitespace runs and line ends,
# punctuation runs and the characters o200k's patterns name (marks, other letters).
PROBES = tuple(
    probe.encode("utf-8")
    for probe in (
        "a", "A", "s", "S", "t", "d", "m", "l", "ll", "e", "ve", "re", "RE", "aA", "Aa",
        "1", "12", "123", "1234",
        " ", "  ", " a", " 1", " .", "\n", "\r\n", " \n", "\t", "\u3000",
        ".", ",", "'", "'s", "/", "-", ".\n", "!!",
        "é", "É", "\u0301", "ǅ", "ʰ", "中", "\U0001f600",
    )
)
_WINDOW = 4  # pre-tokens of the prompt's end probed first; doubled while every boundary is unstable


def _starts(pretokenizer: PreTokenizer, data: bytes) -> np.ndarray:
    """The byte offsets where the pre-tokens of `data` start."""
    lengths = pretokenizer.piece_lengths(data)
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def stable_start(pretokenizer: PreTokenizer, data: bytes, trust_start: bool) -> int | None:
    """The last pre-token start of `data` that no probe continuation moves (every pre-token
    before it unchanged); 0 counts only when `trust_start`. None when there is none."""
    base = _starts(pretokenizer, data)
    if len(base) == 0:
        return 0 if trust_start else None
    agreed = len(base)
    for probe in PROBES:
        extended = _starts(pretokenizer, data + probe)
        common = min(agreed, len(extended))
        differing = np.flatnonzero(base[:common] != extended[:common])
        agreed = int(differing[0]) if len(differing) else common
        # base[:agreed] are starts both share; the pre-token at base[agreed - 1] is the same in
        # both only if the next start is too, so the last shared start is the cut
        if agreed <= 1:
            break
    if agreed == 0:
        return None
    cut = int(base[agreed - 1])
    if cut == 0 and not trust_start:
        return None
    return cut


def heal(tokenizer: BaseTokenizer, ids: Iterable[int] | np.ndarray) -> tuple[list[int], bytes]:
    """(the prompt without its unstable last tokens, the bytes they held); see the module
    docstring. EncodeError for an empty prompt, DecodeError for an id that is no token."""
    values = as_id_array(ids, "heal")
    if len(values) == 0:
        raise EncodeError("heal needs a prompt of at least one token; the ids given are empty")
    index = token_index(tokenizer)
    index.check_ids(values, "heal")
    prompt = values.tolist()
    tail = len(prompt)
    while tail > 0 and prompt[tail - 1] not in index.special_ids:
        tail -= 1
    if tail == len(prompt):
        return prompt, b""  # it ends in a special token: nothing to restart
    pattern = getattr(tokenizer, "pattern", None)
    if pattern is None or hasattr(tokenizer, "pipeline"):
        return _heal_by_prefixes(index, prompt, tail)
    pretokenizer = _pretokenizer(tokenizer, pattern)
    data = tokenizer.decode_bytes(values[tail:])
    # Pre-tokenising from a pre-token start gives the pieces the whole text has there (the
    # patterns look behind nothing), so the probes run on the last few pre-tokens only.
    starts = _starts(pretokenizer, data)
    pieces = _WINDOW
    while True:
        first = max(0, len(starts) - pieces)
        offset = int(starts[first]) if len(starts) else 0
        cut = stable_start(pretokenizer, data[offset:], trust_start=first == 0)
        if cut is not None:
            cut += offset
            break
        pieces *= 2
    ends = np.cumsum(index.lengths[values[tail:]])
    kept = int(np.searchsorted(ends, cut, side="right"))  # tokens ending at or before the cut
    start = int(ends[kept - 1]) if kept else 0
    return prompt[: tail + kept], data[start:]


def _heal_by_prefixes(index, prompt: list[int], tail: int) -> tuple[list[int], bytes]:
    """Back up while the removed bytes, with the token before them, still start some token."""
    kept = len(prompt) - 1
    removed = index.bytes_of[prompt[kept]]
    while kept > tail:
        candidate = index.bytes_of[prompt[kept - 1]] + removed
        if not index.has_token_starting_with(candidate):
            break
        kept -= 1
        removed = candidate
    return prompt[:kept], removed


_PRETOKENIZERS: dict[str, PreTokenizer] = {}


def _pretokenizer(tokenizer: BaseTokenizer, pattern: str) -> PreTokenizer:
    if pattern not in _PRETOKENIZERS:
        if len(_PRETOKENIZERS) > 16:
            _PRETOKENIZERS.clear()
        _PRETOKENIZERS[pattern] = PreTokenizer(pattern)
    return _PRETOKENIZERS[pattern]


def tokens_starting_with(tokenizer: BaseTokenizer, prefix: bytes | str, *, or_prefixes: bool = False) -> np.ndarray:
    """Ids (int64, ascending) of the ordinary tokens whose bytes start with `prefix`; with
    `or_prefixes=True` also those that are a proper prefix of it, which a generation loop needs
    when `prefix` is longer than any token."""
    if isinstance(prefix, str):
        prefix = prefix.encode("utf-8", "surrogatepass")
    elif isinstance(prefix, (bytearray, memoryview)):
        prefix = bytes(prefix)
    elif not isinstance(prefix, bytes):
        raise EncodeError(f"tokens_starting_with takes bytes or str, not {type(prefix).__name__}")
    index = token_index(tokenizer)
    found = index.starting_with(prefix)
    if or_prefixes:
        found = np.union1d(found, np.array(index.proper_prefixes_of(prefix), dtype=np.int64))
    return found
