"""HF pre-tokenisers, as `tokenizers` applies them: ByteLevel (GPT-2's byte table and regex),
Split with every delimiter behaviour, Metaspace, Whitespace, WhitespaceSplit, BertPreTokenizer,
Punctuation and Digits, and Sequences of them. Each becomes steps that map a list of pieces to a
list of pieces; when a node's splitting is one regex's matches, `core_split` hands that regex
to the Rust core instead.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import regex

from polytok.errors import FormatError
from polytok.formats.huggingface.nodes import (
    Fail, char_field, compile_pattern, list_field, regex_timed_out, regex_timeout, shown, type_of,
)
from polytok.formats.huggingface.unicode_tables import BERT_PUNCTUATION_ADDED, BERT_PUNCTUATION_REMOVED

# The regex HF's ByteLevel pre-tokeniser applies when `use_regex` is true (GPT-2's, as HF writes it).
HF_BYTE_LEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@lru_cache(maxsize=1)
def byte_to_char() -> tuple[str, ...]:
    """GPT-2's byte -> character table: printable Latin-1 bytes stand for themselves, the other
    bytes take the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[int, str] = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return tuple(table[byte] for byte in range(256))


def to_byte_level(token: bytes) -> str:
    """A token's bytes as HF byte-level text."""
    table = byte_to_char()
    return "".join(table[byte] for byte in token)


def from_byte_level(text: str) -> bytes:
    """HF byte-level text back to bytes; KeyError for a character outside the table."""
    inverse = {char: byte for byte, char in enumerate(byte_to_char())}
    return bytes(inverse[char] for char in text)


Split = tuple[str, bool]  # a piece of text, and whether it starts the input (Metaspace's "first")
PreTokenizerStep = Callable[[list[Split]], list[Split]]

# Python `regex` classes for the Rust predicates HF's components use.
_WHITE_SPACE = r"\p{White_Space}"
_WORD = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}"
BASE_BERT_PUNCTUATION = r"\p{P}!-/:-@\[-`{-~"
"""Unicode punctuation and ASCII punctuation, as tokenizers' BertPreTokenizer defines it, on
the `regex` module's tables; `unicode_tables` holds where tokenizers' older tables differ."""


def _bert_punctuation() -> str:
    """One character of BertPreTokenizer's punctuation, as tokenizers' own tables have it: a
    pattern both the `regex` module and the core's regex engine read (the listed characters are
    letters of no special meaning in a class, written as themselves)."""
    added = "".join(map(chr, BERT_PUNCTUATION_ADDED))
    removed = "".join(map(chr, BERT_PUNCTUATION_REMOVED))
    return (f"(?![{removed}])" if removed else "") + f"[{BASE_BERT_PUNCTUATION}{added}]"


_BERT_PUNCTUATION = _bert_punctuation()


def _spans(text: str, matches: Iterable[tuple[int, int]], behavior: str, invert: bool) -> list[tuple[int, int]]:
    """HF's split of `text` by matched spans with a delimiter behaviour; empty pieces dropped."""
    spans: list[tuple[int, int, bool]] = []
    previous = 0
    for start, end in matches:
        if start > previous:
            spans.append((previous, start, False))
        spans.append((start, end, True))
        previous = end
    if previous < len(text):
        spans.append((previous, len(text), False))
    if invert:
        spans = [(start, end, not is_match) for start, end, is_match in spans]
    if behavior == "Removed":
        out = [(start, end) for start, end, is_match in spans if not is_match]
    elif behavior == "Isolated":
        out = [(start, end) for start, end, _ in spans]
    elif behavior == "MergedWithPrevious":
        out, previous_match = [], False
        for start, end, is_match in spans:
            if is_match and not previous_match and out:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
            previous_match = is_match
    elif behavior == "MergedWithNext":
        out, next_match = [], False
        for start, end, is_match in reversed(spans):
            if is_match and not next_match and out:
                out[-1] = (start, out[-1][1])
            else:
                out.append((start, end))
            next_match = is_match
        out.reverse()
    else:  # Contiguous: neighbouring spans of the same kind join
        out, previous_match = [], False
        for start, end, is_match in spans:
            if is_match == previous_match and out:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
            previous_match = is_match
    return [(start, end) for start, end in out if end > start]


def _split_step(compiled: Any, behavior: str, invert: bool) -> PreTokenizerStep:
    def step(splits: list[Split]) -> list[Split]:
        out = []
        for text, first in splits:
            try:
                matches = [m.span() for m in compiled.finditer(text, timeout=regex_timeout(text))]
            except TimeoutError:
                raise regex_timed_out(compiled, text) from None
            for start, end in _spans(text, iter(matches), behavior, invert):
                out.append((text[start:end], first and start == 0))
        return out

    return step


def _matches_step(compiled: Any) -> PreTokenizerStep:
    """The pieces are the regex's matches (what is between them is dropped)."""

    def step(splits: list[Split]) -> list[Split]:
        return [(match.group(), first and match.start() == 0) for text, first in splits for match in compiled.finditer(text)]

    return step


def _map_step(function: Callable[[str, bool], str]) -> PreTokenizerStep:
    return lambda splits: [(function(text, first), first) for text, first in splits]


