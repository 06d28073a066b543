"""The component nodes of a tokenizer.json (normalizer, pre_tokenizer, decoder): their type,
their list fields and their patterns, read with errors that name the node's JSON path."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

from polytok.errors import FormatError

# Builds the FormatError for a problem, naming the file it is in.
Fail = Callable[[str], FormatError]


def type_of(node: Any, where: str, fail: Fail) -> str:
    """The node's "type"."""
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise fail(f"{where} is not an object with a 'type'")
    return node["type"]


def list_field(node: dict[str, Any], name: str, where: str, fail: Fail) -> list[Any]:
    """The node's list field `name` (a Sequence's children)."""
    value = node.get(name)
    if not isinstance(value, list):
        raise fail(f"{where}.{name} is not a list")
    return value


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
