"""HF normalisers, written to give exactly what `tokenizers` gives: the Unicode forms, Lowercase,
Replace, Prepend, Strip, BertNormalizer and Sequences of them, and the precompiled character map
that SentencePiece models (and HF's `Precompiled` normaliser) carry. `normalizer` builds one
from a tokenizer.json node.

A precompiled charsmap is a 4-byte little-endian trie size, then a double-array trie (darts-clone
units of 4 bytes) over UTF-8 input, then the replacement strings, each ending in a NUL byte; a
trie leaf's value is the offset of its replacement.
"""
from __future__ import annotations

import base64
import struct
import unicodedata
from collections.abc import Callable
from typing import Any

import regex

from polytok.errors import FormatError
from polytok.formats.huggingface.nodes import Fail, list_field, regex_timed_out, regex_timeout, type_of
from polytok.formats.huggingface.unicode_tables import OVERRIDES

Normalizer = Callable[[str], str]

# Rust's char::is_whitespace (the Unicode White_Space property), which HF's components use.
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _as_in_tokenizers(name: str, normalize: Normalizer) -> Normalizer:
    """`normalize` (Python's Unicode tables), except that the characters whose form differs in
    tokenizers' tables (unicode_tables.py) get tokenizers' form. They are starters that compose
    with nothing in one table or the other, so the text between them normalises on its own."""
    overrides = OVERRIDES.get(name, {})
    if not overrides:
        return normalize
    pattern = regex.compile("([" + "".join(regex.escape(char) for char in sorted(overrides)) + "])")
    # A set test is 10x faster than a regex search over a large character class.
    characters = frozenset(overrides)

    def normalize_as_tokenizers(text: str) -> str:
        if text.isascii() or characters.isdisjoint(text):
            return normalize(text)
        parts = pattern.split(text)
        # split() with one group alternates text, matched character, text, ...
        return "".join(overrides[part] if index % 2 else normalize(part) for index, part in enumerate(parts))

    return normalize_as_tokenizers


def unicode_form(form: str) -> Normalizer:
    """NFC, NFD, NFKC or NFKD, as tokenizers' tables have them."""
    return _as_in_tokenizers(form, lambda text: unicodedata.normalize(form, text))


def python_lowercase(text: str) -> str:
    """HF's Lowercase rule on Python's case tables: each character's full lower case on its own
    (no final-sigma rule, which Python's str.lower applies to "Σ" and nothing else)."""
    if "Σ" not in text:
        return text.lower()
    return "Σ".join(part.lower() for part in text.split("Σ")).replace("Σ", "σ")


lowercase = _as_in_tokenizers("Lowercase", python_lowercase)
"""HF's Lowercase, as tokenizers' case tables have it."""


def replace(pattern: str, content: str, is_regex: bool) -> Normalizer:
    """HF's Replace: every match of a string or (Oniguruma) regex becomes `content`."""
    if not is_regex:
        return lambda text: text.replace(pattern, content)
    compiled = regex.compile(pattern)

    def normalize(text: str) -> str:
        try:
            return compiled.sub(lambda match: content, text, timeout=regex_timeout(text))
        except TimeoutError:
            raise regex_timed_out(compiled, text) from None

    return normalize


def prepend(prefix: str) -> Normalizer:
    """HF's Prepend: the prefix goes before any non-empty text."""
    return lambda text: prefix + text if text else text


def strip(left: bool, right: bool) -> Normalizer:
    """HF's Strip: whitespace off either end."""
    characters = "".join(WHITESPACE)
    if left and right:
        return lambda text: text.strip(characters)
    if left:
        return lambda text: text.lstrip(characters)
    return lambda text: text.rstrip(characters) if right else text


# BertNormalizer's character classes. HF counts Cc, Cf and Co (not unassigned code points) as
# control characters, except tab, newline and carriage return, which are whitespace.
_BERT_REMOVED = regex.compile(r"[\x00\ufffd]|(?![\t\n\r])[\p{Cc}\p{Cf}\p{Co}]")
_BERT_WHITESPACE = regex.compile("[" + "".join(sorted(WHITESPACE)) + "]")
_CHINESE = regex.compile(
    "([\u4E00-\u9FFF\u3400-\u4DBF\U00020000-\U0002A6DF\U0002A700-\U0002B73F\U0002B740-\U0002B81F"
    "\U0002B920-\U0002CEAF\uF900-\uFAFF\U0002F800-\U0002FA1F])"
)
_NONSPACING_MARK = regex.compile(r"\p{Mn}")


