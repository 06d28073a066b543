"""The Unigram extension of `polytok.extend`: EM over the base's pieces and new candidates.

The base's pieces keep their ids and their scores, and take part in every lattice; EM
estimates only the new candidates (seeded from the corpus as Unigram training seeds them, less
the base's pieces), and pruning removes only them (src/train/unigram.rs `extend`). A new piece
scores as its share of the expected uses of all pieces on the new corpus, the base's included.
Because the base's scores stay, a text in which no new piece occurs has the lattice the base
gives it, and so encodes exactly as the base encodes it.

The base is a polytok Unigram (segmenter "viterbi"; new pieces take ids after every existing
id, special ids included), a SentencePiece Unigram model or a HF tokenizer.json Unigram that
keeps its pipeline (T5, ALBERT). A file's base is counted as its pipeline hands text to the
model (trainers/extend_pipeline.py `pipeline_counts`): a SentencePiece model's normaliser, then
cut before each "▁"; a HF file's added tokens cut out, its normaliser and pre-tokeniser. The new
pieces are appended to the file (NORMAL pieces of the serialised model; entries of HF's
model.vocab, after the places of the added tokens beyond it), with scores no lower than the
base's lowest (so the score of an unknown character, the lowest minus 10, does not move); the
file's own library reads it with the base's ids unchanged and the new ones after them. A base
that turns unknown characters into its unknown token (no byte fallback) is refused, or with
`add_missing_bytes` gains the 256 byte pieces first and byte fallback, so no character is
unknown any more.

The EM's lattice is byte-level: a character the base has no piece for costs the unknown score
once per byte there, once per character in the file's own Viterbi. Only the training sees this;
the result is read back by the file's reader, which cuts as the file's library cuts. HF's
Unigram, unlike SentencePiece, finds every entry of model.vocab in text (byte pieces and
special tokens' entries too), so the HF lattice holds every entry at its score.
"""
from __future__ import annotations

import copy
from typing import Any

from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.formats.huggingface.pipeline import HuggingFacePipeline
from polytok.formats.huggingface.read import tokenizer_from_huggingface
from polytok.formats.huggingface.write import as_tokenizers_reads_it
from polytok.formats.loaded import LoadedTokenizer
from polytok.formats.sentencepiece.read import (
    BYTE, NORMAL, UNIGRAM, USER_DEFINED, SentencePiecePipeline, tokenizer_from_sentencepiece,
)
from polytok.formats.sentencepiece.write import appended_pieces
from polytok.tokenizer import Tokenizer
from polytok.trainers.extend_pipeline import (
    BYTE_PIECES, lacks_byte_fallback, no_byte_fallback, pipeline_counts, with_byte_fallback,
)
from polytok.trainers.unigram import learn_unigram
# Pieces of a SentencePiece base that its Viterbi never takes from text (control, unknown and
# unused pieces, the "<0x..>" spellings of byte pieces) are in the EM's lattices with this
# score below the unknown score: never chosen, and no candidate can repeat their text.
_NEVER_TAKEN = 1e4


def is_sentencepiece_unigram(base: Any) -> bool:
    """Whether `base` was read from a SentencePiece Unigram model."""
    return isinstance(base, LoadedTokenizer) and isinstance(base.pipeline, SentencePiecePipeline) \
        and base.pipeline.spec["model_type"] == UNIGRAM


def is_huggingface_unigram(base: Any) -> bool:
    """Whether `base` is a Unigram read from a HF tokenizer.json that keeps its file's pipeline."""
    return isinstance(base, LoadedTokenizer) and isinstance(base.pipeline, HuggingFacePipeline) \
        and base.pipeline.record["model"].get("type") == "Unigram"


def extend_native_unigram(base: Tokenizer, counts: PreTokenCounts, budget: int, options: dict[str, Any],
                          totals: dict[str, Any], progress: bool) -> Tokenizer:
    """A polytok Unigram `base` with at most `budget` pieces learned on `counts`."""
    first: dict[bytes, int] = {}
    for token_id, token in enumerate(base.vocab):
        if token:
            first.setdefault(token, token_id)
    order = [first[bytes([byte])] for byte in range(256)] + [i for token, i in first.items() if len(token) > 1]
    scores = base.scores
    assert scores is not None  # a viterbi Tokenizer has them
    learned, learned_scores, history = _learn(counts, [base.vocab[i] for i in order], [scores[i] for i in order],
                                              budget, options, progress)
    gap = base.n_vocab - len(base.vocab)
    filler = min(score for token, score in zip(base.vocab, scores) if token)
    record = {"base_vocab_size": base.vocab_size, "first_new_id": base.n_vocab, "new_tokens_asked": budget,
              "new_tokens": len(learned)}
    training = {"extended": record, **options, "em_rounds": [{"pieces": p, "log_likelihood": ll} for p, ll in history],
                "stopped_early": len(learned) < budget, **totals}
    return Tokenizer(list(base.vocab) + [b""] * gap + learned, segmenter="viterbi", pattern=base.pattern,
                     special_tokens=base.special_tokens, scores=list(scores) + [filler] * gap + learned_scores,
                     algorithm="unigram", training=training)


