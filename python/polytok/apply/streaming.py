"""Streaming decode: ids arrive one at a time (a model generating) and text leaves as soon as it
is whole characters. A token may end inside a character (byte-level tokens split emoji and CJK
characters), so `step` returns only the complete UTF-8 characters and keeps the bytes of an
unfinished one until the ids that finish it arrive; `flush` ends the stream and returns what is
left, an unfinished character as U+FFFD, exactly as `decode` does.

For polytok's own tokenisers the text is the ids' bytes, and a stream is an incremental UTF-8
decoder fed each token's bytes, in the core (src/bindings/streaming.rs; a token of whole
characters, while nothing is held, returns its text cached there): the steps plus the flush
equal `decode(ids)` for every id sequence. A loaded tokeniser decodes through its file's decoder; its stream decodes the ids not
yet emitted behind the stream's first ids and emits what they add, which equals `decode(ids)`
wherever the decoder's text for earlier ids does not change when later ids follow: always,
except that a Llama-style ByteFallback decoder turns every byte of a run that is not valid UTF-8
into U+FFFD, characters already emitted included (docs/usage.md).
"""
from __future__ import annotations

import operator
import os
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from polytok import _core, checks
from polytok.errors import DecodeError
from polytok.apply.token_index import token_index

if TYPE_CHECKING:
    from polytok.base_tokenizer import BaseTokenizer

_REPLACEMENT = "\ufffd"


def _bad_id(token_id: Any, size: int) -> DecodeError:
    """The DecodeError for a step's id that is not an integer or not a token."""
    try:
        integer = not isinstance(token_id, bool) and operator.index(token_id) is not None
    except TypeError:
        integer = False
    if not integer:
        return DecodeError(f"decode stream: {token_id!r} is not an integer id")
    return DecodeError(f"decode stream: id {token_id} is not a token of this tokeniser (ids are below {size})")


class WindowDecodeStream:
    """A stream through a loaded tokeniser's own decoder. It decodes the ids not yet emitted
    behind the stream's first ids up to its first text (which take the decoder past its
    start-of-text rules, e.g. dropping a leading space) and emits what they add to that text
    once it does not end in an unfinished character."""

    def __init__(self, tokenizer: BaseTokenizer):
        self._tokenizer = tokenizer
        index = token_index(tokenizer)
        self._size = index.size
        self._known = index.known
        self._reset()

    def _reset(self) -> None:
        self._anchor: list[int] = []  # the stream's first ids up to its first text
        self._held: list[int] = []  # the ids not yet emitted
        self._anchor_text = ""

    def step(self, token_id: int) -> str:
        """The text `token_id` adds once it is whole characters (possibly ""); DecodeError for
        an id that is no token."""
        try:
            value = operator.index(token_id)
        except TypeError:
            raise _bad_id(token_id, self._size) from None
        if isinstance(token_id, bool) or not 0 <= value < self._size or not self._known[value]:
            raise _bad_id(token_id, self._size)
        self._held.append(value)
        text = self._tokenizer.decode(self._anchor + self._held)
        if len(text) <= len(self._anchor_text) or text.endswith(_REPLACEMENT) or not text.startswith(self._anchor_text):
            return ""
        if not self._anchor:
            self._anchor, self._anchor_text = self._held, text
            self._held = []
            return text
        self._held = []
        return text[len(self._anchor_text) :]

    def flush(self) -> str:
        """What the held ids add, U+FFFD for an unfinished character; the stream starts anew."""
        text = self._tokenizer.decode(self._anchor + self._held) if self._held else self._anchor_text
        shared = len(os.path.commonprefix([text, self._anchor_text]))
        self._reset()
        return text[shared:]


class BatchDecodeStream:
    """Several streams stepped together: `step(ids)` takes one id per stream and returns one
    text per stream; `flush()` returns each stream's rest."""

    def __init__(self, tokenizer: BaseTokenizer, size: int):
        checks.integer("batch_size", size)
        self._streams = [decode_stream(tokenizer) for _ in range(size)]

    def step(self, ids: Sequence[int]) -> list[str]:
        """One id per stream -> the text each completes."""
        ids = list(ids)
        if len(ids) != len(self._streams):
            raise DecodeError(f"decode stream batch: got {len(ids)} ids for {len(self._streams)} streams")
        return [stream.step(token_id) for stream, token_id in zip(self._streams, ids)]

    def flush(self) -> list[str]:
        """Each stream's held text; every stream starts anew."""
        return [stream.flush() for stream in self._streams]


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def decode_stream(tokenizer: BaseTokenizer, batch_size: int | None = None) -> Any:
    """A stream for `tokenizer` (a batch of `batch_size` streams when given): the core's
    `DecodeStream` for polytok's own tokenisers, a `WindowDecodeStream` for loaded ones."""
    if batch_size is not None:
        return BatchDecodeStream(tokenizer, batch_size)
    if hasattr(tokenizer, "pipeline"):
        return WindowDecodeStream(tokenizer)
    table = _TABLES.get(tokenizer)
    if table is None:
        table = _TABLES[tokenizer] = _core.StreamTable(token_index(tokenizer).bytes_of, DecodeError)
    return table.stream()
