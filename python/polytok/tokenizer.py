"""The Tokenizer: a vocabulary of byte strings, a pre-tokenisation pattern, special tokens, and a
segmenter that cuts each pre-token into tokens; plus the polytok JSON file format.

Encoding runs in the Rust core (`polytok._core.Encoder`); this module checks arguments, chooses
the segmenter through `SEGMENTERS`, and turns core errors into `polytok.Error`s. Special tokens
follow tiktoken: by default their text in the input raises, `allowed_special` turns it into the
special ids, and `disallowed_special=()` lets it through as ordinary text.
"""
from __future__ import annotations

import base64
import json
import math
import secrets
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from polytok import _core
from polytok.errors import ConfigError, DecodeError, EncodeError, FormatError, PatternError
from polytok.pretokenize import PRESETS, resolve_pattern

FORMAT_NAME = "polytok"
FORMAT_VERSION = 1

# segmenter name -> function building the Rust encoder for a Tokenizer. Each segmenter's module
# adds its entry (see `register_segmenter`); "merges" is defined below.
SEGMENTERS: dict[str, Callable[["Tokenizer"], Any]] = {}

# The algorithm a tokeniser was trained with, when the caller does not say.
DEFAULT_ALGORITHM = {"merges": "bpe", "longest_match": "wordpiece", "viterbi": "unigram", "shortest_path": "convex"}

SpecialSet = Literal["all"] | Collection[str]


def register_segmenter(name: str) -> Callable[[Callable[["Tokenizer"], Any]], Callable[["Tokenizer"], Any]]:
    """Decorator: `build(tokenizer) -> _core.Encoder` becomes the encoder of segmenter `name`."""

    def register(build: Callable[["Tokenizer"], Any]) -> Callable[["Tokenizer"], Any]:
        SEGMENTERS[name] = build
        return build

    return register


