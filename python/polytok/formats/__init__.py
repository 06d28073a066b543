"""Reading and writing tokeniser files: polytok's own JSON, tiktoken ranks, HF tokenizer.json,
SentencePiece models.

`load` is the one place that tells a file's format (`detect_format`, from its name and first
bytes; JSON files by their fields). polytok's own files and those other libraries' files that
are shaped as polytok writes them load as a `Tokenizer`; the others as a `LoadedTokenizer` with
their own pipeline. Every writer goes through `polytok.files.write_atomically`, so an
interrupted save never leaves a half-written file behind.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from polytok.errors import ConfigError, FormatError
from polytok.files import read_json
from polytok.formats.huggingface import tokenizer_from_huggingface
from polytok.formats.loaded import LoadedTokenizer
from polytok.formats.polytok import from_record
from polytok.formats.sentencepiece import load_sentencepiece
from polytok.formats.tiktoken import load_tiktoken
from polytok.tokenizer import Tokenizer

__all__ = ["detect_format", "load", "save"]

FileFormat = Literal["json", "tiktoken", "sentencepiece"]

# A tiktoken ranks line: base64 token, one space, rank.
_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2} [0-9]+\r?$")
_HEAD_BYTES = 4096


def detect_format(path: str | Path) -> FileFormat:
    """Which reader a tokeniser file needs, from its name and first bytes: "sentencepiece" for
    a .model file or a binary file that starts as a SentencePiece protobuf does (field 1, 2 or 3,
    length-delimited), "tiktoken" for a
    .tiktoken file or one whose first line is a rank line, "json" for a JSON object (polytok
    or HF, told apart by their fields). FormatError for anything else."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"cannot read tokeniser file {path}: it does not exist")
    try:
        with path.open("rb") as stream:
            head = stream.read(_HEAD_BYTES)
    except OSError as error:
        raise FormatError(f"cannot read tokeniser file {path}: {error.strerror or error}") from None
    if not head:
        raise FormatError(f"tokeniser file {path} is empty")
    if path.suffix == ".model":
        return "sentencepiece"
    if path.suffix == ".tiktoken" or _TIKTOKEN_LINE.match(head.split(b"\n", 1)[0]):
        return "tiktoken"
    if head.lstrip().startswith(b"{"):
        return "json"
    if not _is_text(head) and head[0] in _MODEL_PROTO_STARTS:
        return "sentencepiece"
    raise FormatError(
        f"{path} is not a tokeniser file polytok can read: expected polytok JSON, a tiktoken rank file, "
        "a Hugging Face tokenizer.json or a SentencePiece .model"
    )


# A serialised SentencePiece ModelProto's first tag: pieces (1), trainer_spec (2) or
# normalizer_spec (3), each length-delimited; protobuf writes fields in number order.
_MODEL_PROTO_STARTS = (0x0A, 0x12, 0x1A)


def _is_text(head: bytes) -> bool:
    """Whether the first bytes of a file are text: UTF-8 without NUL bytes (a character cut at the
    end of `head` still counts)."""
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.reason == "unexpected end of data" and len(head) == _HEAD_BYTES
    return True


class _NotGiven:
    """The type of NOT_GIVEN."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


# `load`'s pattern when the caller gives none (None is a pattern: no pre-tokenisation).
NOT_GIVEN = _NotGiven()


def load(
    path: str | Path,
    *,
    pattern: str | None | _NotGiven = NOT_GIVEN,
    special_tokens: dict[str, int] | list[str] | None = None,
) -> Tokenizer | LoadedTokenizer:
    """Loads a tokeniser file of any format polytok reads (see `detect_format`). A tiktoken
    ranks file holds no pattern, so `pattern` (a preset, a regex, or None for no
    pre-tokenisation) and any `special_tokens` complete it; the other formats record their
    own, and these options are not used for them."""
    path = Path(path)
    kind = detect_format(path)
    if kind == "sentencepiece":
        return load_sentencepiece(path)
    if kind == "tiktoken":
        if isinstance(pattern, _NotGiven):
            raise ConfigError(
                f"{path} is a tiktoken rank file, which does not record its pre-tokenisation pattern: "
                "load it with polytok.load(path, pattern=...), or pass --pattern on the command line "
                "(e.g. cl100k, o200k, gpt2)"
            )
        return load_tiktoken(path, pattern=pattern, special_tokens=special_tokens)
    source = f"tokeniser file {path}"
    record = read_json(path, "tokeniser file")
    if isinstance(record, dict) and "format" in record:
        return from_record(record, source)
    if isinstance(record, dict) and "model" in record:
        return tokenizer_from_huggingface(record, source)
    raise FormatError(f"{source}: neither a polytok file (no field 'format') nor a HF tokenizer.json (no field 'model')")


def save(tokenizer: Tokenizer | LoadedTokenizer, path: str | Path, format: str = "polytok") -> None:
    """Writes `tokenizer` as `format`: "polytok" (JSON), "tiktoken" (BPE ranks), "huggingface"
    (tokenizer.json) or "sentencepiece" (.model). ConfigError where the format cannot hold the
    tokeniser."""
    writers = {"polytok": tokenizer.save, "tiktoken": tokenizer.save_tiktoken, "huggingface": tokenizer.save_huggingface,
               "sentencepiece": tokenizer.save_sentencepiece}
    if format not in writers:
        raise ConfigError(f"unknown tokeniser file format {format!r}; known: {', '.join(writers)}")
    writers[format](path)
