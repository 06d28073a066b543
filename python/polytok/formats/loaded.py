"""A tokeniser read from another library's file that keeps the file's own pipeline: the HF
tokenizer.json and SentencePiece readers build a `Pipeline` (the text stages around the
segmenter, and the decoder) and a core encoder, and `LoadedTokenizer` offers them through the
Tokenizer's public methods, with the ids and text that library gives.

The special-token rules are the native Tokenizer's (`BaseTokenizer._special_sets`): a HF file's
added tokens marked special are `special_tokens`; by default their text in the input is an
EncodeError, `allowed_special` lets them through as their ids (`"all"`: what `tokenizers` does),
and `disallowed_special=()` leaves the rest to the segmenter as ordinary text. Added tokens not
marked special are vocabulary, cut out as `tokenizers` cuts them. A SentencePiece model never
reads a control piece from text (nor does `sentencepiece`), so it has no special tokens here.
"""
from __future__ import annotations

import abc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core
from polytok.errors import ConfigError, FormatError
from polytok.apply.offsets import byte_offsets, input_bytes, to_character_offsets
from polytok.segmenters import merges_encoder
from polytok.base_tokenizer import BaseTokenizer, SpecialSet, special_token_error

# The core encoders a loaded pipeline feeds: polytok's own BPE for byte-level BPE files whose
# pre-tokeniser is one regex, and the character-level segmenters of src/segment/loaded.rs.
ENCODERS = {
    "merges": merges_encoder,
    "char_merges": _core.Encoder.char_merges,
    "char_viterbi": _core.Encoder.char_viterbi,
    "char_longest_match": _core.Encoder.char_longest_match,
}


def build_encoder(segmenter: str, arguments: dict[str, Any], source: str) -> Any:
    """The core encoder `segmenter` (one of ENCODERS) built from `arguments`; FormatError names
    `source` when the core refuses them."""
    try:
        return ENCODERS[segmenter](**arguments)
    except _core.InvalidPattern as error:
        raise FormatError(f"{source}: invalid pre-tokenisation regex {arguments['pattern']!r}: {error.args[0]}") from None
    except ValueError as error:
        raise FormatError(f"{source}: cannot build the {segmenter!r} segmenter: {error}") from None


class Pipeline(abc.ABC):
    """A loaded file's text stages around the core encoder, and its decoder. `kind` names the
    file type in messages ("HF tokenizer.json"); `components` and `lossy` (where the pipeline
    maps different texts to the same ids) are what `info` reports."""
    # Whether `save_huggingface` writes the file back (a pipeline read from a tokenizer.json).
    saves_huggingface = False
    # The `polytok.save` format that writes the file back as it was read.
    file_format = ""

    def __init__(self, *, kind: str, added: list[dict[str, Any]], lossy: list[str], components: dict[str, Any]):
        self.kind = kind
        self.added = added
        self.lossy = lossy
        self.components = components

    @abc.abstractmethod
    def encode(self, encoder: Any, text: str | bytes, split_added: bool = True) -> list[int]:
        """The ids of `text` through the pipeline and the core `encoder`; `split_added=False`
        leaves added-token text to the segmenter."""
    @abc.abstractmethod
    def encode_batch(
        self, encoder: Any, texts: list[str | bytes], num_threads: int | None, split_added: bool = True
    ) -> list[list[int]]:
        """`encode` of each text, the core's part in parallel on `num_threads`."""
    @abc.abstractmethod
    def decode(self, ids: list[int]) -> str:
        """The text of `ids` as the file's own library decodes it (no tokens skipped)."""
    def save_huggingface(self, path: str | Path) -> None:
        """Writes the pipeline as a HF tokenizer.json; only a pipeline read from one can."""
        raise ConfigError(
            f"a tokeniser loaded from a {self.kind} cannot be written as a HF tokenizer.json; keep the original file"
        )

    def info(self) -> dict[str, Any]:
        """What `LoadedTokenizer.info` adds: the file's components and where it loses text."""
        return {
            "loaded_from": self.kind,
            "pipeline": self.components,
            "added_tokens": {token["content"]: token["id"] for token in self.added},
            "lossy": self.lossy,
        }


