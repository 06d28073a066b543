"""HF normalisers that also say where each character of their output came from, for offsets
into the original text of a loaded tokenizer.json whose normaliser rewrites it.

An alignment is one int per character of the normalised text: the index of the original
character it stands for, or -1 for a character inserted before any original one (it maps to
the empty span at 0). It follows `tokenizers`' own rule, so that offsets agree with its
`Encoding.offsets`: each normaliser step yields its output characters with a change (0: it takes
the place of the next input character; -n: it does, and the n input characters after that one
vanish; 1: it is inserted and shares the alignment of the input character before it), and the
characters take the alignment of the input position they reach in that order. So a
character that several input characters became (NFC's composition) stands for the first of
them, a Replace match's content stands for the match's last character, every character of a
decomposition or of a multi-character lower case stands for the character it came from, and
characters that are dropped (Strip, BertNormalizer's cleaning, StripAccents' marks) map to no
output character. The alignment never decreases.

`aligned_normalizer(node)` builds the aligned form of a normalizer node that
normalizers.normalizer has read (and checked); its text is what that normaliser gives.
"""
from __future__ import annotations

import base64
import functools
import unicodedata
from collections.abc import Callable
from typing import Any

import regex

from polytok.formats.huggingface.normalizers import (
    _BERT_REMOVED,
    _CHINESE,
    _GRAPHEME,
    _NONSPACING_MARK,
    WHITESPACE,
    CharsMap,
    lowercase,
)
from polytok.formats.huggingface.nodes import regex_timed_out, regex_timeout
from polytok.formats.huggingface.unicode_tables import OVERRIDES

Alignment = list[int]
AlignedNormalizer = Callable[[str, Alignment], tuple[str, Alignment]]
Change = tuple[str, int]


def transform(alignment: Alignment, changes: list[Change], initial_offset: int = 0,
              start: int = 0, end: int | None = None) -> tuple[str, Alignment]:
    """The text of `changes` and its alignment, replacing characters start..end of a text with
    `alignment` (after skipping `initial_offset` of them): the rule of the module docstring."""
    end = len(alignment) if end is None else end
    position = start + initial_offset
    out = []
    for _, change in changes:
        if change > 0:
            out.append(alignment[position - 1] if position >= 1 else -1)
            continue
        out.append(alignment[min(position, len(alignment) - 1)] if alignment else -1)
        position += 1 - min(change, 0)
    return "".join(char for char, _ in changes), alignment[:start] + out + alignment[end:]


# ---- Unicode forms: decomposition with canonical ordering, then canonical composition ---------

def _decomposed(text: str, compatible: bool, overrides: dict[str, str]) -> list[tuple[int, str, int]]:
    """(combining class, character, change) of `text`'s full decomposition: each character's
    decomposition (first 0, the rest 1), then every run of non-starters sorted by class (stable).
    A character tokenizers' tables normalise differently comes out as its form there, as starters."""
    form = "NFKD" if compatible else "NFD"
    out: list[tuple[int, str, int]] = []
    for char in text:
        if char in overrides:
            out.extend((0, part, 0 if index == 0 else 1) for index, part in enumerate(overrides[char]))
            continue
        parts = unicodedata.normalize(form, char) if not char.isascii() else char
        out.extend((unicodedata.combining(part), part, 0 if index == 0 else 1) for index, part in enumerate(parts))
    ordered: list[tuple[int, str, int]] = []
    run: list[tuple[int, str, int]] = []
    for item in out:
        if item[0] == 0:
            ordered.extend(sorted(run, key=lambda entry: entry[0]))
            run = []
            ordered.append(item)
        else:
            run.append(item)
    ordered.extend(sorted(run, key=lambda entry: entry[0]))
    return ordered


@functools.lru_cache(maxsize=65536)
def _compose(first: str, second: str) -> str | None:
    """The primary composite of two characters, if any."""
    composed = unicodedata.normalize("NFC", first + second)
    return composed if len(composed) == 1 else None