def pre_tokenizer(node: Any, where: str, fail: Fail) -> tuple[list[PreTokenizerStep], bool]:
    """The steps of a pre-tokenizer node, and whether it includes ByteLevel (byte-level vocabulary)."""
    kind = type_of(node, where, fail)
    if kind == "Sequence":
        steps: list[PreTokenizerStep] = []
        byte_level = False
        for index, child in enumerate(list_field(node, "pretokenizers", where, fail)):
            child_steps, child_byte_level = pre_tokenizer(child, f"{where}.pretokenizers[{index}]", fail)
            steps += child_steps
            byte_level |= child_byte_level
        return steps, byte_level
    if kind == "ByteLevel":
        steps = []
        if node.get("add_prefix_space", False):
            steps.append(_map_step(lambda text, first: text if text.startswith(" ") else " " + text))
        if node.get("use_regex", True):
            steps.append(_split_step(regex.compile(HF_BYTE_LEVEL_REGEX), "Isolated", False))
        return steps, True
    if kind == "Split":
        pattern = node.get("pattern")
        behavior = node.get("behavior")
        if behavior not in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
            raise fail(f"{where}.behavior is {shown(behavior)}, not one of HF's split behaviours")
        return [_split_step(compile_pattern(pattern, f"{where}.pattern", fail), behavior, bool(node.get("invert")))], False
    if kind == "Metaspace":
        replacement = char_field(node, "replacement", "▁", where, fail)
        scheme = prepend_scheme(node, where, fail)
        split = node.get("split", True)

        def metaspace(text: str, first: bool) -> str:
            text = text.replace(" ", replacement)
            if (scheme == "always" or (scheme == "first" and first)) and not text.startswith(replacement):
                text = replacement + text
            return text

        steps = [_map_step(metaspace)]
        if split:
            steps.append(_split_step(regex.compile(regex.escape(replacement)), "MergedWithNext", False))
        return steps, False
    if kind == "Whitespace":
        return [_matches_step(regex.compile(f"[{_WORD}]+|[^{_WORD}{_WHITE_SPACE}]+"))], False
    if kind == "WhitespaceSplit":
        return [_matches_step(regex.compile(f"[^{_WHITE_SPACE}]+"))], False
    if kind == "BertPreTokenizer":
        # whitespace removed, each punctuation character its own piece
        return [_matches_step(regex.compile(f"{_BERT_PUNCTUATION}|(?:(?!{_BERT_PUNCTUATION})[^{_WHITE_SPACE}])+"))], False
    if kind == "Punctuation":
        behavior = node.get("behavior", "Isolated")
        if behavior not in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
            raise fail(f"{where}.behavior is {shown(behavior)}, not one of HF's split behaviours")
        return [_split_step(regex.compile(_BERT_PUNCTUATION), behavior, False)], False
    if kind == "Digits":
        behavior = "Isolated" if node.get("individual_digits") else "Contiguous"
        return [_split_step(regex.compile(r"\p{N}"), behavior, False)], False
    raise fail(f"{where} type {kind!r} is not supported")


def prepend_scheme(node: dict[str, Any], where: str, fail: Fail) -> str:
    """Metaspace's prepend scheme: "always", "first" or "never" (older files say add_prefix_space)."""
    if "prepend_scheme" in node:
        if node["prepend_scheme"] not in ("always", "first", "never"):
            raise fail(f"{where}.prepend_scheme is {shown(node['prepend_scheme'])}, expected 'always', 'first' or 'never'")
        return node["prepend_scheme"]
    return "always" if node.get("add_prefix_space", True) else "never"


def core_split(node: Any) -> tuple[list[PreTokenizerStep], str] | None:
    """For a pre-tokenizer whose splitting is one regex's matches: the Python steps before it
    (prefix space, Metaspace's replacement) and the regex, which then runs in the core."""
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind == "ByteLevel" and node.get("use_regex", True):
        steps = pre_tokenizer(node, "pre_tokenizer", FormatError)[0][:-1]  # its regex split goes to the core
        return steps, HF_BYTE_LEVEL_REGEX
    if kind == "BertPreTokenizer":
        return [], f"{_BERT_PUNCTUATION}|(?:(?!{_BERT_PUNCTUATION})[^{_WHITE_SPACE}])+"
    if kind == "Whitespace":
        return [], f"[{_WORD}]+|[^{_WORD}{_WHITE_SPACE}]+"
    if kind == "WhitespaceSplit":
        return [], f"[^{_WHITE_SPACE}]+"
    if kind == "Metaspace" and node.get("split", True):
        steps = pre_tokenizer(node, "pre_tokenizer", FormatError)[0][:-1]
        replacement = regex.escape(node.get("replacement", "▁"))
        # each replacement character starts a piece (MergedWithNext), text before the first is one
        return steps, f"{replacement}[^{replacement}]*|[^{replacement}]+"
    steps = node.get("pretokenizers") if kind == "Sequence" else None
    if (
        isinstance(steps, list)
        and len(steps) == 2
        and isinstance(steps[0], dict)
        and isinstance(steps[1], dict)
        and steps[0].get("type") == "Split"
        and steps[0].get("behavior") == "Isolated"
        and not steps[0].get("invert")
        and isinstance(steps[0].get("pattern"), dict)
        and isinstance(steps[0]["pattern"].get("Regex"), str)
        and steps[1].get("type") == "ByteLevel"
        and not steps[1].get("use_regex", True)
        and not steps[1].get("add_prefix_space")
    ):
        return [], steps[0]["pattern"]["Regex"]
    return None
