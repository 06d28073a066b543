"""Truncation, chunking and padding: fitting encodings into a model's context.

All three cut an encoding only where a token ends on a character boundary, so no cut ever
splits a character: the kept tokens decode to whole characters. Truncation (and so padding)
looks only at the tokens next to the cut (a token whose bytes start with a UTF-8 continuation
byte cannot start a cut) and applies to every tokeniser; chunking reports each
chunk's span of the input, so it needs `encode_with_offsets` and tokens that spell the input.

- `encode_truncated(text, max_tokens)`: the first (or last) at most `max_tokens` tokens.
- `chunk(text, max_tokens, overlap)`: consecutive windows of at most `max_tokens` tokens, each
  starting at most `overlap` tokens before the previous one ends; each chunk's ids are a slice of
  `encode(text)` and decode to its span of the text, and the spans cover the text.
- `encode_batch_padded(texts)`: one (batch, length) id matrix with an attention mask, padded on
  the left or the right.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np

from polytok import checks
from polytok.errors import ConfigError, EncodeError
from polytok.apply.offsets import character_starts, encode_with_offsets, input_bytes
from polytok.apply.token_index import token_index

if TYPE_CHECKING:
    from collections.abc import Iterable

    from polytok.base_tokenizer import BaseTokenizer, SpecialSet

Side = Literal["left", "right"]

# Special tokens whose text says "padding", in the spellings common tokenisers use.
PAD_TOKENS = ("<pad>", "<|pad|>", "[PAD]", "<|padding|>", "<PAD>")


def check_max_tokens(max_tokens: int, name: str = "max_tokens") -> int:
    """`max_tokens` if it is an integer of at least 1; ConfigError otherwise."""
    return checks.integer(name, max_tokens)


def _check_side(side: str, name: str) -> None:
    if side not in ("left", "right"):
        raise ConfigError(f"{name} must be 'left' or 'right', not {side!r}")


def cut_points(data: bytes, offsets: np.ndarray) -> np.ndarray:
    """Token indices 0..n where the encoding may be cut: 0, n, and every k whose token k - 1 ends
    on a character boundary of `data` (a byte that does not continue a UTF-8 sequence)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    boundary = np.ones(len(raw) + 1, dtype=bool)
    boundary[:-1] = (raw & 0xC0) != 0x80
    ends = offsets[:, 1]
    allowed = np.empty(len(ends) + 1, dtype=bool)
    allowed[0] = True
    allowed[1:] = boundary[ends]
    allowed[-1] = True
    return np.flatnonzero(allowed)


def encode_truncated(
    tokenizer: BaseTokenizer,
    text: str | bytes,
    max_tokens: int,
    *,
    side: Side = "right",
    allowed_special: SpecialSet = frozenset(),
    disallowed_special: SpecialSet = "all",
) -> list[int]:
    """`encode(text)` cut to at most `max_tokens` tokens without splitting a character: the first
    tokens (side="right" drops the end) or the last (side="left" drops the start). The cut is
    found in the tokens' own bytes, so it applies to loaded tokenisers too (whose tokens spell
    the normalised text), and costs nothing beyond `encode`."""
    max_tokens = check_max_tokens(max_tokens)
    _check_side(side, "side")
    ids = tokenizer.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    return truncate(tokenizer, ids, max_tokens, side)


def truncate(tokenizer: BaseTokenizer, ids: list[int], max_tokens: int, side: Side = "right") -> list[int]:
    """`ids` cut to at most `max_tokens` without splitting a character: a cut before token k
    splits one exactly when token k's bytes start with a UTF-8 continuation byte, so the cut
    moves back (or, keeping the end, forward) past such tokens."""
    if len(ids) <= max_tokens:
        return ids
    continues = token_index(tokenizer).continues_character
    if side == "right":
        end = max_tokens
        while end > 0 and continues[ids[end]]:
            end -= 1
        return ids[:end]
    start = len(ids) - max_tokens
    while start < len(ids) and continues[ids[start]]:
        start += 1
    return ids[start:]


@dataclass(frozen=True)
class Chunk:
    """One window of an encoding: its ids, where they start in `encode(text)`, and the span of
    the input they decode to (`start`, `end` in characters for str input, bytes for bytes
    input), with that text."""

    ids: list[int]
    first_token: int
    start: int
    end: int
    text: str | bytes


