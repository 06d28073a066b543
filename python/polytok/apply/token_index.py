"""The lookup tables that healing, streaming, offsets and chunking share, built once per
tokeniser from its public API and cached: the bytes each id stands for in the text, their
lengths as a numpy array (offsets are cumulative sums of it), and every ordinary token in byte
order, where the tokens that start with given bytes are one contiguous run (a trie flattened
into a sorted array: each subtree is a range, found by two binary searches in the core).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from polytok import checks
from polytok import _core
from polytok.errors import DecodeError

if TYPE_CHECKING:
    from polytok.base_tokenizer import BaseTokenizer

_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class TokenIndex:
    """Per-id bytes and lengths of one tokeniser, and its ordinary tokens sorted by bytes."""

    def __init__(self, tokenizer: BaseTokenizer):
        size = tokenizer.n_vocab
        special_ids = set(tokenizer.special_tokens.values())
        ordinary = len(tokenizer.vocab)
        # The bytes an id decodes to: `vocab` itself, except where the segmenter spells tokens
        # differently from their text (WordPiece's continuation marker).
        if getattr(tokenizer, "continuation_marker", None):
            texts: list[bytes | None] = [tokenizer.decode_bytes([token_id]) for token_id in range(ordinary)]
        else:
            texts = [token or None for token in tokenizer.vocab]  # an empty entry is an unused id
        texts.extend([None] * (size - ordinary))
        for text, token_id in tokenizer.special_tokens.items():
            texts[token_id] = text.encode("utf-8")
        self.size = size
        #: id -> the bytes it stands for in the text; None for ids that are no token.
        self.bytes_of: list[bytes | None] = texts
        #: id -> byte length (int64), 0 for ids that are no token.
        self.lengths = np.array([0 if text is None else len(text) for text in texts], dtype=np.int64)
        self._lengths = _core.TokenLengths(self.lengths.tolist())
        #: id -> its bytes as text when they are whole UTF-8 characters, else None.
        self.texts: list[str | None] = [_whole_text(text) for text in texts]
        #: whether each id's bytes start with a UTF-8 continuation byte (a cut before it would
        #: split a character).
        self.continues_character: list[bool] = [text is not None and (text[0] & 0xC0) == 0x80 for text in texts]
        #: whether each id is a token at all.
        self.known = np.array([text is not None for text in texts], dtype=bool)
        #: whether every id below `size` is a token (no gaps among the special ids).
        self.all_known = bool(self.known.all())
        self.special_ids = frozenset(special_ids)
        order = sorted(
            (text, token_id) for token_id, text in enumerate(texts[:ordinary]) if text is not None and token_id not in special_ids
        )
        # the two binary searches run in the core, on the tokens stored back to back
        self._sorted = _core.SortedTokens([text for text, _ in order])
        self._sorted_ids = np.array([token_id for _, token_id in order], dtype=np.int64)
        self._sorted_ids.flags.writeable = False
        # bytes -> every ordinary id with them (WordPiece spells a byte twice: word-initial and
        # continuation)
        self._ordinary_ids: dict[bytes, list[int]] = {}
        for token_id, text in enumerate(texts[:ordinary]):
            self._ordinary_ids.setdefault(text, []).append(token_id)

    def check_ids(self, ids: np.ndarray, what: str = "ids") -> None:
        """DecodeError naming the first id in `ids` that is no token."""
        bad = (ids < 0) | (ids >= self.size)
        if not bad.any():
            bad = ~self.known[ids]
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise DecodeError(f"{what}: id {int(ids[position])} at position {position} is not a token of this tokeniser")

    def offsets(self, ids: list[int]) -> np.ndarray:
        """(start, end) byte offsets (int64, shape (n, 2)) of the ids of a list laid end to end,
        in one core call; DecodeError naming the first id that is no token."""
        try:
            return self._lengths.offsets(ids)
        except ValueError:
            self.check_ids(as_id_array(ids), "ids")
            raise

    def starting_with(self, prefix: bytes) -> np.ndarray:
        """Ids of the ordinary tokens whose bytes start with `prefix`, in the order of their
        bytes: a read-only view of the sorted table, so the cost does not grow with the count."""
        low, high = self._sorted.range(prefix)
        return self._sorted_ids[low:high]

    def has_token_starting_with(self, prefix: bytes) -> bool:
        """Whether some ordinary token's bytes start with `prefix`."""
        low, high = self._sorted.range(prefix)
        return high > low

    def proper_prefixes_of(self, data: bytes) -> list[int]:
        """Ids of the ordinary tokens that are a proper, non-empty prefix of `data`, shortest first."""
        return [token_id for length in range(1, len(data)) for token_id in self._ordinary_ids.get(data[:length], ())]


def _whole_text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def token_index(tokenizer: BaseTokenizer) -> TokenIndex:
    """The cached TokenIndex of `tokenizer` (tokenisers are immutable once built)."""
    index = _INDEXES.get(tokenizer)
    if index is None:
        index = TokenIndex(tokenizer)
        _INDEXES[tokenizer] = index
    return index


def as_id_array(ids: object, what: str = "ids") -> np.ndarray:
    """`ids` (a list, tuple, iterable or numpy array of integers) as a 1-D int64 array."""
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise DecodeError(f"{what} must be integers, not a numpy array of {ids.dtype}")
        return ids.astype(np.int64, copy=False).reshape(-1)
    values = list(ids)  # type: ignore[call-overload]
    for position, value in enumerate(values):
        if not checks.is_integer(value):
            raise DecodeError(f"{what}: {value!r} at position {position} is not an integer id")
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise DecodeError(f"{what}: an id is out of the 64-bit range") from None