class Tokenizer:
    """A byte-level tokeniser: `vocab[i]` is the bytes of ordinary id i; special ids come after.

    `segmenter` says how a pre-token is cut ("merges", "longest_match", "viterbi",
    "shortest_path"); `merges` (pairs of ids, in order), `scores` and `continuation_marker` are
    the data the segmenters need. `training` and `certificate` are records saved with the file.
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
        pipeline: Any = None,
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
        # A file loaded from another library keeps its own text pipeline (added tokens,
        # normaliser, pre-tokeniser, decoder) around the segmenter; see formats/huggingface.py.
        self.pipeline = pipeline
        self._check()
        self._id_of_token: dict[bytes, int] = {}
        for token_id, token in enumerate(self.vocab):
            self._id_of_token.setdefault(token, token_id)
        self._policies: dict[tuple, Any] = {}
        try:
            self._encoder = SEGMENTERS[segmenter](self)
        except _core.InvalidPattern as error:
            raise PatternError(f"invalid pre-tokenisation regex {self.pattern!r}: {error.args[0]}") from None
        except ValueError as error:
            raise ConfigError(f"cannot build the {segmenter!r} segmenter: {error}") from None

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
    ) -> list[int]:
        """The ids of `text`. Special-token text raises unless allowed (tiktoken's semantics);
        a tokeniser loaded with its own pipeline always recognises its added tokens, as its
        library does.

        Subword regularisation: `sample=True` (viterbi tokenisers) draws each pre-token's cut with
        probability ∝ P(cut)^alpha; `dropout=p` (merges tokenisers) skips every applicable merge
        with probability p. The same `seed` gives the same ids; seed None draws a fresh one.
        """
        if self.pipeline is not None:
            self._no_randomness_in_pipeline(sample, dropout)
            return self.pipeline.encode(self._encoder, text)
        policy = self._policy(allowed_special, disallowed_special)
        randomness = self._randomness(sample, alpha, dropout, seed)
        try:
            if randomness is None:
                return self._encoder.encode(text, policy)
            return self._encoder.encode_sampled(text, policy, *randomness)
        except _core.SpecialTokenFound as found:
            raise self._special_error(*found.args, batch=False) from None

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
        try:
            return self._encoder.encode_nbest(text, policy, n)
        except _core.SpecialTokenFound as found:
            raise self._special_error(*found.args, batch=False) from None

    def _no_randomness_in_pipeline(self, sample: bool, dropout: float | None) -> None:
        if sample or dropout is not None:
            raise ConfigError("sample and dropout apply to polytok's own tokenisers, not to one loaded with its library's pipeline")

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
        if self.pipeline is not None:
            return self.pipeline.encode(self._encoder, text, split_added=False)
        return self._encoder.encode(text, None)

    def encode_to_numpy(
        self,
        text: str | bytes,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> np.ndarray:
        """Like `encode`, as a uint32 numpy array built without a Python list."""
        if self.pipeline is not None:
            return np.array(self.pipeline.encode(self._encoder, text), dtype=np.uint32)
        policy = self._policy(allowed_special, disallowed_special)
        try:
            return self._encoder.encode_to_numpy(text, policy)
        except _core.SpecialTokenFound as found:
            raise self._special_error(*found.args, batch=False) from None

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
    ) -> list[list[int]]:
        """`encode` of each text, in parallel on `num_threads` threads (default: all cores).
        With sampling or dropout, text i draws from (seed, i): the ids do not depend on the
        thread count, and text 0 gets what `encode(text, seed=seed)` gives."""
        if self.pipeline is not None:
            self._no_randomness_in_pipeline(sample, dropout)
            return self.pipeline.encode_batch(self._encoder, list(texts), _threads(num_threads))
        policy = self._policy(allowed_special, disallowed_special)
        randomness = self._randomness(sample, alpha, dropout, seed)
        try:
            if randomness is not None:
                return self._encoder.encode_batch_sampled(list(texts), policy, *randomness, _threads(num_threads))
            return self._encoder.encode_batch(list(texts), policy, _threads(num_threads))
        except _core.SpecialTokenFound as found:
            raise self._special_error(*found.args, batch=True) from None

    def encode_ordinary_batch(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> list[list[int]]:
        """`encode_ordinary` of each text, in parallel."""
        if self.pipeline is not None:
            return self.pipeline.encode_batch(self._encoder, list(texts), _threads(num_threads), split_added=False)
        return self._encoder.encode_batch(list(texts), None, _threads(num_threads))

    def count_tokens(
        self,
        texts: Iterable[str | bytes],
        num_threads: int | None = None,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> np.ndarray:
        """The number of tokens of each text (uint64), in parallel, without keeping the ids."""
        if self.pipeline is not None:
            encoded = self.pipeline.encode_batch(self._encoder, list(texts), _threads(num_threads))
            return np.array([len(ids) for ids in encoded], dtype=np.uint64)
        policy = self._policy(allowed_special, disallowed_special)
        try:
            return self._encoder.count_batch(list(texts), policy, _threads(num_threads))
        except _core.SpecialTokenFound as found:
            raise self._special_error(*found.args, batch=True) from None

    def token_histogram(self, texts: Iterable[str | bytes], num_threads: int | None = None) -> np.ndarray:
        """How often each id occurs in the ordinary encoding of `texts` (uint64, indexed by id),
        computed in parallel without building id lists; what corpus metrics need. A loaded
        tokeniser's ids come from its own pipeline (normaliser included), so it builds them."""
        if self.pipeline is not None:
            encoded = self.encode_ordinary_batch(texts, num_threads)
            ids = np.fromiter((i for one in encoded for i in one), dtype=np.int64)
            return np.bincount(ids, minlength=self.vocab_size).astype(np.uint64)
        return self._encoder.token_histogram(list(texts), _threads(num_threads))

    def _policy(self, allowed_special: SpecialSet, disallowed_special: SpecialSet) -> Any:
        """The core's special-token policy (None: all special-token text is ordinary), cached."""
        key = (_freeze(allowed_special), _freeze(disallowed_special))
        if key in self._policies:
            return self._policies[key]
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
        if not allowed and not disallowed:
            policy = None
        else:
            policy = self._encoder.special_policy(
                [text.encode("utf-8") for text in sorted(allowed)],
                [text.encode("utf-8") for text in sorted(disallowed)],
            )
        if len(self._policies) < 64:
            self._policies[key] = policy
        return policy

    def _special_error(self, token: bytes, document: int, *, batch: bool) -> EncodeError:
        text = token.decode("utf-8", "replace")
        where = f"text {document} of the batch" if batch else "the text"
        return EncodeError(
            f"{where} contains the special token {text!r}, which is disallowed. Pass "
            f"allowed_special={{{text!r}}} (or 'all') to encode it as a special token, or "
            f"disallowed_special=() to encode it as ordinary text."
        )

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

    def decode(self, ids: Iterable[int] | np.ndarray, errors: str = "replace") -> str:
        """The text of `ids`; bytes that are not valid UTF-8 follow `errors` (as bytes.decode).
        A loaded tokeniser decodes through its file's decoder, as its own library does."""
        if self.pipeline is not None:
            ids = list(ids.reshape(-1) if isinstance(ids, np.ndarray) else ids)
            self.decode_bytes(ids)  # the same DecodeError for ids that are no token
            return self.pipeline.decode([int(token_id) for token_id in ids])
        return self.decode_bytes(ids).decode("utf-8", errors)

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

    def __reduce__(self) -> tuple:
        # Pickled as its file record (the Rust encoder is rebuilt), e.g. for multiprocessing.
        return (_from_record, (self.to_dict(), "pickled tokenizer"))

    def __repr__(self) -> str:
        return (
            f"Tokenizer(algorithm={self.algorithm!r}, segmenter={self.segmenter!r}, "
            f"vocab_size={self.vocab_size}, special_tokens={len(self._special_tokens)})"
        )

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
            **({} if self.pipeline is None else self.pipeline.info()),
        }

    # ---- files ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The polytok file record, in the file's field order."""
        if self.pipeline is not None:
            raise ConfigError(
                f"this tokeniser was loaded from a {self.pipeline.kind} file whose pipeline polytok's "
                f"format cannot hold; keep the original file (save_huggingface writes HF files back)"
            )
        certificate = self.certificate
        if certificate is not None and hasattr(certificate, "to_dict"):
            certificate = certificate.to_dict()
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "algorithm": self.algorithm,
            "segmenter": self.segmenter,
            "pattern": self.pattern,
            "special_tokens": dict(sorted(self._special_tokens.items(), key=lambda item: item[1])),
            "vocab": [base64.b64encode(token).decode("ascii") for token in self.vocab],
            "merges": None if self.merges is None else [list(pair) for pair in self.merges],
            "scores": self.scores,
            "continuation_marker": self.continuation_marker,
            "training": self.training,
            "certificate": certificate,
        }

    def save(self, path: str | Path) -> None:
        """Writes the polytok JSON file, atomically and byte-identically for equal tokenisers."""
        from polytok.formats import write_atomically

        write_atomically(path, _dump_record(self.to_dict()).encode("utf-8"))

    def save_tiktoken(self, path: str | Path) -> None:
        """Writes tiktoken's ranks file (base64 token, space, rank per line); BPE only."""
        from polytok.formats.tiktoken import save_tiktoken

        save_tiktoken(self, path)

    def save_huggingface(self, path: str | Path) -> None:
        """Writes a HF `tokenizer.json` (byte-level BPE) that encodes to the same ids; BPE only."""
        from polytok.formats.huggingface import save_huggingface

        save_huggingface(self, path)

    @classmethod
    def from_dict(cls, record: Any, source: str = "tokenizer record") -> "Tokenizer":
        """Checks every field of a polytok record and builds the tokeniser; FormatError names the field."""
        return _from_record(record, source)


