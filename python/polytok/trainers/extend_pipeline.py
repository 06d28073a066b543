"""`polytok.extend` of a tokeniser that keeps its file's pipeline: BPE continued on a HF
tokenizer.json BPE with its own normaliser or pre-tokeniser steps (the Llama and Mistral files:
text pieces with byte fallback), or on a SentencePiece BPE model; and the counting of a corpus
as such a pipeline sees it, which the Unigram extension of a SentencePiece model shares.

Counting: each document goes through the pipeline's own stages. A HF file's added tokens are
cut out, its normaliser and pre-tokeniser steps run, and its core regex splits the words where
it has one; a file without one (whose words are whole normalised texts) is cut before each "▁",
as SentencePiece's trainer cuts. A SentencePiece model's normaliser runs, and the text is cut
before each "▁".

Training: each pre-token is segmented by the base's own encoder, and the merge loop goes on
from there with the base's merge list replayed first (`Rule::Merges` of src/train/extend.rs).
Byte-fallback, unknown, control and added tokens never take part in a new merge: a file spells
its tokens as text, and no text spells their joins. The new tokens take ids after every existing
id; a HF file gains them in `model.vocab` and the merges in `model.merges`, a SentencePiece
model gains them as NORMAL pieces scored below every piece (SentencePiece joins the pair whose
join scores highest, so every base join comes first). The file's reader then builds the
extended tokeniser, so polytok encodes it as `tokenizers` and `sentencepiece` do.

A base that turns unknown characters into its unknown token (a SentencePiece model without byte
fallback, a HF file with an unknown token and without) is refused unless `add_missing_bytes`:
then the 256 byte pieces "<0x00>".."<0xFF>" take the first new ids and byte fallback is turned
on (for a HF file model.byte_fallback, and a ByteFallback step first in its decoder).
"""
from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import islice
from typing import Any

from polytok import _core
from polytok.corpus import iter_documents, texts
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError, EncodeError
from polytok.formats.huggingface.pipeline import HuggingFacePipeline
from polytok.formats.huggingface.pre_tokenizers import core_split, to_byte_level
from polytok.formats.huggingface.read import tokenizer_from_huggingface

from polytok.formats.loaded import LoadedTokenizer
from polytok.formats.sentencepiece.read import (
    BPE, BYTE, NORMAL, USER_DEFINED, SentencePiecePipeline, tokenizer_from_sentencepiece,
)
from polytok.formats.sentencepiece.write import appended_pieces
from polytok.pretokenize import resolve_pattern
from polytok.trainers.bpe import run_merge_loop

# SentencePiece's trainer splits normalised text before each "▁" (split_by_whitespace).
SENTENCEPIECE_PRE_TOKEN = "▁[^▁]*|[^▁]+"
# The byte pieces add_missing_bytes adds, in byte order, as SentencePiece and HF's byte fallback spell them.
BYTE_PIECES = [f"<0x{byte:02X}>" for byte in range(256)]
# Documents normalised per core call (in parallel within it).
_NORMALIZE_BATCH = 256


def is_pipeline_bpe(base: Any) -> bool:
    """Whether `base` is a BPE read from a HF tokenizer.json or a SentencePiece model that keeps
    its file's pipeline."""
    if not isinstance(base, LoadedTokenizer) or base.algorithm != "bpe":
        return False
    if isinstance(base.pipeline, SentencePiecePipeline):
        return base.pipeline.spec["model_type"] == BPE
    return isinstance(base.pipeline, HuggingFacePipeline)


