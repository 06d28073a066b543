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

The search runs in the core (src/heal.rs) on the prompt's text after its last special token;
`tokens_starting_with(bytes)` is a binary search in the tokens sorted by their bytes.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from polytok import _core
from polytok.errors import DecodeError, EncodeError
from polytok.pretokenize import PRESETS
from polytok.token_index import TokenIndex, as_id_array, token_index

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
_TAIL_TOKENS = 64  # tokens of a long prompt's end decoded first (presets)
_PRESET_PATTERNS = frozenset(PRESETS.values())
_WORD_START = re.compile(rb"[ \n][A-Za-z]")


def heal(tokenizer: BaseTokenizer, ids: Iterable[int] | np.ndarray) -> tuple[list[int], bytes]:
    """(the prompt without its unstable last tokens, the bytes they held); see the module
    docstring. EncodeError for an empty prompt, DecodeError for an id that is no token among
    those heal reads (all of them for a tokeniser with special tokens; otherwise the prompt's
    end, the rest is returned as given)."""
    prompt = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    if not prompt:
        raise EncodeError("heal needs a prompt of at least one token; the ids given are empty")
    index = token_index(tokenizer)
    tail = 0
    if index.special_ids and _check(index, prompt) >= len(tokenizer.vocab):
        tail = _after_last_special(prompt, index.special_ids)
    if tail == len(prompt):
        return prompt, b""  # it ends in a special token: nothing to restart
    pattern = getattr(tokenizer, "pattern", None)
    if pattern is None or hasattr(tokenizer, "pipeline"):
        _check(index, prompt)
        return _heal_by_prefixes(index, prompt, tail)
    try:
        data, cut = _cut(tokenizer, pattern, prompt, tail)
    except DecodeError:
        _check(index, prompt)  # names the id and its position in the whole prompt
        raise
    # Back up over the tokens that end after the cut (a token across it goes too).
    removed_length, kept = 0, len(prompt)
    lengths = index.lengths
    while kept > tail and removed_length < len(data) - cut:
        kept -= 1
        removed_length += int(lengths[prompt[kept]])
    return prompt[:kept], data[len(data) - removed_length :]


def _check(index: TokenIndex, prompt: list[int]) -> int:
    """The prompt's largest id; DecodeError naming the first id that is no token."""
    highest = 0
    try:
        lowest, highest = min(prompt), max(prompt)
        fine = isinstance(lowest, int) and isinstance(highest, int) and lowest >= 0 and highest < index.size
    except TypeError:
        fine = False
    if not fine or not index.all_known:
        index.check_ids(as_id_array(prompt, "heal"), "heal")
    return highest


def _cut(tokenizer: BaseTokenizer, pattern: str, prompt: list[int], tail: int) -> tuple[bytes, int]:
    """The text of prompt[start:] for some start >= tail, and the stable start in it."""
    search = _stable_start(pattern)
    if pattern in _PRESET_PATTERNS and len(prompt) - tail > _TAIL_TOKENS:
        # Under the presets a space followed by an ASCII letter always starts a pre-token, and
        # so does a letter after a line end (no alternative runs on from whitespace into a
        # letter, and a space joins the word after it). So a long prompt's end can be
        # pre-tokenised from the last such place before its last few pre-tokens, whatever came
        # before it.
        data = tokenizer.decode_bytes(prompt[len(prompt) - _TAIL_TOKENS :])
        found = None
        for found in _WORD_START.finditer(data, 1, max(1, len(data) - 64)):
            pass
        if found is not None:
            start = found.start() if data[found.start()] == 0x20 else found.start() + 1
            cut = start + search.cut(data[start:], _WINDOW)
            if cut > start:
                return data, cut
    data = tokenizer.decode_bytes(prompt[tail:])
    return data, search.cut(data, _WINDOW)


def _after_last_special(prompt: list[int], special_ids: frozenset[int]) -> int:
    """The index after the prompt's last special token (0 when it has none)."""
    at = len(prompt)
    while at > 0 and prompt[at - 1] not in special_ids:
        at -= 1
    return at


def _heal_by_prefixes(index: TokenIndex, prompt: list[int], tail: int) -> tuple[list[int], bytes]:
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


_STABLE_STARTS: dict[str, object] = {}


def _stable_start(pattern: str) -> object:
    """The core's stable-start search for `pattern` with PROBES, built once per pattern."""
    if pattern not in _STABLE_STARTS:
        if len(_STABLE_STARTS) > 16:
            _STABLE_STARTS.clear()
        _STABLE_STARTS[pattern] = _core.StableStart(pattern, list(PROBES))
    return _STABLE_STARTS[pattern]


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