def _threads(num_threads: int | None) -> int | None:
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
        raise ConfigError(f"num_threads must be a positive integer or None, not {num_threads!r}")
    return num_threads


def _freeze(special: SpecialSet) -> Any:
    if isinstance(special, str):
        if special != "all":
            raise EncodeError(f"special-token sets are 'all' or a collection of str, not the str {special!r}")
        return special
    return frozenset(special)


@register_segmenter("merges")
def _merges_encoder(tokenizer: Tokenizer) -> Any:
    """BPE: replay the merge list, or without one use tiktoken's rule with rank = id."""
    triples = None if tokenizer.merges is None else _merge_triples(tokenizer.vocab, tokenizer.merges)
    return _core.Encoder.merges(tokenizer.pattern, tokenizer.vocab, triples, _special_pairs(tokenizer))


def _special_pairs(tokenizer: Tokenizer) -> list[tuple[bytes, int]]:
    return [(text.encode("utf-8"), token_id) for text, token_id in tokenizer.special_tokens.items()]


@register_segmenter("longest_match")
def _longest_match_encoder(tokenizer: Tokenizer) -> Any:
    """WordPiece: greedy longest prefix; continuation tokens carry the marker in `vocab`."""
    marker = tokenizer.continuation_marker.encode("utf-8") if tokenizer.continuation_marker else None
    return _core.Encoder.longest_match(tokenizer.pattern, tokenizer.vocab, marker, _special_pairs(tokenizer))


