"""What every tokeniser shares, polytok's own (tokenizer.py) or one loaded with another library's
pipeline (formats/loaded.py): ids to bytes and back, lookups, sizes, a description, the
applying entry points, and the special-token policy. Special tokens follow tiktoken: by default
their text in the input raises, `allowed_special` turns it into the special ids, and
`disallowed_special=()` lets it through as ordinary text.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from polytok import _core
from polytok.apply import chunking, healing, offsets, streaming
from polytok.errors import ConfigError, DecodeError, EncodeError
from polytok.pretokenize import PRESETS

SpecialSet = Literal["all"] | Collection[str]
Result = TypeVar("Result")


class BaseTokenizer:
    """The part every tokeniser shares. A subclass sets `vocab` (`vocab[i]` is the bytes of
    ordinary id i), `_special_tokens` (text -> id, ids after the ordinary ones), `_encoder` (the
    core encoder, which also decodes) and the attributes `info` describes, then calls
    `_index_tokens`."""

    vocab: list[bytes]
    algorithm: str
    segmenter: str
    pattern: str | None
    merges: list[tuple[int, int]] | None
    continuation_marker: str | None
    training: dict | None
    certificate: Any
    _special_tokens: dict[str, int]
    _encoder: Any

    def _index_tokens(self) -> None:
        self._id_of_token: dict[bytes, int] = {}
        for token_id, token in enumerate(self.vocab):
            self._id_of_token.setdefault(token, token_id)
        self._policies: dict[tuple, Any] = {}

    @staticmethod
    def _text_list(texts: Iterable[str | bytes], method: str) -> list[str | bytes]:
        """`texts` as a list. One str or bytes is refused: iterated, it would be read as a batch
        of one-character texts (or of ints), silently the wrong way."""
        if isinstance(texts, (str, bytes, bytearray, memoryview)):
            raise EncodeError(
                f"{method} takes a list of texts, got one {type(texts).__name__} of length {len(texts)}; "
                "pass [text] for one text"
            )
        return list(texts)

    # ---- the special-token policy -----------------------------------------------------------

    def _policy(self, allowed_special: SpecialSet, disallowed_special: SpecialSet) -> Any:
        """The core's special-token policy (None: all special-token text is ordinary), cached."""
        given = (allowed_special, disallowed_special)
        try:  # the arguments as given, when hashable: no frozensets to build on every call
            return self._policies[given]
        except (KeyError, TypeError):
            pass
        key = (_freeze(allowed_special), _freeze(disallowed_special))
        if key in self._policies:
            return self._remember(given, self._policies[key])
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        if not allowed and not disallowed:
            policy = None
        else:
            policy = self._encoder.special_policy(
                [text.encode("utf-8") for text in sorted(allowed)],
                [text.encode("utf-8") for text in sorted(disallowed)],
            )
        if len(self._policies) < 64:
            self._policies[key] = policy
        return self._remember(given, policy)

    def _special_sets(self, allowed_special: SpecialSet, disallowed_special: SpecialSet) -> tuple[set[str], set[str]]:
        """The special tokens the arguments let through as special ids, and those whose text in
        the input is an EncodeError (the rest are ordinary text)."""
        allowed = set(self._special_tokens) if allowed_special == "all" else set(allowed_special)
        unknown = allowed - set(self._special_tokens)
        if unknown:
            raise EncodeError(
                f"allowed_special names {sorted(unknown)}, which are not special tokens of this "
                f"tokeniser; its special tokens are {sorted(self._special_tokens)}"
            )
        if disallowed_special == "all":
            disallowed = set(self._special_tokens) - allowed
        else:
            disallowed = set(disallowed_special)
        return allowed, disallowed

    def _remember(self, given: tuple, policy: Any) -> Any:
        """`policy`, also cached under the arguments as given when they can be a key."""
        if len(self._policies) < 64:
            try:
                self._policies[given] = policy
            except TypeError:  # a list or set among the arguments
                pass
        return policy

    def _with_policy(self, encode: Callable[..., Result], *arguments: Any, batch: bool) -> Result:
        """`encode(*arguments)`, a core call under a special-token policy; a disallowed special
        token in the input becomes the EncodeError that says how to let it through."""
        try:
            return encode(*arguments)
        except _core.SpecialTokenFound as found:
            raise disallowed_error(found, batch) from None

    @staticmethod
    def _threads(num_threads: int | None) -> int | None:
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
            raise ConfigError(f"num_threads must be a positive integer or None, not {num_threads!r}")
        return num_threads

    # ---- decoding and lookup ----------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int] | np.ndarray) -> bytes:
        """The bytes of `ids`; ids that are no token raise DecodeError."""
        if isinstance(ids, np.ndarray):
            ids = ids.astype(np.int64, copy=False).reshape(-1)
        elif not isinstance(ids, (list, tuple)):
            ids = list(ids)
        try:
            return self._encoder.decode_bytes(ids)
        except _core.InvalidTokenId as invalid:
            token_id, position = invalid.args
            raise DecodeError(f"id {token_id} at position {position} is not a token: {self._id_ranges()}") from None
        except (TypeError, OverflowError) as error:
            raise DecodeError(f"ids must be integers: {error}") from None

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (ordinary or special)."""
        return self.decode_bytes([token_id])

    def token_id(self, token: bytes | str) -> int:
        """The id of a token given by its bytes (or text); special-token text gives its special id."""
        if isinstance(token, str):
            if token in self._special_tokens:
                return self._special_tokens[token]
            token = token.encode("utf-8")
        if token in self._id_of_token:
            return self._id_of_token[token]
        raise EncodeError(f"{token!r} is not a token of this tokeniser")

    def _id_ranges(self) -> str:
        specials = sorted(self._special_tokens.values())
        text = f"ordinary ids are 0..{len(self.vocab) - 1}"
        return text + (f" and special ids are {specials}" if specials else " and there are no special ids")

    @property
    def cache_size(self) -> int:
        """The most distinct pre-tokens each thread caches with their ids (0: no cache)."""
        return self._encoder.cache_size()

    @cache_size.setter
    def cache_size(self, pieces: int) -> None:
        if isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 0:
            raise ConfigError(f"cache_size must be an integer >= 0 (0 turns the cache off), not {pieces!r}")
        self._encoder.set_cache_size(pieces)

    @property
    def vocab_size(self) -> int:
        """The number of tokens, ordinary and special."""
        return len(self.vocab) + len(self._special_tokens)

    @property
    def n_vocab(self) -> int:
        """One past the largest id (tiktoken's name); equals vocab_size when ids have no gaps."""
        return max([len(self.vocab) - 1, *self._special_tokens.values()]) + 1

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special-token text -> id (a copy)."""
        return dict(self._special_tokens)

    def info(self) -> dict[str, Any]:
        """A description for people and scripts: algorithm, sizes, pattern, specials, records."""
        preset = next((name for name, regex in PRESETS.items() if regex == self.pattern), None)
        lengths = [len(token) for token in self.vocab]
        certificate = self.certificate
        if certificate is not None and hasattr(certificate, "to_dict"):
            certificate = certificate.to_dict()
        return {
            "algorithm": self.algorithm,
            "segmenter": self.segmenter,
            "vocab_size": self.vocab_size,
            "ordinary_tokens": len(self.vocab),
            "special_tokens": self.special_tokens,
            "pattern": preset if preset is not None else self.pattern,
            "longest_token_bytes": max(lengths),
            "mean_token_bytes": round(sum(lengths) / len(lengths), 3),
            "merges": None if self.merges is None else len(self.merges),
            "continuation_marker": self.continuation_marker,
            "training": self.training,
            "certificate": certificate,
        }

    # ---- applying a tokeniser: streaming, offsets, truncation, chunking, padding, healing ------
    # Thin entry points; the logic is in streaming.py, offsets.py, chunking.py and healing.py.

    def _truncated(self, encode: Callable[..., Result], text: str | bytes, max_tokens: int, **options: Any) -> Result:
        """`encode(text, **options)` cut to `max_tokens` (checked first) without splitting a character."""
        max_tokens = chunking.check_max_tokens(max_tokens)
        return chunking.truncate(self, encode(text, **options), max_tokens)

    def _truncated_batch(
        self, encode_batch: Callable[..., list[list[int]]], texts: Iterable[str | bytes], max_tokens: int,
        num_threads: int | None, **options: Any,
    ) -> list[list[int]]:
        """`encode_batch(texts, num_threads, **options)`, each encoding cut as `_truncated` cuts."""
        max_tokens = chunking.check_max_tokens(max_tokens)
        return [chunking.truncate(self, ids, max_tokens) for ids in encode_batch(texts, num_threads, **options)]

    def decode_stream(self, batch_size: int | None = None) -> Any:
        """A stream whose `step(id)` returns only complete characters and `flush()` the rest
        (streaming.py); `batch_size` streams stepped together when given."""
        return streaming.decode_stream(self, batch_size)

    def encode_with_offsets(
        self,
        text: str | bytes,
        *,
        unit: Literal["bytes", "chars"] = "bytes",
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> tuple[list[int], np.ndarray]:
        """The ids of `text` and each token's (start, end) in it (int64, shape (n, 2)), in
        bytes or characters; the offsets tile the input (offsets.py)."""
        return offsets.encode_with_offsets(self, text, unit=unit, allowed_special=allowed_special,
                                           disallowed_special=disallowed_special)

    def encode_truncated(
        self,
        text: str | bytes,
        max_tokens: int,
        *,
        side: Literal["left", "right"] = "right",
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[int]:
        """`encode(text)` cut to at most `max_tokens` tokens without splitting a character,
        keeping the start (side="right") or the end (side="left") (chunking.py)."""
        return chunking.encode_truncated(self, text, max_tokens, side=side, allowed_special=allowed_special,
                                         disallowed_special=disallowed_special)

    def chunk(
        self,
        text: str | bytes,
        max_tokens: int,
        overlap: int = 0,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[Any]:
        """`encode(text)` as `Chunk`s of at most `max_tokens` ids overlapping by at most
        `overlap`, each with the span of the text it decodes to (chunking.py)."""
        return chunking.chunk(self, text, max_tokens, overlap, allowed_special=allowed_special, disallowed_special=disallowed_special)

    def encode_batch_padded(
        self,
        texts: Iterable[str | bytes],
        *,
        max_tokens: int | None = None,
        pad_id: int | None = None,
        padding_side: Literal["left", "right"] = "right",
        truncation_side: Literal["left", "right"] = "right",
        pad_to_multiple_of: int | None = None,
        num_threads: int | None = None,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> Any:
        """The encodings of `texts` as a `PaddedBatch(ids, attention_mask)` of numpy matrices,
        padded on `padding_side`, each truncated to `max_tokens` when given (chunking.py)."""
        return chunking.encode_batch_padded(
            self, texts, max_tokens=max_tokens, pad_id=pad_id, padding_side=padding_side,
            truncation_side=truncation_side, pad_to_multiple_of=pad_to_multiple_of, num_threads=num_threads,
            allowed_special=allowed_special, disallowed_special=disallowed_special,
        )

    def heal(self, ids: Iterable[int] | np.ndarray) -> tuple[list[int], bytes]:
        """Token healing: (the prompt `ids` without its unstable last tokens, their bytes); the
        next token should come from `tokens_starting_with(removed)` (healing.py)."""
        return healing.heal(self, ids)

    def tokens_starting_with(self, prefix: bytes | str, *, or_prefixes: bool = False) -> np.ndarray:
        """Ids of the ordinary tokens whose bytes start with `prefix` (a read-only array in the
        order of their bytes); `or_prefixes` adds those that are a proper prefix of it (healing.py)."""
        return healing.tokens_starting_with(self, prefix, or_prefixes=or_prefixes)

    # ---- other libraries' forms: SentencePiece and transformers ----------------------------

    def save_sentencepiece(self, path: str | Path) -> None:
        """Writes a SentencePiece `.model` with the same ids (BPE or Unigram without a
        pre-tokenisation pattern; ConfigError says why otherwise) (formats/sentencepiece/write.py)."""
        from polytok.formats.sentencepiece import save_sentencepiece

        save_sentencepiece(self, path)

    def to_transformers(self, **special: Any) -> Any:
        """A `transformers.PreTrainedTokenizerFast` with these ids and this decoding, bos/eos/pad
        mapped to the special tokens (`bos_token=...` etc. to choose) (formats/transformers.py)."""
        from polytok.formats.transformers import to_transformers

        return to_transformers(self, **special)


def _freeze(special: SpecialSet) -> Any:
    if isinstance(special, str):
        if special != "all":
            raise EncodeError(f"special-token sets are 'all' or a collection of str, not the str {special!r}")
        return special
    return frozenset(special)


def disallowed_error(found: Exception, batch: bool) -> EncodeError:
    """The EncodeError for the core's SpecialTokenFound: which special token, where, and how to let it through."""
    token, document = found.args
    return special_token_error(token, document, batch)


def special_token_error(token: bytes, document: int, batch: bool) -> EncodeError:
    """The EncodeError for the disallowed special token `token` found in text `document`."""
    text = token.decode("utf-8", "replace")
    where = f"text {document} of the batch" if batch else "the text"
    return EncodeError(
        f"{where} contains the special token {text!r}, which is disallowed. Pass "
        f"allowed_special={{{text!r}}} (or 'all') to encode it as a special token, or "
        f"disallowed_special=() to encode it as ordinary text."
    )
