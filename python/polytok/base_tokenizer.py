"""What every tokeniser shares, polytok's own (tokenizer.py) or one loaded with another library's
pipeline (formats/loaded.py): ids to bytes and back, lookups, sizes, a description, the
applying entry points, and the special-token policy. Special tokens follow tiktoken: by default
their text in the input raises, `allowed_special` turns it into the special ids, and
`disallowed_special=()` lets it through as ordinary text.
"""
from __future__ import annotations

import abc
import secrets
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from polytok import _core, checks
from polytok.apply import chunking, healing, offsets, streaming
from polytok.errors import ConfigError, DecodeError, EncodeError
from polytok.pretokenize import PRESETS

SpecialSet = Literal["all"] | Collection[str]
# The sampling temperature `encode` uses unless told otherwise.
DEFAULT_ALPHA = 0.1
# The special-token arguments under which all special-token text is ordinary text.
ORDINARY: tuple[frozenset[str], tuple[str, ...]] = (frozenset(), ())
Result = TypeVar("Result")


class BaseTokenizer(abc.ABC):
    """The part every tokeniser shares, its public encode and decode API included (each method
    is declared here once). A subclass sets `vocab` (`vocab[i]` is the bytes of ordinary id i),
    `_special_tokens` (text -> id, ids after the ordinary ones), `_encoder` (the core encoder,
    which also decodes) and the attributes `info` describes, calls `_index_tokens`, and
    implements the small core below: `_make_policy`, `_encode_core`, `_encode_batch_core` and,
    where it can do better than the defaults here, the numpy, counting and histogram cores.
    Sampling, dropout and n-best run on `_encoder` where `_offers` says it can; elsewhere the
    arguments raise `_refusal`'s ConfigError."""

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
        # The lowest id wins where bytes repeat; an empty entry is an unused id.
        self._id_of_token: dict[bytes, int] = {t: i for i, t in reversed(list(enumerate(self.vocab))) if t}
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
        """The subclass's special-token policy for these arguments (`_make_policy`), cached."""
        given = (allowed_special, disallowed_special)
        try:  # the arguments as given, when hashable: no frozensets to build on every call
            return self._policies[given]
        except (KeyError, TypeError):
            pass
        key = (_freeze(allowed_special), _freeze(disallowed_special))
        if key in self._policies:
            return self._remember(given, self._policies[key])
        policy = self._make_policy(*self._special_sets(allowed_special, disallowed_special))
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
            raise special_token_error(*found.args, batch) from None


    # ---- the core a subclass implements ------------------------------------------------------

    @abc.abstractmethod
    def _make_policy(self, allowed: set[str], disallowed: set[str]) -> Any:
        """What the encoding cores take for these special-token sets (`_special_sets`)."""

    @abc.abstractmethod
    def _encode_core(self, text: str | bytes, policy: Any) -> list[int]:
        """The ids of one text under `policy`."""

    @abc.abstractmethod
    def _encode_batch_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> list[list[int]]:
        """The ids of each text under `policy`, on `threads` threads."""

    def _encode_numpy_core(self, text: str | bytes, policy: Any) -> np.ndarray:
        """`_encode_core` as a uint32 array."""
        return np.array(self._encode_core(text, policy), dtype=np.uint32)

    def _encode_batch_numpy_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
        """`_encode_batch_core` as one flat uint32 array and int64 offsets."""
        encoded = self._encode_batch_core(texts, policy, threads)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(ids) for ids in encoded], out=offsets[1:])
        ids = np.fromiter((i for one in encoded for i in one), dtype=np.uint32, count=int(offsets[-1]))
        return ids, offsets

    def _count_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> np.ndarray:
        """The number of tokens of each text (uint64)."""
        return np.array([len(ids) for ids in self._encode_batch_core(texts, policy, threads)], dtype=np.uint64)

    def _histogram_core(self, texts: list[str | bytes], threads: int | None) -> np.ndarray:
        """How often each id occurs in the ordinary encodings of `texts` (uint64, by id)."""
        encoded = self._encode_batch_core(texts, self._policy(*ORDINARY), threads)
        ids = np.fromiter((i for one in encoded for i in one), dtype=np.int64)
        return np.bincount(ids, minlength=self.n_vocab).astype(np.uint64)

    def _offers(self, ability: str) -> bool:
        """Whether `_encoder` draws cuts for `ability` ("sample", "dropout") or ranks them ("nbest")."""
        return False

    def _refusal(self, wanted: str) -> ConfigError:
        """The ConfigError for an argument this tokeniser cannot honour: `wanted` says what it
        needs, the rest which of sampling, dropout and n-best this tokeniser has."""
        offered = [
            call
            for ability, call in (("sample", "sample=True"), ("dropout", "dropout=p"), ("nbest", "encode_nbest"))
            if self._offers(ability)
        ]
        supported = f", which supports {' and '.join(offered)}" if offered else ", which has no subword regularisation"
        return ConfigError(f"{wanted}; this tokeniser uses the {self.segmenter!r} segmenter{supported}")

    def _randomness(self, sample: bool, alpha: float, dropout: float | None, seed: int | None) -> tuple[str, float, int] | None:
        """The core's (kind, strength, seed) for a randomised encode, or None for the plain one."""
        if not sample and dropout is None:
            return None
        if sample and dropout is not None:
            raise ConfigError("choose one of sample=True (Unigram sampling) and dropout=p (BPE-dropout), not both")
        kind, strength = ("sample", alpha) if sample else ("dropout", dropout)
        if not self._offers(kind):
            raise self._refusal("sample=True needs segmenter 'viterbi'" if sample else "dropout=p needs segmenter 'merges'")
        strength = checks.sampling_alpha(strength) if sample else checks.probability("dropout", strength)
        return kind, strength, secrets.randbits(64) if seed is None else checks.seed(seed)

    # ---- encoding: every public signature, once ----------------------------------------------

    def encode(
        self,
        text: str | bytes,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        sample: bool = False,
        alpha: float = DEFAULT_ALPHA,
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
        randomness = None
        if sample or dropout is not None or alpha != DEFAULT_ALPHA or seed is not None:
            randomness = self._randomness(sample, alpha, dropout, seed)
        try:
            if randomness is None:
                return self._encode_core(text, policy)
            return self._encoder.encode_sampled(text, policy, *randomness)
        except _core.SpecialTokenFound as found:
            raise special_token_error(*found.args, False) from None

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
        n = checks.integer("n", n)
        if not self._offers("nbest"):
            raise self._refusal("encode_nbest needs a tokeniser that scores its segmentations (segmenter 'viterbi')")
        policy = self._policy(allowed_special, disallowed_special)
        return self._with_policy(self._encoder.encode_nbest, text, policy, n, batch=False)

    def encode_ordinary(self, text: str | bytes) -> list[int]:
        """The ids of `text`, with special-token text encoded as ordinary text."""
        try:  # as in `encode`
            policy = self._policies[ORDINARY]
        except KeyError:
            policy = self._policy(*ORDINARY)
        return self._encode_core(text, policy)

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
            return self._encode_numpy_core(text, policy)
        except _core.SpecialTokenFound as found:
            raise special_token_error(*found.args, False) from None

    def encode_batch(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        sample: bool = False,
        alpha: float = DEFAULT_ALPHA,
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
        randomness = None
        if sample or dropout is not None or alpha != DEFAULT_ALPHA or seed is not None:
            randomness = self._randomness(sample, alpha, dropout, seed)
        threads = checks.num_threads(num_threads)
        listed = self._text_list(texts, "encode_batch")
        if randomness is not None:
            return self._with_policy(self._encoder.encode_batch_sampled, listed, policy, *randomness, threads, batch=True)
        return self._with_policy(self._encode_batch_core, listed, policy, threads, batch=True)

    def encode_batch_to_numpy(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of each text in parallel, as one flat uint32 array and int64 offsets: the
        ids of text i are `ids[offsets[i]:offsets[i + 1]]`."""
        policy = self._policy(allowed_special, disallowed_special)
        listed = self._text_list(texts, "encode_batch_to_numpy")
        return self._with_policy(self._encode_batch_numpy_core, listed, policy, checks.num_threads(num_threads), batch=True)

    def encode_ordinary_batch(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> list[list[int]]:
        """`encode_ordinary` of each text, in parallel."""
        listed = self._text_list(texts, "encode_ordinary_batch")
        return self._encode_batch_core(listed, self._policy(*ORDINARY), checks.num_threads(num_threads))

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
        listed = self._text_list(texts, "count_tokens")
        return self._with_policy(self._count_core, listed, policy, checks.num_threads(num_threads), batch=True)

    def token_histogram(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> np.ndarray:
        """How often each id occurs in the ordinary encoding of `texts` (uint64, indexed by id);
        what corpus metrics need."""
        return self._histogram_core(self._text_list(texts, "token_histogram"), checks.num_threads(num_threads))

    def decode(self, ids: Iterable[int] | np.ndarray, errors: str = "replace") -> str:
        """The text of `ids`; bytes that are not valid UTF-8 follow `errors` (as bytes.decode).
        A tokeniser loaded with its file's pipeline decodes as the file's library does."""
        return self._decode_core(ids, errors)

    def _decode_core(self, ids: Iterable[int] | np.ndarray, errors: str) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors)

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
        unused = [token_id for token_id, token in enumerate(self.vocab) if not token]
        text = f"ordinary ids are 0..{len(self.vocab) - 1}" + (f" except {unused}" if unused else "")
        return text + (f" and special ids are {specials}" if specials else " and there are no special ids")

    @property
    def cache_size(self) -> int:
        """The most distinct pre-tokens each thread caches with their ids (0: no cache)."""
        return self._encoder.cache_size()

    @cache_size.setter
    def cache_size(self, pieces: int) -> None:
        self._encoder.set_cache_size(checks.integer("cache_size (0 turns the cache off)", pieces, minimum=0))

    @property
    def vocab_size(self) -> int:
        """The number of tokens, ordinary and special (empty vocabulary entries are no tokens)."""
        return sum(1 for token in self.vocab if token) + len(self._special_tokens)

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
        lengths = [len(token) for token in self.vocab if token]
        certificate = self.certificate
        if certificate is not None and hasattr(certificate, "to_dict"):
            certificate = certificate.to_dict()
        return {
            "algorithm": self.algorithm,
            "segmenter": self.segmenter,
            "vocab_size": self.vocab_size,
            "ordinary_tokens": len(lengths),
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


def special_token_error(token: bytes, document: int, batch: bool) -> EncodeError:
    """The EncodeError for the disallowed special token `token` found in text `document` (the
    core's SpecialTokenFound carries both): which token, where, and how to let it through."""
    text = token.decode("utf-8", "replace")
    where = f"text {document} of the batch" if batch else "the text"
    return EncodeError(
        f"{where} contains the special token {text!r}, which is disallowed. Pass "
        f"allowed_special={{{text!r}}} (or 'all') to encode it as a special token, or "
        f"disallowed_special=() to encode it as ordinary text."
    )