def extend_pipeline_bpe(base: LoadedTokenizer, source: Any, budget: int, *, min_frequency: int,
                        character_coverage: float, add_missing_bytes: bool, num_threads: int | None,
                        progress: bool, corpus_options: dict[str, Any]) -> LoadedTokenizer:
    """`base` with at most `budget` new tokens learned on `source` (a corpus, or PreTokenCounts
    cut as `pipeline_counts` cuts): first the characters it spells in bytes (at most half of
    `budget`), then merges."""
    if not 0.0 < character_coverage <= 1.0:
        raise ConfigError(f"character_coverage must be in (0, 1], got {character_coverage!r}")
    missing_fallback = lacks_byte_fallback(base)
    if missing_fallback and not add_missing_bytes:
        raise no_byte_fallback()
    # (before counting, so that a file whose decoder cannot gain ByteFallback is refused first)
    current = _grown(base, [(text.encode(), BYTE) for text in BYTE_PIECES], [], byte_fallback=True) \
        if missing_fallback else base
    counts = pipeline_counts(base, source, num_threads, progress, corpus_options)
    # the characters take at most half the budget, so that merges always have the other half
    characters = _new_characters(current, counts, character_coverage, budget // 2)
    if characters:
        current = _grown(current, [(character.encode("utf-8"), NORMAL) for character in characters], [])
    pairs: list[tuple[int, int]] = []
    if budget > len(characters):
        pairs, _ = run_merge_loop(
            partial(_core.extend_bpe, current._encoder, counts.data, counts.offsets, counts.counts, current.vocab,
                    False, budget - len(characters), current.n_vocab, kept_apart=_kept_apart(current)),
            budget - len(characters), min_frequency, num_threads, progress, "cannot extend",
        )
    if not pairs and not characters:
        raise CorpusError(
            f"the corpus has no pair of adjacent tokens, under the base's cuts, that occurs {min_frequency} times, "
            "and no character the base spells in bytes: nothing to learn (is the corpus empty?)"
        )
    tokens = list(current.vocab)
    for left, right in pairs:
        tokens.append(tokens[left] + tokens[right])
    new = [(token, NORMAL) for token in tokens[current.n_vocab:]]
    return _grown(current, new, pairs) if new else current


def _new_characters(base: LoadedTokenizer, counts: PreTokenCounts, coverage: float, limit: int) -> list[str]:
    """The characters of the corpus that a character-level base spells in bytes (no token has
    them), most frequent first, as many as cover `coverage` of their occurrences (at most
    `limit`); none for a byte-level base."""
    known = _characters(base)
    if known is None:
        return []
    frequency: Counter[str] = Counter()
    for pre_token, number in counts:
        for character in pre_token.decode("utf-8", "replace"):
            if character not in known:
                frequency[character] += number
    total = sum(frequency.values())
    chosen: list[str] = []
    covered = 0
    for character, number in sorted(frequency.items(), key=lambda item: (-item[1], item[0])):
        if covered >= coverage * total or len(chosen) == limit:
            break
        chosen.append(character)
        covered += number
    return chosen


def _characters(base: LoadedTokenizer) -> frozenset[str] | None:
    """The characters a base has as tokens, or None for a byte-level one (it spells every byte)."""
    pipeline = base.pipeline
    if isinstance(pipeline, SentencePiecePipeline):
        return frozenset(text for text, _, kind in pipeline.spec["pieces"] if kind in (NORMAL, USER_DEFINED)
                         and len(text) == 1)
    assert isinstance(pipeline, HuggingFacePipeline)
    if _is_byte_level(pipeline.record):
        return None
    return frozenset(text for text in pipeline.record["model"]["vocab"] if len(text) == 1)


def _grown(base: LoadedTokenizer, pieces: list[tuple[bytes, int]], pairs: list[tuple[int, int]], *,
           byte_fallback: bool = False) -> LoadedTokenizer:
    """`base` with `pieces` (bytes, SentencePiece piece type) taking the next ids, the last
    len(pairs) of them made by those merges, read back from its own format. A SentencePiece
    model's new NORMAL pieces score below every piece, in order. (Only a byte-level HF file's
    pieces may be partial characters: the kept-apart tokens are the only ones that are not text.)"""
    pipeline = base.pipeline
    if isinstance(pipeline, SentencePiecePipeline):
        lowest = min((score for _, score, kind in pipeline.spec["pieces"] if kind == NORMAL), default=0.0)
        scored = [(piece.decode("utf-8"), lowest - 1.0 - k if kind == NORMAL else 0.0, kind)
                  for k, (piece, kind) in enumerate(pieces)]
        data = appended_pieces(pipeline.data, scored, byte_fallback=byte_fallback)
        return tokenizer_from_sentencepiece(data, "the extended SentencePiece model")
    assert isinstance(pipeline, HuggingFacePipeline)
    record = with_byte_fallback(pipeline.record) if byte_fallback else pipeline.record
    return tokenizer_from_huggingface(_extended_record(record, base.n_vocab, [piece for piece, _ in pieces], pairs),
                                      "the extended tokenizer.json")


def lacks_byte_fallback(base: LoadedTokenizer) -> bool:
    """Whether `base` turns a character outside its vocabulary into its unknown token: a
    SentencePiece model without byte fallback, a HF file with an unknown token and without."""
    pipeline = base.pipeline
    if isinstance(pipeline, SentencePiecePipeline):
        return not pipeline.spec["byte_fallback"]
    assert isinstance(pipeline, HuggingFacePipeline)
    model = pipeline.record["model"]
    unknown = model.get("unk_id") if model.get("type") == "Unigram" else model.get("unk_token")
    if model.get("byte_fallback") or unknown is None:
        return False
    # A file that also names an unknown token never uses it if every byte is a token (byte-level).
    return not all(_is_token(base, bytes([byte])) for byte in range(256))


def _is_token(base: LoadedTokenizer, token: bytes) -> bool:
    try:
        base.token_id(token)
    except EncodeError:
        return False
    return True


def no_byte_fallback() -> ConfigError:
    """The refusal of a base without byte fallback."""
    return ConfigError(
        "the base has no byte fallback: bytes 0x00-0xff are no tokens (a character outside its vocabulary becomes "
        "the unknown token), so the extension could not spell every text; pass add_missing_bytes=True "
        "(--add-missing-bytes) to add the 256 byte pieces as the first new ids and turn byte fallback on"
    )


def with_byte_fallback(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of the tokenizer.json `record` with byte fallback on: model.byte_fallback set, and
    a ByteFallback step first in the decoder, so that runs of <0xXX> tokens decode to their text
    before the file's own steps see it. A file without a decoder is refused: `tokenizers` joins
    its tokens with spaces, and any decoder would join them without."""
    decoder = record.get("decoder")
    if not isinstance(decoder, dict):
        raise ConfigError("add_missing_bytes turns byte fallback on, and a HF tokenizer.json decodes byte pieces "
                          "with a ByteFallback decoder step; this file has no decoder to add it to (tokenizers joins its "
                          "tokens with spaces), so give it the decoder its tokens need first")
    record = copy.deepcopy(record)
    record["model"]["byte_fallback"] = True
    steps = decoder.get("decoders") if decoder.get("type") == "Sequence" else [decoder]
    if not any(isinstance(step, dict) and step.get("type") == "ByteFallback" for step in steps or []):
        record["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, *copy.deepcopy(steps or [])]}
    return record


def pipeline_counts(base: LoadedTokenizer, source: Any, num_threads: int | None, progress: bool,
                    corpus_options: dict[str, Any]) -> PreTokenCounts:
    """The corpus counted as the base's pipeline cuts it (module docstring), or given counts
    checked to be cut with the same pattern."""
    pipeline = base.pipeline
    if isinstance(pipeline, SentencePiecePipeline):
        pattern: str | None = SENTENCEPIECE_PRE_TOKEN
    else:
        assert isinstance(pipeline, HuggingFacePipeline)
        split = core_split(pipeline.record.get("pre_tokenizer"))
        pattern = split[1] if split is not None else None
        pattern = SENTENCEPIECE_PRE_TOKEN if pattern is None else pattern
    if isinstance(source, PreTokenCounts):
        if corpus_options:
            raise ConfigError(f"{sorted(corpus_options)} only apply when reading a corpus, not PreTokenCounts")
        if source.pattern is None or resolve_pattern(source.pattern) != resolve_pattern(pattern):
            raise ConfigError(
                f"the PreTokenCounts were counted with pattern {source.pattern!r}; this base needs its corpus "
                f"through its pipeline, counted with {pattern!r}"
            )
        return source
    documents = iter_documents(source, **corpus_options)
    if isinstance(pipeline, SentencePiecePipeline):
        pieces: Iterable[bytes] = _normalized(pipeline, documents, num_threads)
    else:
        pieces = _words(pipeline, documents)
    return count(texts(pieces), pattern=pattern, num_threads=num_threads, progress=progress)


def _normalized(pipeline: SentencePiecePipeline, documents: Iterable[str | bytes],
                num_threads: int | None) -> Iterator[bytes]:
    """Each document through the model's normaliser, a batch at a time."""
    iterator = iter(documents)
    while batch := list(islice(iterator, _NORMALIZE_BATCH)):
        yield from pipeline.normalizer_core.normalize(batch, num_threads)


def _words(pipeline: HuggingFacePipeline, documents: Iterable[str | bytes]) -> Iterator[bytes]:
    """The words a HF pipeline hands its model for each document (added tokens cut out)."""
    for document in documents:
        data, lengths, _ = pipeline._words(document, True)
        at = 0
        for length in lengths:
            yield data[at:at + length]
            at += length


def _kept_apart(base: LoadedTokenizer) -> list[int]:
    """The ids no new merge may join: every token that is not plain text of the model (byte
    fallback pieces, the unknown token, control and added tokens)."""
    pipeline = base.pipeline
    if isinstance(pipeline, SentencePiecePipeline):
        return [index for index, (_, _, kind) in enumerate(pipeline.spec["pieces"]) if kind != NORMAL]
    assert isinstance(pipeline, HuggingFacePipeline)
    model = pipeline.record["model"]
    vocab = model["vocab"]
    apart = {token["id"] for token in pipeline.added}
    if model.get("unk_token") in vocab:
        apart.add(vocab[model["unk_token"]])
    if model.get("byte_fallback"):
        apart.update(token_id for text, token_id in vocab.items()
                     if len(text) == 6 and text.startswith("<0x") and text.endswith(">"))
    return sorted(apart)


def _extended_record(record: dict[str, Any], first_id: int, tokens: list[bytes],
                     pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """The tokenizer.json `record` with `tokens` in model.vocab from `first_id` on, spelled as
    the file spells its tokens, and the merges of `pairs` (which make the last len(pairs) of
    them) appended."""
    record = copy.deepcopy(record)
    model = record["model"]
    byte_level = _is_byte_level(record)
    spelling = {token_id: text for text, token_id in model["vocab"].items()}
    for k, token in enumerate(tokens):
        spelling[first_id + k] = to_byte_level(token) if byte_level else token.decode("utf-8")
        if spelling[first_id + k] in model["vocab"]:
            raise ConfigError(f"the base has a token spelled {spelling[first_id + k]!r} already (id "
                              f"{model['vocab'][spelling[first_id + k]]}); a new one spelled so would take its id")
        model["vocab"][spelling[first_id + k]] = first_id + k
    merges = [(spelling[left], spelling[right]) for left, right in pairs]
    existing = model.get("merges") or []
    if all(isinstance(merge, str) for merge in existing) and not any(" " in text for merge in merges for text in merge):
        model["merges"] = list(existing) + [f"{left} {right}" for left, right in merges]
    else:  # a spelling with a space needs the list form, which tokenizers reads as well
        model["merges"] = [merge.split(" ", 1) if isinstance(merge, str) else merge for merge in existing]
        model["merges"] += [[left, right] for left, right in merges]
    return record


def _is_byte_level(record: dict[str, Any]) -> bool:
    """Whether a tokenizer.json spells its tokens in GPT-2's byte-level alphabet."""
    def has(node: Any) -> bool:
        if not isinstance(node, dict):
            return False
        if node.get("type") == "ByteLevel":
            return True
        return any(has(child) for child in node.get("pretokenizers") or [])
    return has(record.get("pre_tokenizer"))
