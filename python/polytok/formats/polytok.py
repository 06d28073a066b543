"""The polytok JSON format: one file per tokeniser, fields in a fixed order (FIELDS), tokens as
base64, and every field checked on reading so that an edited or truncated file names what is
wrong (docs/format.md)."""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from polytok import checks
from polytok.errors import ConfigError, FormatError, PatternError
from polytok.files import shown, write_atomically
from polytok.tokenizer import Tokenizer

FORMAT_NAME = "polytok"
FORMAT_VERSION = 1

FIELDS = (
    "format", "version", "algorithm", "segmenter", "pattern", "special_tokens", "vocab",
    "merges", "scores", "continuation_marker", "training", "certificate",
)


def record(tokenizer: Tokenizer) -> dict[str, Any]:
    """The file record of `tokenizer`, in the file's field order."""
    certificate = tokenizer.certificate
    if certificate is not None and hasattr(certificate, "to_dict"):
        certificate = certificate.to_dict()
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "algorithm": tokenizer.algorithm,
        "segmenter": tokenizer.segmenter,
        "pattern": tokenizer.pattern,
        "special_tokens": dict(sorted(tokenizer.special_tokens.items(), key=lambda item: item[1])),
        "vocab": [base64.b64encode(token).decode("ascii") for token in tokenizer.vocab],
        "merges": None if tokenizer.merges is None else [list(pair) for pair in tokenizer.merges],
        "scores": tokenizer.scores,
        "continuation_marker": tokenizer.continuation_marker,
        "training": tokenizer.training,
        "certificate": certificate,
    }


def save_polytok(tokenizer: Tokenizer, path: str | Path) -> None:
    """Writes the polytok JSON file, atomically and byte-identically for equal tokenisers."""
    write_atomically(path, dumps(record(tokenizer)).encode("utf-8"))


def dumps(record: dict[str, Any]) -> str:
    """JSON with one top-level field per line and one list item per line (readable diffs, and a
    truncated file's error names a line near the damage); nested objects keep sorted keys."""

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)

    lines = []
    for name in FIELDS:
        value = record[name]
        if isinstance(value, list) and value:
            items = ",\n".join("  " + dump(item) for item in value)
            lines.append(f" {dump(name)}: [\n{items}\n ]")
        else:
            lines.append(f" {dump(name)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def from_record(record: Any, source: str) -> Tokenizer:
    """Checks every field of a polytok record and builds the tokeniser; FormatError names
    `source` and the field."""

    def fail(field: str, problem: str) -> FormatError:
        return FormatError(f"{source}: field {field} {problem}")

    if not isinstance(record, dict):
        raise FormatError(f"{source}: expected a JSON object, found {type(record).__name__}")
    if record.get("format") != FORMAT_NAME:
        raise fail("'format'", f"is {shown(record.get('format'))}, expected {FORMAT_NAME!r}")
    version = record.get("version")
    if not checks.is_integer(version):
        raise fail("'version'", f"is {shown(version)}, expected an integer")
    if version != FORMAT_VERSION:
        newer = " (written by a newer polytok)" if version > FORMAT_VERSION else ""
        raise fail("'version'", f"is {shown(version)}{newer}; this polytok reads version {FORMAT_VERSION}")
    for name in FIELDS:
        if name not in record:
            raise fail(repr(name), "is missing")
    extra = sorted(set(record) - set(FIELDS))
    if extra:
        raise FormatError(f"{source}: unknown field {shown(extra[0])} (known fields: {', '.join(FIELDS)})")

    def expect(name: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
        value = record[name]
        if value is None and nullable:
            return None
        if not isinstance(value, kinds) or isinstance(value, bool):
            kind = " or ".join(k.__name__ for k in kinds) + (" or null" if nullable else "")
            raise fail(repr(name), f"is {type(value).__name__}, expected {kind}")
        return value

    algorithm = expect("algorithm", (str,))
    segmenter = expect("segmenter", (str,))
    pattern = expect("pattern", (str,), nullable=True)
    special_tokens = expect("special_tokens", (dict,))
    for text, token_id in special_tokens.items():
        if not checks.is_integer(token_id):
            raise fail(f"'special_tokens'[{shown(text)}]", f"is {shown(token_id)}, expected an integer id")
    vocab_field = expect("vocab", (list,))
    vocab = []
    for index, item in enumerate(vocab_field):
        if not isinstance(item, str):
            raise fail(f"'vocab'[{index}]", f"is {type(item).__name__}, expected a base64 string")
        try:
            token = base64.b64decode(item, validate=True)
        except ValueError:
            raise fail(f"'vocab'[{index}]", f"is not valid base64: {shown(item)}") from None
        vocab.append(token)
    merges = expect("merges", (list,), nullable=True)
    if merges is not None:
        for index, pair in enumerate(merges):
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not all(checks.is_integer(i) for i in pair)
            ):
                raise fail(f"'merges'[{index}]", f"is {shown(pair)}, expected [left id, right id]")
    scores = expect("scores", (list,), nullable=True)
    continuation_marker = expect("continuation_marker", (str,), nullable=True)
    training = expect("training", (dict,), nullable=True)
    certificate = expect("certificate", (dict,), nullable=True)
    try:
        return Tokenizer(
            vocab,
            segmenter=segmenter,
            pattern=pattern,
            special_tokens=special_tokens,
            merges=None if merges is None else [tuple(pair) for pair in merges],
            scores=scores,
            algorithm=algorithm,
            continuation_marker=continuation_marker,
            training=training,
            certificate=certificate,
        )
    except ConfigError as error:  # a value rule of the constructor, which names the field
        raise FormatError(f"{source}: field {error.field}: {error}" if error.field else f"{source}: {error}") from None
    except PatternError as error:
        raise FormatError(f"{source}: {error}") from None