def chunk(
    tokenizer: BaseTokenizer,
    text: str | bytes,
    max_tokens: int,
    overlap: int = 0,
    *,
    allowed_special: SpecialSet = frozenset(),
    disallowed_special: SpecialSet = "all",
) -> list[Chunk]:
    """`encode(text)` as windows of at most `max_tokens` tokens, each starting at most `overlap`
    tokens before the previous one ends (fewer where a character would be split). EncodeError
    when one character alone takes more than `max_tokens` tokens."""
    max_tokens = check_max_tokens(max_tokens)
    overlap = checks.integer("overlap", overlap, 0)
    if overlap >= max_tokens:
        raise ConfigError(f"overlap ({overlap}) must be below max_tokens ({max_tokens}), or no chunk would advance")
    data = input_bytes(text)
    ids, offsets = encode_with_offsets(tokenizer, text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    if not ids:
        return []
    if hasattr(tokenizer, "pipeline") and tokenizer.decode_bytes(ids) != data:
        raise ConfigError(
            f"chunk needs tokens that spell the input, so that each chunk decodes to its span; this "
            f"{tokenizer.pipeline.kind} file's pipeline rewrites the text (encode_with_offsets maps its tokens back)"
        )
    points = cut_points(data, offsets)
    positions = character_starts(data) if isinstance(text, str) else None
    chunks = []
    start = 0
    total = len(ids)
    while True:
        end = int(points[np.searchsorted(points, start + max_tokens, side="right") - 1])
        if end <= start:
            byte = int(offsets[start, 0])
            raise EncodeError(
                f"the character at byte {byte} of the text takes more than max_tokens={max_tokens} tokens; "
                "a chunk cannot hold it without splitting it"
            )
        first, last = int(offsets[start, 0]), int(offsets[end - 1, 1])
        if positions is not None:
            span = (int(positions[first]), int(positions[last]))
            piece: str | bytes = text[span[0] : span[1]]  # type: ignore[index]
        else:
            span, piece = (first, last), data[first:last]
        chunks.append(Chunk(ids[start:end], start, span[0], span[1], piece))
        if end == total:
            return chunks
        # The next window starts on a cut point at most `overlap` tokens back, the earliest one
        # after this window's start whose window reaches past this window's end (a character of
        # many tokens can stop a window short; then the overlap shrinks rather than the step).
        at = int(np.searchsorted(points, max(end - overlap, start + 1), side="left"))
        while True:
            following = int(points[at])
            if following >= end or points[np.searchsorted(points, following + max_tokens, side="right") - 1] > end:
                break
            at += 1
        start = following


class PaddedBatch(NamedTuple):
    """A padded batch: `ids` (int64, shape (batch, length)) and `attention_mask` (uint8, 1 on
    real tokens, 0 on padding)."""

    ids: np.ndarray
    attention_mask: np.ndarray


def pad_id_of(tokenizer: BaseTokenizer) -> int:
    """The id of the tokeniser's padding token (a special or added token spelled like one of
    PAD_TOKENS); ConfigError when it has none."""
    specials = tokenizer.special_tokens
    for text in PAD_TOKENS:
        if text in specials:
            return specials[text]
    for text in PAD_TOKENS:
        try:
            return tokenizer.token_id(text)
        except EncodeError:
            continue
    raise ConfigError(
        f"this tokeniser has no padding token (none of {', '.join(PAD_TOKENS)}); pass pad_id=... "
        "(the attention mask marks padding, so any id works)"
    )


def encode_batch_padded(
    tokenizer: BaseTokenizer,
    texts: Iterable[str | bytes],
    *,
    max_tokens: int | None = None,
    pad_id: int | None = None,
    padding_side: Side = "right",
    truncation_side: Side = "right",
    pad_to_multiple_of: int | None = None,
    num_threads: int | None = None,
    allowed_special: SpecialSet = frozenset(),
    disallowed_special: SpecialSet = "all",
) -> PaddedBatch:
    """The encodings of `texts` as one padded matrix with its attention mask. `max_tokens`
    truncates each text (never splitting a character, see `encode_truncated`); the length is the
    longest encoding, rounded up to `pad_to_multiple_of`."""
    texts = tokenizer._text_list(texts, "encode_batch_padded")
    _check_side(padding_side, "padding_side")
    _check_side(truncation_side, "truncation_side")
    if max_tokens is not None:
        max_tokens = check_max_tokens(max_tokens)
    if pad_to_multiple_of is not None:
        pad_to_multiple_of = check_max_tokens(pad_to_multiple_of, "pad_to_multiple_of")
    if pad_id is None:
        pad_id = pad_id_of(tokenizer)
    elif not checks.is_integer(pad_id) or not 0 <= pad_id < tokenizer.n_vocab:
        raise ConfigError(f"pad_id must be an id of this tokeniser (0..{tokenizer.n_vocab - 1}), not {pad_id!r}")
    encoded = tokenizer.encode_batch(texts, num_threads, allowed_special=allowed_special, disallowed_special=disallowed_special)
    if max_tokens is not None:
        encoded = [truncate(tokenizer, ids, max_tokens, truncation_side) for ids in encoded]
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    width = int(lengths.max()) if len(lengths) else 0
    if pad_to_multiple_of is not None:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    columns = np.arange(width)
    if padding_side == "right":
        mask = columns[None, :] < lengths[:, None]
    else:
        mask = columns[None, :] >= (width - lengths)[:, None]
    matrix = np.full((len(encoded), width), pad_id, dtype=np.int64)
    # row-major order of the mask's True cells is the ids back to back, text after text
    matrix[mask] = np.fromiter((token for ids in encoded for token in ids), dtype=np.int64, count=int(lengths.sum()))
    return PaddedBatch(matrix, mask.astype(np.uint8))
