"""The pipeline of a loaded HF `tokenizer.json`: added tokens are cut out first (those marked
`normalized: false` from the raw text, the others from the normalised text), the rest is
normalised and pre-tokenised here in Python, and the words go to a Rust segmenter in one call.
read.py builds it from the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core
from polytok.errors import ConfigError, EncodeError, FormatError
from polytok.formats.huggingface.alignment import AlignedNormalizer, aligned_normalizer
from polytok.formats.huggingface.decoders import Decoder
from polytok.formats.huggingface.normalizers import Normalizer
from polytok.formats.huggingface.spans import WordModel, spelled_alignment
from polytok.formats.huggingface.pre_tokenizers import (
    PreTokenizerStep,
    pre_tokenizer as read_pre_tokenizer,
)
from polytok.formats.huggingface.write import save_record
from polytok.formats.loaded import Pipeline

KIND = "HF tokenizer.json"


class HuggingFacePipeline(Pipeline):
    """A tokenizer.json's added tokens, normaliser and pre-tokeniser steps (run here) before the
    core's segmenter, and its decoder; `token_texts[i]` is token i as decoders see it."""

    saves_huggingface = True
    file_format = "huggingface"

    def __init__(
        self,
        *,
        record: dict[str, Any],
        added: list[dict[str, Any]],
        normalizer: Normalizer | None,
        pre_tokenizer: list[PreTokenizerStep] | None,
        decoder: Decoder | None,
        token_texts: list[str],
        lossy: list[str],
        components: dict[str, Any],
    ):
        super().__init__(kind=KIND, added=added, lossy=lossy, components=components)
        self.record = record
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self.decoder = decoder
        self.token_texts = token_texts
        self._raw_added = _added_matcher([token for token in added if not token.get("normalized")], None)
        self._normalized_added = _added_matcher([token for token in added if token.get("normalized")], normalizer)
        self._subset_matchers: dict[frozenset[str], tuple[Any, Any]] = {}
        self._aligned: AlignedNormalizer | None = None
        # built on the first offsets call (token_spans)
        self._word_model: WordModel | None = None
        self._split_steps: list[PreTokenizerStep] | None = None
        self._replacements = _metaspace_replacements(record.get("pre_tokenizer"))

    def encode(self, encoder: Any, text: str | bytes, split_added: bool | frozenset[str] = True) -> list[int]:
        """The ids of `text` through the file's pipeline and the core `encoder`; `split_added`
        says which added tokens are cut out (True: all, False: none, or a set of contents)."""
        return encoder.encode_pre_tokens(*self._words(text, split_added))

    def encode_batch(
        self, encoder: Any, texts: list[str | bytes], num_threads: int | None, split_added: bool | frozenset[str] = True
    ) -> list[list[int]]:
        """`encode` of each text: the Python stages (added tokens, normaliser, pre-tokeniser
        steps) run here one text after another, the core's part in parallel on `num_threads`."""
        return encoder.encode_pre_tokens_batch([self._words(text, split_added) for text in texts], num_threads)

    def _matchers(self, split_added: bool | frozenset[str]) -> tuple[Any, Any]:
        """The (raw, normalised) matchers of the added tokens that `split_added` cuts out."""
        if split_added is True:
            return self._raw_added, self._normalized_added
        if split_added is False or not split_added:
            return None, None
        matchers = self._subset_matchers.get(split_added)
        if matchers is None:
            chosen = [token for token in self.added if token["content"] in split_added]
            matchers = (_added_matcher([token for token in chosen if not token.get("normalized")], None),
                        _added_matcher([token for token in chosen if token.get("normalized")], self.normalizer))
            if len(self._subset_matchers) < 16:
                self._subset_matchers[split_added] = matchers
        return matchers

    def _words(self, text: str | bytes, split_added: bool | frozenset[str]) -> tuple[bytes, list[int], list[tuple[int, int]]]:
        """The Python stages of the pipeline: the words of `text` back to back, their lengths,
        and each added token as (index of the word it precedes, id), for the core's encode_pre_tokens."""
        text = self._text(text)
        words: list[bytes] = []
        added: list[tuple[int, int]] = []

        def add_text(piece: str, first: bool) -> None:
            if self.pre_tokenizer is None:
                pieces = [(piece, first)] if piece else []
            else:
                pieces = [(piece, first)]
                for step in self.pre_tokenizer:
                    pieces = step(pieces)
            words.extend(word.encode("utf-8") for word, _ in pieces if word)

        raw_added, normalized_added = self._matchers(split_added)
        for raw, raw_id, raw_first in _split_added(text, raw_added, True):
            if raw_id is not None:
                added.append((len(words), raw_id))
                continue
            normalized = self.normalizer(raw) if self.normalizer is not None else raw
            for piece, piece_id, first in _split_added(normalized, normalized_added, raw_first):
                if piece_id is not None:
                    added.append((len(words), piece_id))
                else:
                    add_text(piece, first)
        return b"".join(words), [len(word) for word in words], added

    def _text(self, text: str | bytes) -> str:
        """`text` as a str; EncodeError for bytes that are not UTF-8 and for a lone surrogate."""
        if not isinstance(text, str):
            try:
                text = bytes(text).decode("utf-8")
            except (UnicodeDecodeError, TypeError) as error:
                raise EncodeError(
                    f"a tokeniser loaded from a {self.kind} file encodes text; the bytes given are not UTF-8 ({error})"
                ) from None
        elif not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                # tokenizers takes Rust strings, which cannot hold one either.
                raise EncodeError(
                    f"a tokeniser loaded from a {self.kind} file encodes valid Unicode; the text has a lone "
                    f"surrogate U+{ord(text[error.start]):04X} at character {error.start}"
                ) from None
        return text

    def token_spans(self, encoder: Any, vocab: list[bytes], text: str) -> tuple[list[int], bytes, list[int], np.ndarray]:
        """For offsets: the ids of `text`; the text its words (after the normaliser and the
        pre-tokeniser) and added tokens spell, as UTF-8; for each of its characters the index of
        the original character it stands for (-1: the empty span at 0; alignment.py has the
        rule); and each token's (start, end) bytes in it (spans.py). ConfigError where the
        words or tokens do not line up with the text."""
        text = self._text(text)
        if self._word_model is None:
            self._word_model = _word_model(self.record["model"], vocab)
            node = self.record.get("pre_tokenizer")
            self._split_steps = None if node is None else read_pre_tokenizer(node, "pre_tokenizer", FormatError)[0]
        node = self.record.get("normalizer")
        if self._aligned is None and node is not None:
            self._aligned = aligned_normalizer(node)
        items: list[tuple[str, int | None]] = []  # (word, None) or (added content, id), in order
        origin: list[int] = []
        for start, end, raw_id in _added_spans(text, self._raw_added):
            if raw_id is not None:
                items.append((text[start:end], raw_id))
                origin.extend(range(start, end))
                continue
            normalized, alignment = text[start:end], list(range(start, end))
            if self._aligned is not None:
                normalized, alignment = self._aligned(normalized, alignment)
            for piece_start, piece_end, piece_id in _added_spans(normalized, self._normalized_added):
                piece, piece_origin = normalized[piece_start:piece_end], alignment[piece_start:piece_end]
                if piece_id is not None:
                    items.append((piece, piece_id))
                    origin.extend(piece_origin)
                    continue
                words = [(piece, start == 0 and piece_start == 0)] if piece else []
                for step in self._split_steps or ():
                    words = step(words)
                words = [word for word, _ in words if word]
                word_origin = spelled_alignment(*(self._spaced(part) for part in ("".join(words), piece)), piece_origin)
                if word_origin is None:
                    raise self._misaligned("the pre-tokeniser's words")
                items.extend((word, None) for word in words)
                origin.extend(word_origin)
        encoded = iter(encoder.encode_pre_tokens_batch(
            [(word.encode("utf-8"), [len(word.encode("utf-8"))], []) for word, token_id in items if token_id is None], 1))
        ids: list[int] = []
        spans: list[int] = []
        at = 0
        for word, token_id in items:
            size = len(word.encode("utf-8"))
            if token_id is not None:
                ids.append(token_id)
                spans += [at, at + size]
            else:
                word_ids = next(encoded)
                lengths = self._word_model.lengths(word, word_ids)
                if lengths is None:
                    raise self._misaligned("the tokens")
                ids += word_ids
                for length in lengths:
                    spans += [at, at + length]
                    at += length
                at -= size
            at += size
        spelled = "".join(word for word, _ in items).encode("utf-8")
        return ids, spelled, origin, np.array(spans, dtype=np.int64).reshape(-1, 2)

    def _spaced(self, text: str) -> str:
        """`text` with Metaspace's replacement character read as the space it stands for."""
        for replacement in self._replacements:
            text = text.replace(replacement, " ")
        return text

    def _misaligned(self, what: str) -> ConfigError:
        return ConfigError(f"offsets: {what} of this {self.kind} file do not line up with its normalised text, "
                           f"so they do not map back to the input")

    def decode(self, ids: list[int]) -> str:
        """The text of `ids` as `tokenizers` decodes it (no tokens skipped)."""
        tokens = [self.token_texts[token_id] for token_id in ids]
        if self.decoder is None:
            return " ".join(tokens)
        return "".join(self.decoder(tokens))

    def save_huggingface(self, path: str | Path) -> None:
        """Writes the file back as it was read, which keeps every id."""
        save_record(self.record, path)


