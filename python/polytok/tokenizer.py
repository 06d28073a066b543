"""polytok's own tokeniser: a vocabulary of byte strings, a pre-tokenisation pattern, special
tokens, and a segmenter that cuts each pre-token into tokens (segmenters.py); it is saved in the
polytok JSON format (formats/polytok.py). What it shares with loaded tokenisers is in
base_tokenizer.py.

Encoding runs in the Rust core (`polytok._core.Encoder`); this module checks arguments and turns
core errors into `polytok.Error`s.
"""
from __future__ import annotations

import math
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core
from polytok.base_tokenizer import BaseTokenizer, SpecialSet, disallowed_error
from polytok.errors import ConfigError, PatternError
from polytok.pretokenize import resolve_pattern
from polytok.segmenters import DEFAULT_ALGORITHM, DEFAULT_CACHE_SIZE, SEGMENTERS, build_encoder

__all__ = ["BaseTokenizer", "SpecialSet", "Tokenizer"]


class Tokenizer(BaseTokenizer):
    """A byte-level tokeniser: `vocab[i]` is the bytes of ordinary id i; special ids come after.

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
        self.scores: list[float] | None = None if scores is None else [float(s) for s in scores]
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
        if self.segmenter not in SEGMENTERS:
            raise ConfigError(f"unknown segmenter {self.segmenter!r}; known: {sorted(SEGMENTERS)}")
        if not self.vocab:
            raise ConfigError("the vocabulary is empty")
        for token_id, token in enumerate(self.vocab):
            if not token:
                raise ConfigError(f"token {token_id} is empty; every token needs at least one byte")
        seen_ids: dict[int, str] = {}
        for text, token_id in self._special_tokens.items():
            if not isinstance(text, str) or not text:
                raise ConfigError(f"special token {text!r} must be a non-empty str")
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < len(self.vocab):
                raise ConfigError(
                    f"special token {text!r} has id {token_id!r}; special ids must be integers "
                    f"after the {len(self.vocab)} ordinary ids"
                )
            if token_id in seen_ids:
                raise ConfigError(f"special tokens {seen_ids[token_id]!r} and {text!r} share id {token_id}")
            seen_ids[token_id] = text
        # Ids are dense: the core's id table has an entry for every id up to the largest.
        limit = len(self.vocab) + len(self._special_tokens) + _core.MAX_UNUSED_IDS
        for text, token_id in self._special_tokens.items():
            if token_id >= limit:
                raise ConfigError(
                    f"special token {text!r} has id {token_id}; ids must be dense: the special ids follow the "
                    f"{len(self.vocab)} ordinary ids with at most {_core.MAX_UNUSED_IDS} unused ids in all, "
                    f"so every id is below {limit}"
                )
        if self.scores is not None:
            if len(self.scores) != len(self.vocab):
                raise ConfigError(f"{len(self.scores)} scores for {len(self.vocab)} tokens")
            if not all(math.isfinite(score) for score in self.scores):
                raise ConfigError("scores must be finite numbers")
        if self.merges is not None:
            for index, (left, right) in enumerate(self.merges):
                if not (0 <= left < len(self.vocab) and 0 <= right < len(self.vocab)):
                    raise ConfigError(f"merge {index} ({left}, {right}) names an id outside 0..{len(self.vocab) - 1}")

    # ---- encoding -------------------------------------------------------------------------

    def encode(
        self,
        text: str | bytes,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        sample: bool = False,
        alpha: float = 0.1,
        dropout: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> list[int]:
        """The ids of `text`. Special-token text raises unless allowed (tiktoken's semantics).

        Subword regularisation: `sample=True` (viterbi tokenisers) draws each pre-token's cut with
        probability ∝ P(cut)^alpha; `dropout=p` (merges tokenisers) skips every applicable merge
        with probability p. The same `seed` gives the same ids; seed None draws a fresh one.
        `max_tokens` keeps at most that many of the first ids without splitting a character
        (what `encode_truncated` keeps).
        """
        if max_tokens is not None:
            return self._truncated(self.encode, text, max_tokens, allowed_special=allowed_special,
                                   disallowed_special=disallowed_special, sample=sample, alpha=alpha,
                                   dropout=dropout, seed=seed)
        try:  # arguments seen before: one lookup, as this runs once per text
            policy = self._policies[allowed_special, disallowed_special]
        except (KeyError, TypeError):
            policy = self._policy(allowed_special, disallowed_special)
        if not sample and dropout is None:
            try:
                return self._encoder.encode(text, policy)
            except _core.SpecialTokenFound as found:
                raise disallowed_error(found, False) from None
        randomness = self._randomness(sample, alpha, dropout, seed)
        return self._with_policy(self._encoder.encode_sampled, text, policy, *randomness, batch=False)

    def encode_nbest(
        self,
        text: str | bytes,
        n: int,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[tuple[list[int], float]]:
        """The `n` best distinct segmentations of `text` with their log-probabilities, best first
        (viterbi tokenisers); the first is `encode(text)`. Special tokens as in `encode`."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"n must be a positive integer, not {n!r}")
        if not self._encoder.offers("nbest"):
            raise ConfigError(
                f"encode_nbest needs a tokeniser that scores its segmentations (segmenter 'viterbi'); "
                f"this one uses the {self.segmenter!r} segmenter{self._supported_randomness()}"
            )
        policy = self._policy(allowed_special, disallowed_special)
        return self._with_policy(self._encoder.encode_nbest, text, policy, n, batch=False)

    def _randomness(self, sample: bool, alpha: float, dropout: float | None, seed: int | None) -> tuple[str, float, int] | None:
        """The core's (kind, strength, seed) for a randomised encode, or None for the plain one."""
        if not sample and dropout is None:
            return None
        if sample and dropout is not None:
            raise ConfigError("choose one of sample=True (Unigram sampling) and dropout=p (BPE-dropout), not both")
        kind, strength = ("sample", alpha) if sample else ("dropout", dropout)
        if not self._encoder.offers(kind):
            wanted = "sample=True needs segmenter 'viterbi'" if sample else "dropout=p needs segmenter 'merges'"
            raise ConfigError(f"{wanted}; this tokeniser uses the {self.segmenter!r} segmenter{self._supported_randomness()}")
        if isinstance(strength, bool) or not isinstance(strength, (int, float)) or not math.isfinite(strength):
            raise ConfigError(f"{'alpha' if sample else 'dropout'} must be a finite number, not {strength!r}")
        if sample and strength < 0:
            raise ConfigError(f"alpha must be at least 0 (0 samples every segmentation alike), not {strength!r}")
        if not sample and not 0 <= strength <= 1:
            raise ConfigError(f"dropout must be a probability in [0, 1], not {strength!r}")
        if seed is None:
            seed = secrets.randbits(64)
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ConfigError(f"seed must be an integer in [0, 2**64) or None, not {seed!r}")
        return kind, float(strength), seed

    def _supported_randomness(self) -> str:
        """The end of an error message: which of sampling, dropout and n-best this tokeniser has."""
        offered = [
            call
            for ability, call in (("sample", "sample=True"), ("dropout", "dropout=p"), ("nbest", "encode_nbest"))
            if self._encoder.offers(ability)
        ]
        return f", which supports {' and '.join(offered)}" if offered else ", which has no subword regularisation"

    def encode_ordinary(self, text: str | bytes) -> list[int]:
        """The ids of `text`, with special-token text encoded as ordinary text."""
        return self._encoder.encode(text, None)

    def encode_to_numpy(
        self,
        text: str | bytes,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        max_tokens: int | None = None,
    ) -> np.ndarray:
        """Like `encode`, as a uint32 numpy array built without a Python list."""
        if max_tokens is not None:
            return self._truncated(self.encode_to_numpy, text, max_tokens, allowed_special=allowed_special,
                                   disallowed_special=disallowed_special)
        try:  # as in `encode`
            policy = self._policies[allowed_special, disallowed_special]
        except (KeyError, TypeError):
            policy = self._policy(allowed_special, disallowed_special)
        try:
            return self._encoder.encode_to_numpy(text, policy)
        except _core.SpecialTokenFound as found:
            raise disallowed_error(found, False) from None

    def encode_batch(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        sample: bool = False,
        alpha: float = 0.1,
        dropout: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> list[list[int]]:
        """`encode` of each text, in parallel on `num_threads` threads (default: all cores).
        With sampling or dropout, text i draws from (seed, i): the ids do not depend on the
        thread count, and text 0 gets what `encode(text, seed=seed)` gives. `max_tokens`
        truncates each encoding as in `encode`."""
        if max_tokens is not None:
            return self._truncated_batch(self.encode_batch, texts, max_tokens, num_threads, allowed_special=allowed_special,
                                         disallowed_special=disallowed_special, sample=sample, alpha=alpha,
                                         dropout=dropout, seed=seed)
        policy = self._policy(allowed_special, disallowed_special)
        randomness = self._randomness(sample, alpha, dropout, seed)
        threads = self._threads(num_threads)
        if randomness is not None:
            return self._with_policy(self._encoder.encode_batch_sampled, self._text_list(texts, "encode_batch"), policy, *randomness, threads, batch=True)
        return self._with_policy(self._encoder.encode_batch, self._text_list(texts, "encode_batch"), policy, threads, batch=True)

    def encode_batch_to_numpy(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of each text in parallel, as one flat uint32 array and int64 offsets: the
        ids of text i are `ids[offsets[i]:offsets[i + 1]]`. No Python int is made."""
        policy = self._policy(allowed_special, disallowed_special)
        return self._with_policy(self._encoder.encode_batch_to_numpy, self._text_list(texts, "encode_batch_to_numpy"), policy, self._threads(num_threads), batch=True)

    def encode_ordinary_batch(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> list[list[int]]:
        """`encode_ordinary` of each text, in parallel."""
        return self._encoder.encode_batch(self._text_list(texts, "encode_ordinary_batch"), None, self._threads(num_threads))

    def count_tokens(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> np.ndarray:
        """The number of tokens of each text (uint64), in parallel, without keeping the ids."""
        policy = self._policy(allowed_special, disallowed_special)
        return self._with_policy(self._encoder.count_batch, self._text_list(texts, "count_tokens"), policy, self._threads(num_threads), batch=True)

    def token_histogram(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> np.ndarray:
        """How often each id occurs in the ordinary encoding of `texts` (uint64, indexed by id),
        computed in parallel without building id lists; what corpus metrics need."""
        return self._encoder.token_histogram(self._text_list(texts, "token_histogram"), self._threads(num_threads))

    def decode(self, ids: Iterable[int] | np.ndarray, errors: str = "replace") -> str:
        """The text of `ids`; bytes that are not valid UTF-8 follow `errors` (as bytes.decode)."""
        return self.decode_bytes(ids).decode("utf-8", errors)

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