def bert_clean(text: str) -> str:
    """BertNormalizer's cleaning on this module's tables: drop NUL, U+FFFD and control
    characters, and turn whitespace into spaces."""
    if not text.isascii() or not text.isprintable():
        text = _BERT_REMOVED.sub("", text)
    return _BERT_WHITESPACE.sub(" ", text)


def bert_strip_accents(text: str) -> str:
    """BertNormalizer's accent stripping on this module's tables: NFD, then drop every
    non-spacing mark."""
    return text if text.isascii() else _NONSPACING_MARK.sub("", unicodedata.normalize("NFD", text))


def bert(clean_text: bool, handle_chinese_chars: bool, strip_accents: bool | None, lower: bool) -> Normalizer:
    """HF's BertNormalizer: drop NUL, U+FFFD and control characters and turn whitespace into
    spaces; put spaces around CJK ideographs; drop accents (after NFD); lowercase. Accents go
    whenever lowercasing does unless `strip_accents` says otherwise. Cleaning, accents and case
    follow tokenizers' Unicode tables (unicode_tables.py)."""
    remove_accents = lower if strip_accents is None else strip_accents
    steps = [("BertClean", bert_clean, clean_text), ("BertStripAccents", bert_strip_accents, remove_accents),
             ("Lowercase", python_lowercase, lower)]
    # One set test for the whole text picks the plain steps or tokenizers' (unicode_tables.py).
    versioned = frozenset().union(*(OVERRIDES.get(name, {}) for name, _, used in steps if used))
    as_tokenizers = {name: _as_in_tokenizers(name, step) for name, step, _ in steps}

    def normalize(text: str) -> str:
        plain = text.isascii() or versioned.isdisjoint(text)
        if clean_text:
            text = bert_clean(text) if plain else as_tokenizers["BertClean"](text)
        if handle_chinese_chars and not text.isascii():
            text = _CHINESE.sub(r" \1 ", text)
        if remove_accents:
            text = bert_strip_accents(text) if plain else as_tokenizers["BertStripAccents"](text)
        if lower:
            text = python_lowercase(text) if plain else lowercase(text)
        return text

    return normalize