def _metaspace_replacements(node: Any) -> tuple[str, ...]:
    """The replacement characters of the Metaspace nodes of a pre-tokenizer tree."""
    if not isinstance(node, dict):
        return ()
    if node.get("type") == "Sequence":
        return tuple(char for child in node.get("pretokenizers") or [] for char in _metaspace_replacements(child))
    return (node.get("replacement", "\u2581"),) if node.get("type") == "Metaspace" else ()


def _word_model(model: dict[str, Any], vocab: list[bytes]) -> WordModel:
    """What spans.py needs of a (checked) model node; `vocab` the bytes each id stands for."""
    kind = model.get("type") or "BPE"
    entries = model["vocab"]
    texts = [entry[0] for entry in entries] if kind == "Unigram" else list(entries)
    if kind == "Unigram":
        unk = model.get("unk_id")
    else:
        name = model.get("unk_token", "[UNK]" if kind == "WordPiece" else None)
        unk = entries.get(name) if name is not None else None
    continuation = (model.get("continuing_subword_prefix", "##") or "").encode("utf-8") if kind == "WordPiece" else None
    return WordModel(surfaces=vocab, unk=unk, continuation=continuation,
                     known=frozenset(text for text in texts if len(text) == 1),
                     fuse_unk=kind == "Unigram" or bool(model.get("fuse_unk")))


