"""Reading and writing tokeniser files: polytok's own JSON, tiktoken ranks, HF tokenizer.json,
SentencePiece models (read only).

`load` detects the format from the file's content. Every writer goes through
`write_atomically`, so an interrupted save never leaves a half-written file behind.
"""
from __future__ import annotations

from pathlib import Path

from polytok.files import write_atomically
from polytok.errors import FormatError
from polytok.tokenizer import Tokenizer, _from_record, read_json


def load(
    path: str | Path,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | list[str] | None = None,
) -> Tokenizer:
    """Loads a tokeniser file, detecting its format: polytok JSON, HF tokenizer.json, a
    SentencePiece .model, or a tiktoken ranks file, which holds no pattern, so `pattern` (and
    any `special_tokens`) must be given for it."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"tokenizer file {path} does not exist" if not path.exists() else f"{path} is not a file")
    with path.open("rb") as file:
        raw_head = file.read(64)
    head = raw_head.lstrip()
    # a SentencePiece model is a protobuf whose first field is a piece (field 1, length-delimited)
    if pattern is None and raw_head.startswith(b"\x0a"):
        from polytok.formats.sentencepiece import load_sentencepiece

        return load_sentencepiece(path)
    if not head.startswith(b"{"):
        if pattern is not None:
            from polytok.formats.tiktoken import load_tiktoken

            return load_tiktoken(path, pattern=pattern, special_tokens=special_tokens)
        raise FormatError(
            f"tokenizer file {path} is neither JSON nor a SentencePiece model; if it is a tiktoken "
            f"ranks file, load it with polytok.load(path, pattern=...) or `--pattern` on the command line"
        )
    record = read_json(path)
    if isinstance(record, dict) and "format" in record:
        return _from_record(record, f"tokenizer file {path}")
    if isinstance(record, dict) and "model" in record:
        from polytok.formats.huggingface import tokenizer_from_huggingface

        return tokenizer_from_huggingface(record, f"tokenizer file {path}")
    raise FormatError(f"tokenizer file {path}: neither a polytok file (no field 'format') nor a HF tokenizer.json (no field 'model')")