class LoadedTokenizer(BaseTokenizer):
    """A tokeniser read from a HF tokenizer.json or SentencePiece model with its pipeline:
    `vocab[i]` is the bytes id i decodes to (added tokens included), `encoder` the core encoder
    the pipeline feeds. What only polytok's own tokenisers offer (sampling, dropout, n-best,
    the polytok file) raises ConfigError."""
    def __init__(
        self,
        vocab: list[bytes],
        pipeline: Pipeline,
        encoder: Any,
        *,
        algorithm: str,
        segmenter: str,
        pattern: str | None = None,
        merges: list[tuple[int, int]] | None = None,
        continuation_marker: str | None = None,
    ):
        self.vocab = vocab
        self.pipeline = pipeline
        self._encoder = encoder
        self.algorithm = algorithm
        self.segmenter = segmenter
        self.pattern = pattern
        self.merges = merges
        self.continuation_marker = continuation_marker
        self.training = None
        self.certificate = None
        self._special_tokens = {token["content"]: token["id"] for token in pipeline.added if token.get("special")}
        self._ordinary_added = frozenset(token["content"] for token in pipeline.added if not token.get("special"))
        self._index_tokens()

    @property
    def vocab_size(self) -> int:
        """The number of ids: `vocab` holds the added tokens (special ones too) at their ids."""
        return len(self.vocab)

    @property
    def n_vocab(self) -> int:
        """One past the largest id, which is vocab_size here."""
        return len(self.vocab)

    # ---- the encoding core (the public methods are BaseTokenizer's) -------------------------

    def _make_policy(self, allowed: set[str], disallowed: set[str]) -> tuple[Any, bool | frozenset[str]]:
        """(the finder of the disallowed special tokens or None, which added tokens the pipeline
        cuts out: True for all of them), as the module docstring says."""
        finder = None
        if disallowed:
            contents = sorted(disallowed)
            finder = (_core.AddedTokens([content.encode("utf-8") for content in contents], [False] * len(contents),
                                        [False] * len(contents)), contents)
        if len(allowed) == len(self._special_tokens):
            return finder, True
        return finder, self._ordinary_added | frozenset(allowed)

    def _refuse_disallowed(self, policy: tuple[Any, Any], texts: list[str | bytes], batch: bool) -> bool | frozenset[str]:
        """The added tokens to cut out under `policy`; EncodeError where a text holds a disallowed one."""
        finder, split = policy
        if finder is not None:
            for index, text in enumerate(texts):
                found = finder[0].find(text)
                if found is not None:
                    raise special_token_error(finder[1][found].encode("utf-8"), index, batch)
        return split

    def _encode_core(self, text: str | bytes, policy: Any) -> list[int]:
        return self.pipeline.encode(self._encoder, text, self._refuse_disallowed(policy, [text], batch=False))

    def _encode_batch_core(self, texts: list[str | bytes], policy: Any, threads: int | None) -> list[list[int]]:
        return self.pipeline.encode_batch(self._encoder, texts, threads, self._refuse_disallowed(policy, texts, batch=True))

    def _randomness(self, sample: bool, alpha: float, dropout: float | None, seed: int | None) -> None:
        raise self._refusal("")

    def _refusal(self, wanted: str) -> ConfigError:
        return ConfigError("sample, alpha, dropout and seed apply to polytok's own tokenisers, as does encode_nbest, "
                           f"not to one loaded from a {self.pipeline.kind} file with its pipeline")

    def _decode_core(self, ids: Iterable[int] | np.ndarray, errors: str) -> str:
        """Through the file's decoder, as its own library decodes (which says how bytes become
        text, so `errors` is not used)."""
        ids = list(ids.reshape(-1) if isinstance(ids, np.ndarray) else ids)
        self.decode_bytes(ids)  # the same DecodeError for ids that are no token
        return self.pipeline.decode([int(token_id) for token_id in ids])

    def pipeline_offsets(self, text: str | bytes, unit: str, allowed_special: SpecialSet = frozenset(),
                         disallowed_special: SpecialSet = "all") -> tuple[list[int], np.ndarray]:
        """The ids of `text` and each token's (start, end) in it, in bytes or characters
        ("chars"). Where the tokens' bytes are the input's and no normaliser ran, they tile it
        (offsets.py); otherwise, for a tokenizer.json, each token's place in its word
        (formats/huggingface/spans.py) maps back through the pre-tokeniser's and the
        normaliser's alignment (formats/huggingface/alignment.py) to whole characters of the
        input, as `tokenizers` maps it; for a SentencePiece model, the spans `sentencepiece`
        gives (formats/sentencepiece/read.py). ConfigError for the other files, and where special-token
        text is to be ordinary text (the offsets cut every special token out)."""
        if self._refuse_disallowed(self._policy(allowed_special, disallowed_special), [text], batch=False) is not True:
            allowed, _ = self._special_sets(allowed_special, disallowed_special)
            kept = [content for content in self._special_tokens if content not in allowed]
            found = next((content for content in kept if (content if isinstance(text, str) else content.encode("utf-8")) in text), None)
            if found is not None:
                raise ConfigError(
                    f"offsets of a tokeniser loaded from a {self.pipeline.kind} file cut out every special token, "
                    f"but {found!r} is to be ordinary text here; pass allowed_special='all', or encode without offsets"
                )
        data = input_bytes(text)
        sentencepiece_offsets = getattr(self.pipeline, "offsets", None)
        if sentencepiece_offsets is not None:
            ids, offsets = sentencepiece_offsets(self._encoder, text)
            return ids, to_character_offsets(data, offsets) if unit == "chars" else offsets
        if getattr(self.pipeline, "normalizer", None) is None:
            ids = self.encode(text, allowed_special="all")
            offsets = byte_offsets(self, ids)
            if self.decode_bytes(ids) == data:
                return ids, to_character_offsets(data, offsets) if unit == "chars" else offsets
        token_spans = getattr(self.pipeline, "token_spans", None)
        if token_spans is None:
            rewriting = ", ".join(f"{key}={value}" for key, value in self.pipeline.components.items() if value) or "its pipeline"
            raise ConfigError(
                f"offsets need a pipeline whose tokens spell the input, a tokenizer.json or a SentencePiece model; "
                f"the tokens of this {self.pipeline.kind} file do not ({rewriting}), so they do not map back to the input"
            )
        ids, spelled, origin, offsets = token_spans(self._encoder, self.vocab, text)
        # tokenizers' rule: a token runs from the start of the original character its first
        # byte stands for to the end of the one its last byte stands for
        character_bytes = np.flatnonzero((np.frombuffer(spelled, dtype=np.uint8) & 0xC0) != 0x80)
        byte_origin = np.repeat(np.array(origin, dtype=np.int64), np.diff(np.append(character_bytes, len(spelled))))
        result = np.empty_like(offsets)
        if len(offsets):
            first = byte_origin[offsets[:, 0]]
            last = byte_origin[offsets[:, 1] - 1]
            result[:, 0] = np.maximum(first, 0)
            result[:, 1] = np.where(last >= 0, last + 1, 0)
        if unit == "bytes":
            result = np.flatnonzero(np.append((np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80, True))[result]
        return ids, result

    def info(self) -> dict[str, Any]:
        """Tokenizer.info, plus the file's components, added tokens and where it loses text."""
        return {**super().info(), **self.pipeline.info()}

    def __repr__(self) -> str:
        return (
            f"LoadedTokenizer(loaded_from={self.pipeline.kind!r}, algorithm={self.algorithm!r}, "
            f"segmenter={self.segmenter!r}, vocab_size={self.vocab_size})"
        )

    # ---- files ------------------------------------------------------------------------------

    def _not_polytok(self) -> ConfigError:
        written_back = " (save_huggingface writes it back)" if self.pipeline.saves_huggingface else ""
        return ConfigError(
            f"this tokeniser was loaded from a {self.pipeline.kind} file whose pipeline polytok's "
            f"formats cannot hold; keep the original file{written_back}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Refused: the polytok record cannot hold a loaded pipeline."""
        raise self._not_polytok()

    def __reduce__(self) -> tuple:
        raise self._not_polytok()

    def save(self, path: str | Path) -> None:
        """Refused: the polytok format cannot hold a loaded pipeline."""
        raise self._not_polytok()

    def save_tiktoken(self, path: str | Path) -> None:
        """Refused: tiktoken ranks cannot hold a loaded pipeline."""
        raise self._not_polytok()

    def save_huggingface(self, path: str | Path) -> None:
        """Writes a tokeniser read from a HF tokenizer.json back as it was read (every id kept)."""
        self.pipeline.save_huggingface(path)
