"""The component nodes of a tokenizer.json (normalizer, pre_tokenizer, decoder): their type,
their list fields and their patterns, read with errors that name the node's JSON path."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

from polytok import checks
from polytok.errors import EncodeError, FormatError
from polytok.files import shown

# Builds the FormatError for a problem, naming the file it is in.
Fail = Callable[[str], FormatError]

# The deepest Sequence nesting a component may have (real files use one level): the readers,
# and the normalisers and decoders they build, recurse once per level.
MAX_NESTING = 32


def type_of(node: Any, where: str, fail: Fail) -> str:
    """The node's "type"; `where`, its JSON path, says how deep it is nested (one index a level)."""
    if where.count("[") > MAX_NESTING:
        raise fail(f"{where} is nested more than {MAX_NESTING} Sequences deep")
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise fail(f"{where} is not an object with a 'type'")
    return node["type"]


def text_field(node: dict[str, Any], name: str, default: str, where: str, fail: Fail, *, empty: bool = True) -> str:
    """The node's string field `name` (`default` when absent); `empty=False` refuses ""."""
    value = node.get(name, default)
    if not isinstance(value, str) or (not empty and not value):
        raise fail(f"{where}.{name} is {shown(value)}, expected a {'' if empty else 'non-empty '}string")
    return value


def char_field(node: dict[str, Any], name: str, default: str, where: str, fail: Fail) -> str:
    """The node's one-character field `name` (`default` when absent): tokenizers reads these as a
    Rust `char`, and a longer string would multiply every text's length by its own."""
    value = node.get(name, default)
    if not isinstance(value, str) or len(value) != 1:
        raise fail(f"{where}.{name} is {shown(value)}, expected a string of one character")
    return value


def int_field(node: dict[str, Any], name: str, default: int, where: str, fail: Fail, *, limit: int) -> int:
    """The node's integer field `name` (`default` when absent), in 0..limit."""
    value = node.get(name, default)
    if not checks.is_integer(value) or not 0 <= value <= limit:
        raise fail(f"{where}.{name} is {shown(value)}, expected an integer from 0 to {limit}")
    return value


def list_field(node: dict[str, Any], name: str, where: str, fail: Fail) -> list[Any]:
    """The node's list field `name` (a Sequence's children)."""
    value = node.get(name)
    if not isinstance(value, list):
        raise fail(f"{where}.{name} is not a list")
    return value


def regex_timeout(text: str) -> float:
    """The seconds a file's regex may spend on `text`: 1 plus 10 µs a character, ten times what
    real patterns take, so that a backtracking pattern fails instead of hanging."""
    return 1.0 + len(text) / 100_000


def regex_timed_out(compiled: Any, text: str) -> EncodeError:
    """The error for a file's regex that ran past `regex_timeout` on `text`."""
    return EncodeError(
        f"the file's regex {shown(compiled.pattern)} took more than {regex_timeout(text):.1f} s on a text of "
        f"{len(text)} characters (it backtracks catastrophically); a tokeniser file with this pattern cannot encode it"
    )


def compile_pattern(pattern: Any, where: str, fail: Fail) -> Any:
    """A {"String": ...} or {"Regex": ...} pattern as a compiled `regex`."""
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return regex.compile(regex.escape(pattern["String"]))
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        try:
            return regex.compile(pattern["Regex"])
        except regex.error as error:
            raise fail(f"{where} regex {pattern['Regex']!r} does not compile: {error}") from None
    raise fail(f"{where} is {pattern!r}, expected {{'String': ...}} or {{'Regex': ...}}")
