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

The search runs in the core (src/heal.rs) in one call: it reads the ids from the prompt's end,
decodes the text after its last special token (under the preset patterns, where a space or
line end before an ASCII letter always starts a pre-token, a long prompt's last 16 tokens, or
64, from such a place; a last pre-token that starts that way needs no probe), finds the stable
start and backs up over the tokens after it.
`tokens_starting_with(bytes)` is a binary search in the tokens sorted by their bytes.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from polytok import _core
from polytok.errors import EncodeError
from polytok.pretokenize import PRESETS
from polytok.apply.token_index import TokenIndex, as_id_array, token_index

if TYPE_CHECKING:
    from polytok.base_tokenizer import BaseTokenizer

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
_PRESET_PATTERNS = frozenset(PRESETS.values())
_HEALERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def heal(tokenizer: BaseTokenizer, ids: Iterable[int] | np.ndarray) -> tuple[list[int], bytes]:
    """(the prompt without its unstable last tokens, the bytes they held); see the module
    docstring. An empty prompt has nothing to heal: ([], b""). DecodeError for an id that is no
    token among those heal reads (the prompt's end back to its last special token, or its last
    17 or 65 tokens; the rest is returned as given)."""
    if type(ids) is list:
        prompt = ids
    else:
        prompt = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    if not prompt:
        return [], b""
    healer = _HEALERS.get(tokenizer)
    if healer is None:
        healer = _HEALERS[tokenizer] = _healer(tokenizer)
    if healer is False:
        return _heal_by_prefixes(token_index(tokenizer), prompt)
    try:
        kept, removed = healer.heal(prompt)
    except ValueError:
        _check(token_index(tokenizer), prompt)  # names the first id that is no token
        raise
    return prompt[:kept], removed


def _healer(tokenizer: BaseTokenizer) -> object:
    """The core's healer for a tokeniser with a pattern (False for one without, and for loaded
    tokenisers, whose pipelines have no stable pre-token starts)."""
    pattern = getattr(tokenizer, "pattern", None)
    if pattern is None or hasattr(tokenizer, "pipeline"):
        return False
    index = token_index(tokenizer)
    ordinary = len(tokenizer.vocab)
    return _core.Healer(pattern, list(PROBES), index.bytes_of[:ordinary], sorted(index.special_ids), pattern in _PRESET_PATTERNS)


def _check(index: TokenIndex, prompt: list[int]) -> None:
    """DecodeError naming the first id of the prompt that is no token."""
    index.check_ids(as_id_array(prompt, "heal"), "heal")


def _heal_by_prefixes(index: TokenIndex, prompt: list[int]) -> tuple[list[int], bytes]:
    """Back up, never past a special token, while the removed bytes with the token before them
    still start some token."""
    _check(index, prompt)
    kept = len(prompt) - 1
    if prompt[kept] in index.special_ids:
        return prompt[:], b""
    removed = index.bytes_of[prompt[kept]]
    while kept > 0 and prompt[kept - 1] not in index.special_ids:
        candidate = index.bytes_of[prompt[kept - 1]] + removed
        if not index.has_token_starting_with(candidate):
            break
        kept -= 1
        removed = candidate
    return prompt[:kept], removed


def tokens_starting_with(tokenizer: BaseTokenizer, prefix: bytes | str, *, or_prefixes: bool = False) -> np.ndarray:
    """Ids (int64, read-only, in the order of their bytes) of the ordinary tokens whose bytes
    start with `prefix`; with `or_prefixes=True` the tokens that are a proper prefix of it come
    first, which a generation loop needs when `prefix` is longer than any token."""
    if isinstance(prefix, str):
        prefix = prefix.encode("utf-8", "surrogatepass")
    elif isinstance(prefix, (bytearray, memoryview)):
        prefix = bytes(prefix)
    elif not isinstance(prefix, bytes):
        raise EncodeError(f"tokens_starting_with takes bytes or str, not {type(prefix).__name__}")
    index = token_index(tokenizer)
    found = index.starting_with(prefix)
    if or_prefixes:
        found = np.concatenate([np.array(index.proper_prefixes_of(prefix), dtype=np.int64), found])
    return found
