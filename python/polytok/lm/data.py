"""What the language models read: a corpus cut into windows of at most `context_bytes` bytes, at
the same byte offsets for every tokeniser, and each window's token ids under one tokeniser.

The context is measured in bytes so that every tokeniser's model sees the same text: a window is
encoded on its own (its tokens never reach into the next window), starts with the
beginning-of-window id, and every one of its tokens is predicted, so the validation loss covers
every validation byte exactly once. Windows end after a line break or before a space where one
falls in the last part of the window, so that words are rarely cut; otherwise at a character
boundary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polytok.corpus import iter_documents
from polytok.errors import ConfigError, CorpusError, EncodeError
from polytok.metrics import TokenizerView

#: Ids of the targets that padding fills and the loss ignores.
IGNORED = -1

# A window may end this far before its limit to end at a line break or a space.
WORD_SLACK_FRACTION = 0.25


def read_corpus(corpus: Any, what: str, reader_options: dict[str, Any]) -> bytes:
    """The documents of `corpus` as one UTF-8 buffer, each ending in a line break."""
    if reader_options.get("errors") == "bytes":
        raise ConfigError(f'the {what} corpus must be read as text: errors="strict" or "replace", not "bytes"')
    parts: list[bytes] = []
    for document in iter_documents(corpus, **reader_options):
        if isinstance(document, str):
            data = document.encode("utf-8")
        else:
            data = bytes(document)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusError(f"a document of the {what} corpus is not UTF-8: invalid byte at offset "
                                  f"{error.start}") from None
        if data:
            parts.append(data if data.endswith(b"\n") else data + b"\n")
    text = b"".join(parts)
    if not text:
        raise CorpusError(f"the {what} corpus holds no text")
    return text


def window_offsets(text: bytes, context_bytes: int) -> np.ndarray:
    """Start offsets of the windows of `text`, then len(text): windows[i] = text[o[i]:o[i+1]]."""
    slack = max(1, int(context_bytes * WORD_SLACK_FRACTION))
    offsets = [0]
    start = 0
    while len(text) - start > context_bytes:
        end = start + context_bytes
        after_line = text.rfind(b"\n", end - slack, end) + 1
        before_space = text.rfind(b" ", end - slack + 1, end + 1)
        cut = max(after_line, before_space)
        if cut <= start:
            cut = end
            while text[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: back to the character's start
                cut -= 1
        offsets.append(cut)
        start = cut
    offsets.append(len(text))
    return np.asarray(offsets, dtype=np.int64)


@dataclass
class Windows:
    """The token ids of every window of a text under one tokeniser, flat: window i's ids are
    ids[starts[i]:starts[i + 1]], and it covers window_bytes[i] bytes of text; `bos` is the
    beginning-of-window id (one past the tokeniser's largest id)."""

    ids: np.ndarray
    starts: np.ndarray
    window_bytes: np.ndarray
    bos: int

    def __len__(self) -> int:
        return len(self.window_bytes)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens in each window."""
        return np.diff(self.starts)

    @property
    def tokens(self) -> int:
        """Tokens in all windows."""
        return int(self.starts[-1])

    @property
    def bytes(self) -> int:
        """Bytes of text in all windows."""
        return int(self.window_bytes.sum())

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets (int64, windows × longest window's tokens) of the windows at
        `indices`: inputs are `bos` then the ids but the last; targets are the ids, padded with
        IGNORED."""
        lengths = self.starts[indices + 1] - self.starts[indices]
        width = int(lengths.max())
        targets = np.full((len(indices), width), IGNORED, dtype=np.int64)
        for row, (index, length) in enumerate(zip(indices, lengths)):
            targets[row, :length] = self.ids[self.starts[index]: self.starts[index] + length]
        inputs = np.empty_like(targets)
        inputs[:, 0] = self.bos
        inputs[:, 1:] = np.where(targets[:, :-1] == IGNORED, self.bos, targets[:, :-1])
        return inputs, targets


def encode_windows(tokenizer: Any, text: bytes, offsets: np.ndarray, num_threads: int | None, what: str) -> Windows:
    """Each window of `text` encoded on its own by `tokenizer`; the beginning-of-window id is its
    vocabulary size."""
    view = TokenizerView(tokenizer)
    pieces = [text[start:end].decode("utf-8") for start, end in zip(offsets[:-1], offsets[1:])]
    encoded = view.encode_batch(pieces, num_threads)
    lengths = np.fromiter((len(ids) for ids in encoded), dtype=np.int64, count=len(encoded))
    if lengths.min() == 0:
        raise EncodeError(f"the tokeniser encoded a window of the {what} text as no tokens")
    ids = np.concatenate([np.asarray(window, dtype=np.int64) for window in encoded])
    if ids.min() < 0 or ids.max() >= view.id_limit:
        raise EncodeError(f"the tokeniser returned ids outside 0..{view.id_limit - 1} on the {what} text")
    starts = np.concatenate(([0], np.cumsum(lengths)))
    return Windows(ids=ids, starts=starts, window_bytes=np.diff(offsets), bos=view.id_limit)
