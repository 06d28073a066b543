"""tiktoken's ranks file: one line per token, "base64(token) rank", ranks 0..N-1 (a few may be
missing: they are ids no ordinary token has, e.g. the special ids of an extended vocabulary).

The file holds only the ranks; the pre-tokenisation pattern and the special tokens are given
when loading, as with `tiktoken.Encoding(pat_str=..., mergeable_ranks=..., special_tokens=...)`.
A rank is the token's id, and tiktoken merges the adjacent pair whose bytes have the lowest rank.
"""
from __future__ import annotations

import base64
import binascii
from pathlib import Path

from polytok._core import MAX_UNUSED_IDS
from polytok.errors import ConfigError, FormatError, PatternError
from polytok.files import write_atomically
from polytok.tokenizer import Tokenizer


def save_tiktoken(tokenizer: Tokenizer, path: str | Path) -> None:
    """Writes the ordinary tokens as tiktoken ranks (rank = id); special tokens are not stored."""
    if tokenizer.segmenter != "merges":
        raise ConfigError(
            f"a tiktoken file holds BPE ranks, but this tokeniser uses the {tokenizer.segmenter!r} "
            f"segmenter; tiktoken would not reproduce its ids"
        )
    first_id: dict[bytes, int] = {}
    for token_id, token in enumerate(tokenizer.vocab):
        if not token:
            continue
        if token in first_id:
            raise ConfigError(
                f"tokens {first_id[token]} and {token_id} are both {token!r}; tiktoken ranks need distinct tokens"
            )
        first_id[token] = token_id
    # An empty entry is an unused id: tiktoken keeps it free (a special id, or a gap).
    lines = (f"{base64.b64encode(token).decode('ascii')} {rank}\n" for rank, token in enumerate(tokenizer.vocab) if token)
    write_atomically(path, "".join(lines).encode("ascii"))


def load_tiktoken(
    path: str | Path,
    *,
    pattern: str | None,
    special_tokens: dict[str, int] | list[str] | None = None,
) -> Tokenizer:
    """Reads a tiktoken ranks file; `pattern` (a preset name or regex) and `special_tokens`
    (text -> id, ids after the ranks; or a list, numbered after the ranks) complete the
    tokeniser. Errors name the line."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as error:
        raise FormatError(f"cannot read tiktoken file {path}: {error.strerror}") from None
    tokens: dict[int, bytes] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        shown = [part[:80].decode("utf-8", "replace") for part in parts]
        if len(parts) != 2:
            raise FormatError(f"tiktoken file {path} line {number}: expected 'base64-token rank', found {line[:80].decode('utf-8', 'replace')!r}")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except binascii.Error:
            raise FormatError(f"tiktoken file {path} line {number}: {shown[0]!r} is not valid base64") from None
        try:
            rank = int(parts[1])
        except ValueError:
            raise FormatError(f"tiktoken file {path} line {number}: rank {shown[1]!r} is not an integer") from None
        if rank < 0 or not token:
            raise FormatError(f"tiktoken file {path} line {number}: needs a non-empty token and a rank >= 0")
        if rank in tokens:
            raise FormatError(f"tiktoken file {path} line {number}: rank {rank} appears twice")
        tokens[rank] = token
    if not tokens:
        raise FormatError(f"tiktoken file {path} holds no tokens")
    # Checked before the largest rank sizes the vocabulary: a few missing ranks are unused ids
    # (where an extended vocabulary keeps its base's special ids), many are a broken file.
    largest = max(tokens)
    if largest + 1 - len(tokens) > MAX_UNUSED_IDS:
        missing = next(rank for rank in range(largest + 1) if rank not in tokens)
        raise FormatError(
            f"tiktoken file {path}: {largest + 1 - len(tokens)} ranks below the largest ({largest}) are missing, the "
            f"first {missing}; ranks must be 0..N-1 with at most {MAX_UNUSED_IDS} missing"
        )
    if isinstance(special_tokens, (list, tuple)):
        special_tokens = {text: largest + 1 + index for index, text in enumerate(special_tokens)}
    try:
        return Tokenizer(
            [tokens.get(rank, b"") for rank in range(largest + 1)],
            segmenter="merges",
            pattern=pattern,
            special_tokens=special_tokens,
            algorithm="bpe",
        )
    except PatternError:
        raise
    except ConfigError as error:
        raise FormatError(f"tiktoken file {path}: {error}") from None