def _recomposed(items: list[tuple[int, str, int]], fixed: frozenset[str]) -> list[Change]:
    """Canonical composition of a decomposed sequence, changes carried as `tokenizers` carries
    them: a composite takes its starter's change plus the mark's, less one. Characters in
    `fixed` compose with nothing."""
    out: list[Change] = []
    composee: Change | None = None
    blocked: list[Change] = []
    last_class: int | None = None
    for klass, char, change in items:
        if composee is None:
            if klass != 0:
                out.append((char, change))
            else:
                composee = (char, change)
            continue
        if last_class is None or last_class < klass:
            composite = None if composee[0] in fixed or char in fixed else _compose(composee[0], char)
            if composite is not None:
                composee = (composite, composee[1] + change - 1)
                continue
        if klass == 0:
            out.append(composee)
            out.extend(blocked)
            composee, blocked, last_class = (char, change), [], None
            continue
        blocked.append((char, change))
        last_class = klass
    if composee is not None:
        out.append(composee)
    out.extend(blocked)
    return out


def unicode_form(form: str) -> AlignedNormalizer:
    """NFC, NFD, NFKC or NFKD with its alignment."""
    overrides = OVERRIDES.get(form, {})
    fixed = frozenset(char for value in overrides.values() for char in value)
    compatible = form in ("NFKC", "NFKD")

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        if text.isascii():
            return text, alignment
        items = _decomposed(text, compatible, overrides)
        changes = [(char, change) for _, char, change in items] if form in ("NFD", "NFKD") else _recomposed(items, fixed)
        return transform(alignment, changes)

    return normalize


# ---- the other normalisers -----------------------------------------------------------------

def aligned_lowercase(text: str, alignment: Alignment) -> tuple[str, Alignment]:
    """Lowercase: each character's lower case, its extra characters inserted after it."""
    if text.isascii():
        return text.lower(), alignment
    return transform(alignment, [(part, 0 if index == 0 else 1) for char in text for index, part in enumerate(lowercase(char))])


def replace(pattern: str, content: str, is_regex: bool) -> AlignedNormalizer:
    """Replace: each match's content stands for the match's last character."""
    compiled = regex.compile(pattern if is_regex else regex.escape(pattern))

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        out_text, out_alignment, done = [], [], 0
        try:
            matches = list(compiled.finditer(text, timeout=regex_timeout(text)))
        except TimeoutError:
            raise regex_timed_out(compiled, text) from None
        for match in matches:
            start, end = match.span()
            out_text.append(text[done:start] + content)
            out_alignment.extend(alignment[done:start])
            if content:
                stands_for = alignment[end - 1] if end >= 1 else -1
                out_alignment.extend([stands_for] * len(content))
            done = end
        out_text.append(text[done:])
        out_alignment.extend(alignment[done:])
        return "".join(out_text), out_alignment

    return normalize


def prepend(prefix: str) -> AlignedNormalizer:
    """Prepend: the prefix stands for the text's first character."""

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        if not text:
            return text, alignment
        changes = [(char, 0 if index == 0 else 1) for index, char in enumerate(prefix)] + [(text[0], 1)]
        new_text, new_alignment = transform(alignment, changes, 0, 0, 1)
        return new_text + text[1:], new_alignment

    return normalize


def strip(left: bool, right: bool) -> AlignedNormalizer:
    """Strip: whitespace off either end, and its alignment with it."""

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        start, end = 0, len(text)
        if left:
            while start < end and text[start] in WHITESPACE:
                start += 1
        if right:
            while end > start and text[end - 1] in WHITESPACE:
                end -= 1
        return text[start:end], alignment[start:end]

    return normalize


def _keep(text: str, alignment: Alignment, removed: regex.Pattern) -> tuple[str, Alignment]:
    """The characters `removed` does not match, with their alignments."""
    kept = [index for index, char in enumerate(text) if not removed.fullmatch(char)]
    return "".join(text[index] for index in kept), [alignment[index] for index in kept]


def _versioned(step: AlignedNormalizer, overrides: dict[str, str]) -> AlignedNormalizer:
    """`step`, except that each character `tokenizers`' tables treat differently (unicode_tables.py)
    becomes its form there, standing for itself; the text between them goes through `step`."""
    if not overrides:
        return step

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        if overrides.keys().isdisjoint(text):
            return step(text, alignment)
        out_text: list[str] = []
        out_alignment: Alignment = []
        start = 0
        for index, char in enumerate([*text, ""]):
            if char and char not in overrides:
                continue
            part, part_alignment = step(text[start:index], alignment[start:index])
            out_text.append(part)
            out_alignment.extend(part_alignment)
            if char:
                out_text.append(overrides[char])
                out_alignment.extend([alignment[index]] * len(overrides[char]))
            start = index + 1
        return "".join(out_text), out_alignment

    return normalize


