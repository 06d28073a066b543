"""polytok's own tokeniser: a vocabulary of byte strings, a pre-tokenisation pattern, special
tokens, and a segmenter that cuts each pre-token into tokens (segmenters.py); it is saved in the
polytok JSON format (formats/polytok.py). What it shares with loaded tokenisers is in
base_tokenizer.py.

Encoding runs in the Rust core (`polytok._core.Encoder`); this module checks arguments and turns
core errors into `polytok.Error`s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core, checks
from polytok.base_tokenizer import BaseTokenizer, SpecialSet
from polytok.errors import ConfigError, PatternError
from polytok.pretokenize import resolve_pattern
from polytok.segmenters import (
    DEFAULT_ALGORITHM,
    DEFAULT_CACHE_SIZE,
    SEGMENTERS,
    SEGMENTERS_WITH_UNUSED_IDS,
    build_encoder,
)

__all__ = ["BaseTokenizer", "SpecialSet", "Tokenizer"]


class Tokenizer(BaseTokenizer):
    """A byte-level tokeniser: `vocab[i]` is the bytes of ordinary id i; special ids come after.
    An empty entry (merges, viterbi and shortest_path only) is an id no ordinary token has: a
    gap, or a special token's id among the ordinary ones, as an extended vocabulary has them.

    `segmenter` says how a pre-token is cut ("merges", "longest_match", "viterbi",
    "shortest_path"); `merges` (pairs of ids, in order), `scores` and `continuation_marker` are
    the data the segmenters need. `training` and `certificate` are records saved with the file.
    `cache_size` bounds the pre-token cache (distinct pre-tokens per thread; 0: none), which
    changes speed and memory, never ids.
    """

    def __init__(
        self,
        vocab: list[bytes],
        *,
        segmenter: str,
        pattern: str | None,
        special_tokens: dict[str, int] | None = None,
        merges: list[tuple[int, int]] | None = None,
        scores: list[float] | None = None,
        algorithm: str | None = None,
        continuation_marker: str | None = None,
        training: dict | None = None,
        certificate: Any = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ):
        self.vocab: list[bytes] = [bytes(token) for token in vocab]
        self.segmenter = segmenter
        self.pattern = resolve_pattern(pattern)
        self._special_tokens: dict[str, int] = dict(special_tokens or {})
        self.merges: list[tuple[int, int]] | None = (
            None if merges is None else [(int(left), int(right)) for left, right in merges]
        )
        self.scores: list[float] | None = None if scores is None else list(scores)
        self.algorithm = algorithm or DEFAULT_ALGORITHM.get(segmenter, segmenter)
        self.continuation_marker = continuation_marker
        self.training = training
        self.certificate = certificate
        self._check()
        self._index_tokens()
        try:
            self._encoder = build_encoder(self)
        except _core.InvalidPattern as error:
            raise PatternError(f"invalid pre-tokenisation regex {self.pattern!r}: {error.args[0]}") from None
        except ValueError as error:
            raise ConfigError(f"cannot build the {segmenter!r} segmenter: {error}") from None
        self.cache_size = cache_size

    def _check(self) -> None:
        """The value rules of every field; a ConfigError names the field as the polytok file does."""
        if self.segmenter not in SEGMENTERS:
            raise ConfigError(f"unknown segmenter {self.segmenter!r}; known: {sorted(SEGMENTERS)}", "'segmenter'")
        if not self.vocab:
            raise ConfigError("the vocabulary is empty", "'vocab'")
        unused = {token_id for token_id, token in enumerate(self.vocab) if not token}
        if unused and self.segmenter not in SEGMENTERS_WITH_UNUSED_IDS:
            token_id = min(unused)
            raise ConfigError(f"token {token_id} is empty; every token needs at least one byte", f"'vocab'[{token_id}]")
        if unused:
            # The segmenters that allow empty entries need every byte; name the entry that lost one.
            present = {token for token in self.vocab if len(token) == 1}
            missing = next((byte for byte in range(256) if bytes([byte]) not in present), None)
            if missing is not None:
                field = f"'vocab'[{missing}]" if missing in unused else "'vocab'"
                raise ConfigError(f"token {missing} is empty, and byte 0x{missing:02x} is no other token; the "
                                  f"{self.segmenter!r} segmenter needs all 256 single bytes", field)
        seen_ids: dict[int, str] = {}
        # Ids are dense: the core's id table has an entry for every id up to the largest, and at
        # most MAX_UNUSED_IDS of them may be no token (empty vocabulary entries included).
        limit = len(self.vocab) - len(unused) + len(self._special_tokens) + _core.MAX_UNUSED_IDS
        for text, token_id in self._special_tokens.items():
            field = f"'special_tokens'[{text!r}]"
            if not isinstance(text, str) or not text:
                raise ConfigError(f"special token {text!r} must be a non-empty str", field)
            if not checks.is_integer(token_id) or token_id < 0 or (token_id < len(self.vocab) and token_id not in unused):
                raise ConfigError(
                    f"special token {text!r} has id {token_id!r}; special ids must be integers after the "
                    f"{len(self.vocab)} ordinary ids, or ids whose vocabulary entry is empty (unused)", field
                )
            if token_id in seen_ids:
                raise ConfigError(f"special tokens {seen_ids[token_id]!r} and {text!r} share id {token_id}", field)
            if token_id >= limit:
                raise ConfigError(
                    f"special token {text!r} has id {token_id}; ids must be dense: at most "
                    f"{_core.MAX_UNUSED_IDS} ids below the largest may be no token, so every id is below {limit}", field
                )
            seen_ids[token_id] = text
        if len(unused) > _core.MAX_UNUSED_IDS:
            raise ConfigError(
                f"{len(unused)} vocabulary entries are empty (unused ids); at most {_core.MAX_UNUSED_IDS} may be", "'vocab'"
            )
        if self.scores is not None:
            if len(self.scores) != len(self.vocab):
                raise ConfigError(f"{len(self.scores)} scores for {len(self.vocab)} tokens", "'scores'")
            for index, score in enumerate(self.scores):
                if not checks.is_number(score):
                    raise ConfigError(f"score {index} is {score!r}; scores must be finite numbers", f"'scores'[{index}]")
            self.scores = [float(score) for score in self.scores]
        if self.merges is not None:
            for index, (left, right) in enumerate(self.merges):
                if not (0 <= left < len(self.vocab) and 0 <= right < len(self.vocab)):
                    raise ConfigError(f"merge {index} ({left}, {right}) names an id outside 0..{len(self.vocab) - 1}",
                                      f"'merges'[{index}]")
                if left in unused or right in unused:
                    raise ConfigError(f"merge {index} ({left}, {right}) names an unused (empty) id", f"'merges'[{index}]")

    # ---- the encoding core (the public methods are BaseTokenizer's) -------------------------

    def _make_policy(self, allowed: set[str], disallowed: set[str]) -> Any:
        if not allowed and not disallowed:
            return None  # all special-token text is ordinary
        return self._encoder.special_policy(
            [text.encode("utf-8") for text in sorted(allowed)],
            [text.encode("utf-8") for text in sorted(disallowed)],
        )

    def _encode_core(self, text: str | bytes, policy: Any) -> list[int]:
        return self._encoder.encode(text, policy)

    def _encode_numpy_core(self, text: str | bytes, policy: Any) -> np.ndarray:
        return self._encoder.encode_to_numpy(text, policy)

    def _encode_batch_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> list[list[int]]:
        return self._encoder.encode_batch(texts, policy, threads)

    def _encode_batch_numpy_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
        return self._encoder.encode_batch_to_numpy(texts, policy, threads)

    def _count_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> np.ndarray:
        return self._encoder.count_batch(texts, policy, threads)

    def _histogram_core(self, texts: list[str | bytes], threads: int | None) -> np.ndarray:
        return self._encoder.token_histogram(texts, threads)

    def _offers(self, ability: str) -> bool:
        return self._encoder.offers(ability)

    def __reduce__(self) -> tuple:
        # Pickled as its file record (the Rust encoder is rebuilt), e.g. for multiprocessing.
        from polytok.formats.polytok import from_record

        return (from_record, (self.to_dict(), "pickled tokenizer"))

    def __repr__(self) -> str:
        return (
            f"Tokenizer(algorithm={self.algorithm!r}, segmenter={self.segmenter!r}, "
            f"vocab_size={self.vocab_size}, special_tokens={len(self._special_tokens)})"
        )

    # ---- files: the writers live in polytok.formats, which imports this module -------------

    def to_dict(self) -> dict[str, Any]:
        """The polytok file record, in the file's field order."""
        from polytok.formats.polytok import record

        return record(self)

    def save(self, path: str | Path) -> None:
        """Writes the polytok JSON file, atomically and byte-identically for equal tokenisers."""
        from polytok.formats.polytok import save_polytok

        save_polytok(self, path)

    def save_tiktoken(self, path: str | Path) -> None:
        """Writes tiktoken's ranks file (base64 token, space, rank per line); BPE only."""
        from polytok.formats.tiktoken import save_tiktoken

        save_tiktoken(self, path)

    def save_huggingface(self, path: str | Path) -> None:
        """Writes a HF `tokenizer.json` that encodes to the same ids (BPE, WordPiece, Unigram)."""
        from polytok.formats.huggingface import save_huggingface

        save_huggingface(self, path)

    @classmethod
    def from_dict(cls, record: Any, source: str = "tokenizer record") -> "Tokenizer":
        """Checks every field of a polytok record and builds the tokeniser; FormatError names the field."""
        from polytok.formats.polytok import from_record

        return from_record(record, source)
