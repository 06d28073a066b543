"""Reading and writing tokeniser files: polytok's own JSON, tiktoken ranks, HF tokenizer.json.

`load` detects the format from the file's content. Every writer goes through
`write_atomically`, so an interrupted save never leaves a half-written file behind.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from polytok.errors import FormatError
from polytok.tokenizer import Tokenizer, _from_record, read_json


def write_atomically(path: str | Path, data: bytes) -> None:
    """Writes `data` to a temporary file next to `path`, then renames it over `path`."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load(path: str | Path) -> Tokenizer:
    """Loads a tokeniser file: a polytok JSON file, or a HF tokenizer.json of byte-level BPE.

    A tiktoken ranks file holds no pattern and no special tokens; use `load_tiktoken` for it.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"tokenizer file {path} does not exist" if not path.exists() else f"{path} is not a file")
    with path.open("rb") as file:
        head = file.read(64).lstrip()
    if not head.startswith(b"{"):
        raise FormatError(
            f"tokenizer file {path} is not JSON; if it is a tiktoken ranks file, load it with "
            f"polytok.load_tiktoken(path, pattern=..., special_tokens=...)"
        )
    record = read_json(path)
    if isinstance(record, dict) and "format" in record:
        return _from_record(record, f"tokenizer file {path}")
    if isinstance(record, dict) and "model" in record:
        from polytok.formats.huggingface import tokenizer_from_huggingface

        return tokenizer_from_huggingface(record, f"tokenizer file {path}")
    raise FormatError(f"tokenizer file {path}: neither a polytok file (no field 'format') nor a HF tokenizer.json (no field 'model')")