@register_segmenter("viterbi")
def _viterbi_encoder(tokenizer: Tokenizer) -> Any:
    """Unigram: the segmentation of largest total log-probability (`scores`)."""
    if tokenizer.scores is None or len(tokenizer.scores) != len(tokenizer.vocab):
        raise ValueError("a viterbi tokeniser needs one score per token")
    return _core.Encoder.viterbi(tokenizer.pattern, tokenizer.vocab, tokenizer.scores, _special_pairs(tokenizer))


@register_segmenter("shortest_path")
def _shortest_path_encoder(tokenizer: Tokenizer) -> Any:
    """ConvexTok: fewest tokens per pre-token, ties to the longest token from the left."""
    return _core.Encoder.shortest_path(tokenizer.pattern, tokenizer.vocab, _special_pairs(tokenizer))


def _merge_triples(vocab: list[bytes], merges: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(left, right, merged id) per merge. polytok's layout (256 bytes, then merge k is id 256+k)
    is used when it fits; otherwise each merge yields the one token with its bytes."""
    standard = len(vocab) == 256 + len(merges) and all(vocab[i] == bytes([i]) for i in range(256))
    if standard:
        triples = [(left, right, 256 + k) for k, (left, right) in enumerate(merges)]
        for left, right, merged in triples:
            if vocab[merged] != vocab[left] + vocab[right]:
                raise ValueError(
                    f"merge {merged - 256} ({left}, {right}) joins {vocab[left] + vocab[right]!r} "
                    f"but token {merged} is {vocab[merged]!r}"
                )
        return triples
    ids: dict[bytes, list[int]] = {}
    for token_id, token in enumerate(vocab):
        ids.setdefault(token, []).append(token_id)
    triples = []
    for index, (left, right) in enumerate(merges):
        joined = vocab[left] + vocab[right]
        found = ids.get(joined, [])
        if len(found) != 1:
            problem = "is no token" if not found else f"is several tokens {found}"
            raise ValueError(f"merge {index} ({left}, {right}) joins {joined!r}, which {problem}")
        triples.append((left, right, found[0]))
    return triples


# ---- the polytok JSON format -------------------------------------------------------------------

FIELDS = (
    "format", "version", "algorithm", "segmenter", "pattern", "special_tokens", "vocab",
    "merges", "scores", "continuation_marker", "training", "certificate",
)


def _dump_record(record: dict[str, Any]) -> str:
    """JSON with one top-level field per line and one list item per line (readable diffs, and a
    truncated file's error names a line near the damage); nested objects keep sorted keys."""

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)

    lines = []
    for name in FIELDS:
        value = record[name]
        if isinstance(value, list) and value:
            items = ",\n".join("  " + dump(item) for item in value)
            lines.append(f" {dump(name)}: [\n{items}\n ]")
        else:
            lines.append(f" {dump(name)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def load_polytok(path: str | Path) -> Tokenizer:
    """Reads a polytok JSON file, checking every field."""
    return _from_record(read_json(path), f"tokenizer file {path}")


def read_json(path: str | Path) -> Any:
    """Parses a JSON file; FormatError names the file and where it breaks."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise FormatError(f"cannot read tokenizer file {path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FormatError(f"tokenizer file {path}: invalid UTF-8 at byte {error.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise FormatError(
            f"tokenizer file {path}: not valid JSON at line {error.lineno} column {error.colno} "
            f"({error.msg}); the file is truncated or was edited"
        ) from None


def _from_record(record: Any, source: str) -> Tokenizer:
    def fail(field: str, problem: str) -> FormatError:
        return FormatError(f"{source}: field {field} {problem}")

    if not isinstance(record, dict):
        raise FormatError(f"{source}: expected a JSON object, found {type(record).__name__}")
    if record.get("format") != FORMAT_NAME:
        raise fail("'format'", f"is {record.get('format')!r}, expected {FORMAT_NAME!r}")
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise fail("'version'", f"is {version!r}, expected an integer")
    if version != FORMAT_VERSION:
        newer = " (written by a newer polytok)" if version > FORMAT_VERSION else ""
        raise fail("'version'", f"is {version}{newer}; this polytok reads version {FORMAT_VERSION}")
    for name in FIELDS:
        if name not in record:
            raise fail(repr(name), "is missing")
    extra = sorted(set(record) - set(FIELDS))
    if extra:
        raise FormatError(f"{source}: unknown field {extra[0]!r} (known fields: {', '.join(FIELDS)})")

    def expect(name: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
        value = record[name]
        if value is None and nullable:
            return None
        if not isinstance(value, kinds) or isinstance(value, bool):
            kind = " or ".join(k.__name__ for k in kinds) + (" or null" if nullable else "")
            raise fail(repr(name), f"is {type(value).__name__}, expected {kind}")
        return value

    algorithm = expect("algorithm", (str,))
    segmenter = expect("segmenter", (str,))
    if segmenter not in SEGMENTERS:
        raise fail("'segmenter'", f"is {segmenter!r}; known segmenters: {sorted(SEGMENTERS)}")
    pattern = expect("pattern", (str,), nullable=True)
    special_tokens = expect("special_tokens", (dict,))
    for text, token_id in special_tokens.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise fail(f"'special_tokens'[{text!r}]", f"is {token_id!r}, expected a non-negative integer id")
    vocab_field = expect("vocab", (list,))
    vocab = []
    for index, item in enumerate(vocab_field):
        if not isinstance(item, str):
            raise fail(f"'vocab'[{index}]", f"is {type(item).__name__}, expected a base64 string")
        try:
            token = base64.b64decode(item, validate=True)
        except ValueError:
            raise fail(f"'vocab'[{index}]", f"is not valid base64: {item!r}") from None
        if not token:
            raise fail(f"'vocab'[{index}]", "is an empty token")
        vocab.append(token)
    merges = expect("merges", (list,), nullable=True)
    if merges is not None:
        for index, pair in enumerate(merges):
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(vocab) for i in pair)
            ):
                raise fail(f"'merges'[{index}]", f"is {pair!r}, expected [left id, right id] with ids below {len(vocab)}")
    scores = expect("scores", (list,), nullable=True)
    if scores is not None:
        for index, score in enumerate(scores):
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise fail(f"'scores'[{index}]", f"is {score!r}, expected a number")
        if len(scores) != len(vocab):
            raise fail("'scores'", f"has {len(scores)} entries for {len(vocab)} tokens")
    continuation_marker = expect("continuation_marker", (str,), nullable=True)
    training = expect("training", (dict,), nullable=True)
    certificate = expect("certificate", (dict,), nullable=True)
    try:
        return Tokenizer(
            vocab,
            segmenter=segmenter,
            pattern=pattern,
            special_tokens=special_tokens,
            merges=None if merges is None else [tuple(pair) for pair in merges],
            scores=scores,
            algorithm=algorithm,
            continuation_marker=continuation_marker,
            training=training,
            certificate=certificate,
        )
    except (ConfigError, PatternError) as error:
        raise FormatError(f"{source}: {error}") from None
