"""WordCounts: the unique pre-tokens of a corpus with their counts, the sufficient statistic
that every trainer, the LP and the corpus metrics read."""
from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np


class WordCounts:
    """Unique pre-tokens (bytes), sorted bytewise, with 64-bit counts, stored as flat arrays:
    `data` holds the words back to back, `offsets` (int64, n+1) their bounds, `counts` (uint64)."""

    def __init__(self, data: bytes, offsets: np.ndarray, counts: np.ndarray, pattern: str | None = None):
        self.data = data
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.uint64)
        self.pattern = pattern

    @classmethod
    def from_dict(cls, counts: Mapping[bytes, int], pattern: str | None = None) -> "WordCounts":
        """Build from a {pre-token: count} mapping (small corpora, tests)."""
        words = sorted(w for w, c in counts.items() if c > 0 and len(w) > 0)
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum([len(w) for w in words], out=offsets[1:])
        return cls(b"".join(words), offsets, np.array([counts[w] for w in words], dtype=np.uint64), pattern)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        for i in range(len(self)):
            yield self.data[self.offsets[i] : self.offsets[i + 1]], int(self.counts[i])

    def to_dict(self) -> dict[bytes, int]:
        return dict(iter(self))
