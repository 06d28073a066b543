"""Offsets: where each token of an encoding sits in the input.

polytok's own tokenisers are lossless: the tokens' bytes, back to back, are the input's bytes.
So a token's byte offsets are a running sum of token lengths (one core call over the ids), and
the offsets tile the input exactly: the first starts at 0, each starts where the one before
ends, the last ends at the input's length, and `data[start:end]` is the token's bytes.

Character offsets (`unit="chars"`) count characters instead (Python str indices). A byte-level
token may hold only part of a character; a character then belongs to the token that holds its
first byte, and a token holding only later bytes of a character gets an empty span (start ==
end) where that character ends. So character offsets tile the text too, and `text[start:end]`
is the characters each token begins.

Loaded files map their tokens back through their pipelines (formats/loaded.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from polytok.errors import ConfigError, EncodeError
from polytok.apply.token_index import token_index

if TYPE_CHECKING:
    from polytok.base_tokenizer import BaseTokenizer, SpecialSet

Unit = Literal["bytes", "chars"]


def input_bytes(text: str | bytes) -> bytes:
    """The bytes the encoder sees for `text` (lone surrogates kept, as the encoder keeps them)."""
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise EncodeError(f"text must be str or bytes, not {type(text).__name__}")


def byte_offsets(tokenizer: BaseTokenizer, ids: list[int]) -> np.ndarray:
    """(start, end) byte offsets (int64, shape (n, 2)) of `ids` laid end to end."""
    return token_index(tokenizer).offsets(ids)


def character_starts(data: bytes) -> np.ndarray:
    """For each byte position 0..len(data), how many characters begin before it (int64)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    counts = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum((raw & 0xC0) != 0x80, out=counts[1:])
    return counts


def to_character_offsets(data: bytes, offsets: np.ndarray) -> np.ndarray:
    """Byte offsets into UTF-8 `data` as character offsets (see the module docstring)."""
    return character_starts(data)[offsets]


def encode_with_offsets(
    tokenizer: BaseTokenizer,
    text: str | bytes,
    *,
    unit: Unit = "bytes",
    allowed_special: SpecialSet = frozenset(),
    disallowed_special: SpecialSet = "all",
) -> tuple[list[int], np.ndarray]:
    """The ids of `text` and each token's (start, end) in it, in bytes or characters."""
    if unit not in ("bytes", "chars"):
        raise ConfigError(f"unit must be 'bytes' or 'chars', not {unit!r}")
    if unit == "chars" and not isinstance(text, str):
        try:
            bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            raise EncodeError(f"character offsets need text; the bytes given are not UTF-8 ({error})") from None
    if hasattr(tokenizer, "pipeline"):
        return tokenizer.pipeline_offsets(text, unit, allowed_special, disallowed_special)  # type: ignore[attr-defined]
    ids = tokenizer.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    offsets = byte_offsets(tokenizer, ids)
    if unit == "chars":
        offsets = to_character_offsets(input_bytes(text), offsets)
    return ids, offsets