AddedMatcher = tuple[Any, list[int]]  # the core's AddedTokens, and the id of each of its contents


def _added_matcher(tokens: list[dict[str, Any]], normalizer: Normalizer | None) -> AddedMatcher | None:
    """The core matcher of the added tokens (their contents normalised by `normalizer`, if
    given), which finds them as `tokenizers` does, and each content's id; None when there are
    none. The first of two tokens with one content keeps it."""
    ids: dict[str, int] = {}
    strips: dict[str, tuple[bool, bool]] = {}
    for token in tokens:
        content = token["content"] if normalizer is None else normalizer(token["content"])
        if content and content not in ids:
            ids[content] = token["id"]
            strips[content] = (bool(token.get("lstrip")), bool(token.get("rstrip")))
    if not ids:
        return None
    contents = list(ids)
    matcher = _core.AddedTokens([content.encode("utf-8") for content in contents],
                                [strips[content][0] for content in contents], [strips[content][1] for content in contents])
    return matcher, [ids[content] for content in contents]


def _split_added(text: str, matcher: AddedMatcher | None, first: bool) -> list[tuple[str, int | None, bool]]:
    """(piece, None, starts the input) for text between added tokens and ("", id, False) for each token."""
    return [
        ("", token_id, False) if token_id is not None else (text[start:end], None, first and start == 0)
        for start, end, token_id in _added_spans(text, matcher)
    ]


def _added_spans(text: str, matcher: AddedMatcher | None) -> list[tuple[int, int, int | None]]:
    """(start, end, None) for each non-empty stretch of text between added tokens and (start,
    end, id) for each token's content (its lstrip/rstrip whitespace belongs to neither)."""
    if matcher is None:
        return [(0, len(text), None)] if text else []
    core, ids = matcher
    return [(start, end, None if index is None else ids[index]) for start, end, index in core.spans(text)]