def bert(clean_text: bool, handle_chinese_chars: bool, strip_accents: bool | None, lower: bool) -> AlignedNormalizer:
    """BertNormalizer: cleaning drops characters and maps whitespace to spaces; the spaces put
    around a CJK ideograph stand for the ideograph."""
    remove_accents = lower if strip_accents is None else strip_accents
    nfd = unicode_form("NFD")
    whitespace = regex.compile("[" + "".join(sorted(WHITESPACE)) + "]")

    def clean(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        text, alignment = _keep(text, alignment, _BERT_REMOVED)
        return whitespace.sub(" ", text), alignment

    def strip_marks(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        return _keep(*nfd(text, alignment), _NONSPACING_MARK)

    cleaned = _versioned(clean, OVERRIDES.get("BertClean", {}))
    accents_stripped = _versioned(strip_marks, OVERRIDES.get("BertStripAccents", {}))

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        if clean_text:
            text, alignment = cleaned(text, alignment)
        if handle_chinese_chars and _CHINESE.search(text):
            changes: list[Change] = []
            for char in text:
                changes.extend(((" ", 0), (char, 1), (" ", 1)) if _CHINESE.fullmatch(char) else ((char, 0),))
            text, alignment = transform(alignment, changes)
        if remove_accents and not text.isascii():
            text, alignment = accents_stripped(text, alignment)
        if lower:
            text, alignment = aligned_lowercase(text, alignment)
        return text, alignment

    return normalize


def precompiled(blob: bytes, source: str) -> AlignedNormalizer:
    """Precompiled, with `tokenizers`' changes: a rule's output characters replace its input
    ones in order; extra ones are inserted, and the input characters left over vanish after the
    last character produced so far."""
    charsmap = CharsMap(blob, source)

    def rule_changes(changes: list[Change], old: str, rule: bytes) -> None:
        new = rule.decode("utf-8", "replace")
        grown = len(new) - len(old)
        changes.extend((char, 1 if index >= len(new) - grown else 0) for index, char in enumerate(new))
        if grown < 0 and changes:
            char, change = changes[-1]
            changes[-1] = (char, change + grown)

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        if not charsmap.units:
            return text, alignment
        changes: list[Change] = []
        modified = False
        for grapheme in _GRAPHEME.findall(text):
            if len(grapheme.encode("utf-8")) < 6:
                rule = charsmap.first_rule(grapheme)
                if rule is not None:
                    modified = True
                    rule_changes(changes, grapheme, rule)
                    continue
            for char in grapheme:
                rule = charsmap.first_rule(char)
                if rule is None:
                    changes.append((char, 0))
                else:
                    modified = True
                    rule_changes(changes, char, rule)
        return transform(alignment, changes) if modified else (text, alignment)

    return normalize


def sequence(steps: list[AlignedNormalizer]) -> AlignedNormalizer:
    """Each aligned normaliser in turn."""

    def normalize(text: str, alignment: Alignment) -> tuple[str, Alignment]:
        for step in steps:
            text, alignment = step(text, alignment)
        return text, alignment

    return normalize


def aligned_normalizer(node: Any) -> AlignedNormalizer:
    """The aligned form of a normalizer node that normalizers.normalizer accepted."""
    kind = node["type"]
    if kind == "Sequence":
        return sequence([aligned_normalizer(child) for child in node["normalizers"]])
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return unicode_form(kind)
    if kind == "Lowercase":
        return aligned_lowercase
    if kind == "Replace":
        pattern = node["pattern"]
        if "String" in pattern:
            return replace(pattern["String"], node["content"], False)
        return replace(pattern["Regex"], node["content"], True)
    if kind == "Prepend":
        return prepend(node["prepend"])
    if kind == "Strip":
        return strip(bool(node.get("strip_left")), bool(node.get("strip_right")))
    if kind == "BertNormalizer":
        return bert(bool(node.get("clean_text", True)), bool(node.get("handle_chinese_chars", True)),
                    node.get("strip_accents"), bool(node.get("lowercase", True)))
    blob = base64.b64decode(node.get("precompiled_charsmap") or "")
    return precompiled(blob, "normalizer.precompiled_charsmap")