def sequence(steps: list[Normalizer]) -> Normalizer:
    """Each normaliser in turn."""

    def normalize(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return normalize


class CharsMap:
    """A precompiled charsmap read in Python, for HF's Precompiled normaliser and the aligned
    SentencePiece normaliser of offsets (SentencePiece models encode in the core,
    src/segment/normalize.rs)."""

    def __init__(self, blob: bytes, source: str):
        if len(blob) < 4:
            raise FormatError(f"{source}: the precompiled charsmap has {len(blob)} bytes, fewer than its 4-byte header")
        (trie_size,) = struct.unpack_from("<I", blob)
        if trie_size % 4 or 4 + trie_size > len(blob):
            raise FormatError(f"{source}: the precompiled charsmap's trie size {trie_size} does not fit its {len(blob)} bytes")
        self.units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        self.strings = blob[4 + trie_size :]
        self._cache: dict[bytes, bytes | None] = {}

    def _replacement(self, offset: int) -> bytes:
        end = self.strings.find(b"\x00", offset)
        return self.strings[offset : end if end >= 0 else len(self.strings)]

    def prefix_matches(self, data: bytes, start: int) -> list[tuple[int, int]]:
        """(length, replacement offset) of every rule that is a prefix of data[start:], shortest first."""
        units = self.units
        if not units:
            return []
        found = []
        position = 0
        unit = units[0]
        position ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        for index in range(start, len(data)):
            byte = data[index]
            position ^= byte
            if position >= len(units):
                break
            unit = units[position]
            if (unit & ((1 << 31) | 0xFF)) != byte:
                break
            position ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                if position >= len(units):
                    break
                found.append((index + 1 - start, units[position] & ((1 << 31) - 1)))
        return found

    def may_start(self, data: bytes) -> bool:
        """Whether some rule starts with `data` (or is a prefix of it)."""
        units = self.units
        if not units:
            return False
        unit = units[0]
        position = (unit >> 10) << ((unit & (1 << 9)) >> 6)
        for byte in data:
            position ^= byte
            if position >= len(units):
                return False
            unit = units[position]
            if (unit & ((1 << 31) | 0xFF)) != byte:
                return False
            position ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        return True

    def longest_rule(self, data: bytes, start: int) -> tuple[bytes, int] | None:
        """The replacement of the longest rule that is a prefix of data[start:] and that rule's
        length (SentencePiece's lookup); None where no rule is."""
        matches = self.prefix_matches(data, start)
        if not matches:
            return None
        length, offset = matches[-1]
        return self._replacement(offset), length

    def first_rule(self, chunk: str) -> bytes | None:
        """The replacement of the shortest rule that is a prefix of `chunk` (HF's lookup)."""
        data = chunk.encode("utf-8")
        if data not in self._cache:
            if len(self._cache) > 100_000:  # distinct graphemes seen; bounded for hostile input
                self._cache.clear()
            matches = self.prefix_matches(data, 0)
            self._cache[data] = self._replacement(matches[0][1]) if matches else None
        return self._cache[data]


_GRAPHEME = regex.compile(r"\X")


def precompiled(blob: bytes, source: str) -> Normalizer:
    """HF's Precompiled normaliser: each grapheme shorter than 6 bytes is replaced by the rule
    its bytes start with, if any; otherwise each of its characters is."""
    charsmap = CharsMap(blob, source)
    if not charsmap.units:
        return lambda text: text

    def normalize(text: str) -> str:
        out = []
        for grapheme in _GRAPHEME.findall(text):
            if len(grapheme.encode("utf-8")) < 6:
                rule = charsmap.first_rule(grapheme)
                if rule is not None:
                    out.append(rule.decode("utf-8", "replace"))
                    continue
            for char in grapheme:
                rule = charsmap.first_rule(char)
                out.append(char if rule is None else rule.decode("utf-8", "replace"))
        return "".join(out)

    return normalize


def normalizer(node: Any, where: str, fail: Fail, lossy: list[str]) -> Normalizer:
    """The normaliser of a normalizer node; what it loses is added to `lossy`."""
    kind = type_of(node, where, fail)
    if kind == "Sequence":
        steps = [
            normalizer(child, f"{where}.normalizers[{index}]", fail, lossy)
            for index, child in enumerate(list_field(node, "normalizers", where, fail))
        ]
        return sequence(steps)
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        lossy.append(f"normaliser {kind} maps different texts to the same ids")
        return unicode_form(kind)
    if kind == "Lowercase":
        lossy.append("normaliser Lowercase loses case")
        return lowercase
    if kind == "Replace":
        pattern = node.get("pattern")
        content = node.get("content")
        if not isinstance(content, str):
            raise fail(f"{where}.content is {content!r}, expected a string")
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
            replace_text = replace(pattern["String"], content, False)
        elif isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
            try:
                replace_text = replace(pattern["Regex"], content, True)
            except regex.error as error:
                raise fail(f"{where}.pattern regex does not compile: {error}") from None
        else:
            raise fail(f"{where}.pattern is {pattern!r}, expected {{'String': ...}} or {{'Regex': ...}}")
        lossy.append(f"normaliser Replace({pattern!r} -> {content!r}) decodes to the replaced text")
        return replace_text
    if kind == "Prepend":
        prefix = node.get("prepend")
        if not isinstance(prefix, str):
            raise fail(f"{where}.prepend is {prefix!r}, expected a string")
        return prepend(prefix)
    if kind == "Strip":
        lossy.append("normaliser Strip drops whitespace at the ends")
        return strip(bool(node.get("strip_left")), bool(node.get("strip_right")))
    if kind == "BertNormalizer":
        lossy.append("normaliser BertNormalizer drops control characters, turns whitespace into spaces"
                     + (", lowercases and strips accents" if node.get("lowercase", True) else ""))
        return bert(
            bool(node.get("clean_text", True)),
            bool(node.get("handle_chinese_chars", True)),
            node.get("strip_accents"),
            bool(node.get("lowercase", True)),
        )
    if kind == "Precompiled":
        blob = node.get("precompiled_charsmap")
        try:
            data = base64.b64decode(blob or "", validate=True)
        except (ValueError, TypeError):
            raise fail(f"{where}.precompiled_charsmap is not base64") from None
        lossy.append("normaliser Precompiled (SentencePiece's character map, NFKC-like) maps different texts to the same ids")
        try:
            return precompiled(data, f"{where}.precompiled_charsmap")
        except FormatError as error:  # CharsMap's message names the field; `fail` adds the file
            raise fail(str(error)) from None
    raise fail(f"{where} type {kind!r} is not supported")