def extend_sentencepiece(base: LoadedTokenizer, source: Any, budget: int, options: dict[str, Any], *,
                         add_missing_bytes: bool, num_threads: int | None, progress: bool,
                         corpus_options: dict[str, Any]) -> LoadedTokenizer:
    """A SentencePiece Unigram `base` with at most `budget` pieces learned on `source` (a corpus,
    or PreTokenCounts of its normalised text cut as `pipeline_counts` cuts)."""
    pipeline = base.pipeline
    assert isinstance(pipeline, SentencePiecePipeline)
    spec = pipeline.spec
    byte_fallback = spec["byte_fallback"]
    if not byte_fallback and not add_missing_bytes:
        raise no_byte_fallback()
    counts = pipeline_counts(base, source, num_threads, progress, corpus_options)
    pieces, scores = _sentencepiece_lattice(spec["pieces"])
    learned, learned_scores, _ = _learn(counts, pieces, scores, budget, options, progress)
    lowest = min((score for _, score, kind in spec["pieces"] if kind == NORMAL), default=0.0)
    new = [(f"<0x{byte:02X}>", 0.0, BYTE) for byte in range(256)] if not byte_fallback else []
    new += [(piece.decode("utf-8"), max(score, lowest), NORMAL) for piece, score in zip(learned, learned_scores)]
    data = appended_pieces(pipeline.data, new, byte_fallback=not byte_fallback)
    return tokenizer_from_sentencepiece(data, "the extended SentencePiece model")


def extend_huggingface_unigram(base: LoadedTokenizer, source: Any, budget: int, options: dict[str, Any], *,
                               add_missing_bytes: bool, num_threads: int | None, progress: bool,
                               corpus_options: dict[str, Any]) -> LoadedTokenizer:
    """A HF tokenizer.json Unigram `base` with at most `budget` pieces learned on `source` (a
    corpus, or PreTokenCounts of the words its pipeline hands the model, cut as
    `pipeline_counts` cuts), appended to model.vocab after every existing id."""
    pipeline = base.pipeline
    assert isinstance(pipeline, HuggingFacePipeline)
    missing_bytes = lacks_byte_fallback(base)
    if missing_bytes and not add_missing_bytes:
        raise no_byte_fallback()
    record = with_byte_fallback(pipeline.record) if missing_bytes else copy.deepcopy(pipeline.record)
    counts = pipeline_counts(base, source, num_threads, progress, corpus_options)
    entries = [[text, score] for text, score in record["model"]["vocab"]]
    # HF's unknown score is the lowest score less 10: every piece added scores no lower, so it stays
    lowest = min(float(score) for _, score in entries)
    entries += _held_places(pipeline, len(entries), base.n_vocab, lowest)
    if missing_bytes:
        entries += [[text, lowest] for text in BYTE_PIECES]
    pieces, scores = _byte_first_lattice([(text.encode("utf-8"), as_tokenizers_reads_it(float(score)))
                                          for text, score in entries])
    learned, learned_scores, _ = _learn(counts, pieces, scores, budget, options, progress)
    floor = as_tokenizers_reads_it(lowest)
    entries += [[piece.decode("utf-8"), score if as_tokenizers_reads_it(score) >= floor else lowest]
                for piece, score in zip(learned, learned_scores)]
    record["model"]["vocab"] = entries
    return tokenizer_from_huggingface(record, "the extended tokenizer.json")


def _held_places(pipeline: HuggingFacePipeline, model_size: int, size: int, score: float) -> list[list[Any]]:
    """model.vocab entries for the ids from `model_size` to `size`, which added tokens hold: HF
    numbers a Unigram's pieces by their place in the list, and gives an added token the id of
    the piece with its text, so each one's text holds its place (HF cuts added tokens out of the
    text before the model runs, so the model never produces them)."""
    contents = {token["id"]: token["content"] for token in pipeline.added}
    texts = {text for text, _ in pipeline.record["model"]["vocab"]}
    places = []
    for token_id in range(model_size, size):
        content = contents[token_id]  # (the reader leaves no id free in a Unigram file)
        if content in texts:
            raise ConfigError(f"the added token {content!r} (id {token_id}) is also a piece of model.vocab; HF gives "
                              f"it that piece's id, so the new pieces could not follow it")
        places.append([content, score])
    return places


def _learn(counts: PreTokenCounts, pieces: list[bytes], scores: list[float], budget: int, options: dict[str, Any],
           progress: bool) -> tuple[list[bytes], list[float], list[tuple[int, float]]]:
    """The new pieces (best first), their scores and the EM history of extending `pieces`."""
    if len(counts) == 0:
        raise CorpusError("the pre-token counts are empty: there is no text to learn new pieces from")
    vocab, new_scores, history = learn_unigram(counts, budget, base=(pieces, scores), progress=progress, **options)
    return vocab[len(pieces):], new_scores[len(pieces):], history


def _sentencepiece_lattice(spec_pieces: list[tuple[str, float, int]]) -> tuple[list[bytes], list[float]]:
    """The base's pieces as the EM sees them: the NORMAL pieces, the user-defined ones (always
    taken whole: score 0), and the rest out of reach (`_byte_first_lattice`)."""
    normal = [score for _, score, kind in spec_pieces if kind == NORMAL]
    unknown = (min(normal) if normal else 0.0) - 10.0
    return _byte_first_lattice([(text.encode("utf-8"), score if kind == NORMAL else 0.0 if kind == USER_DEFINED
                                 else unknown - _NEVER_TAKEN) for text, score, kind in spec_pieces], unknown)


def _byte_first_lattice(pieces: list[tuple[bytes, float]],
                        unknown: float | None = None) -> tuple[list[bytes], list[float]]:
    """`pieces` (text, score) as the EM takes a base: the 256 bytes first (a one-byte piece's
    score, else `unknown`, by default the lowest score less 10, as SentencePiece and HF score an
    unknown character: both spell only those in bytes), then the longer pieces in order."""
    if unknown is None:
        unknown = min((score for _, score in pieces), default=0.0) - 10.0
    byte_scores = [unknown] * 256
    longer: list[bytes] = []
    scores: list[float] = []
    for piece, score in pieces:
        if len(piece) == 1:
            byte_scores[piece[0]] = score
        else:
            longer.append(piece)
            scores.append(score)
    return [bytes([byte]) for byte in range(256)] + longer, byte_scores + scores
