"""The Unigram extension of `polytok.extend`: EM over the base's pieces and new candidates.

The base's pieces keep their ids and their scores, and take part in every lattice; EM
estimates only the new candidates (seeded from the corpus as Unigram training seeds them, less
the base's pieces), and pruning removes only them (src/train/unigram.rs `extend`). A new piece
scores as its share of the expected uses of all pieces on the new corpus, the base's included.
Because the base's scores stay, a text in which no new piece occurs has the lattice the base
gives it, and so encodes exactly as the base encodes it.

The base is a polytok Unigram (segmenter "viterbi"; new pieces take ids after every existing
id, special ids included) or a SentencePiece Unigram model. A SentencePiece base is counted as
its trainer sees text: each document through the model's normaliser, cut before each "▁" into
pre-tokens (trainers/extend_pipeline.py `pipeline_counts`). The new pieces are appended to the serialised model as
NORMAL pieces, with scores no lower than the base's lowest (so the score of an unknown
character, the lowest minus 10, does not move); sentencepiece reads the file with the base's
ids unchanged and the new ones after them. A model without byte fallback has no byte pieces:
the extension refuses it, or with `add_missing_bytes` appends the 256 byte pieces first and
turns byte fallback on, so no character is unknown any more.
"""
from __future__ import annotations

from typing import Any

from polytok.counts import PreTokenCounts
from polytok.errors import CorpusError
from polytok.formats.loaded import LoadedTokenizer
from polytok.formats.sentencepiece.read import (
    BYTE, NORMAL, UNIGRAM, USER_DEFINED, SentencePiecePipeline, tokenizer_from_sentencepiece,
)
from polytok.formats.sentencepiece.write import appended_pieces
from polytok.tokenizer import Tokenizer
from polytok.trainers.extend_pipeline import no_byte_fallback, pipeline_counts
from polytok.trainers.unigram import learn_unigram
# Pieces of a SentencePiece base that its Viterbi never takes from text (control, unknown and
# unused pieces, the "<0x..>" spellings of byte pieces) are in the EM's lattices with this
# score below the unknown score: never chosen, and no candidate can repeat their text.
_NEVER_TAKEN = 1e4


def is_sentencepiece_unigram(base: Any) -> bool:
    """Whether `base` was read from a SentencePiece Unigram model."""
    return isinstance(base, LoadedTokenizer) and isinstance(base.pipeline, SentencePiecePipeline) \
        and base.pipeline.spec["model_type"] == UNIGRAM


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
        raise no_byte_fallback(can_add=True)
    counts = pipeline_counts(base, source, num_threads, progress, corpus_options)
    pieces, scores = _sentencepiece_lattice(spec["pieces"])
    learned, learned_scores, _ = _learn(counts, pieces, scores, budget, options, progress)
    lowest = min((score for _, score, kind in spec["pieces"] if kind == NORMAL), default=0.0)
    new = [(f"<0x{byte:02X}>", 0.0, BYTE) for byte in range(256)] if not byte_fallback else []
    new += [(piece.decode("utf-8"), max(score, lowest), NORMAL) for piece, score in zip(learned, learned_scores)]
    data = appended_pieces(pipeline.data, new, byte_fallback=not byte_fallback)
    return tokenizer_from_sentencepiece(data, "the extended SentencePiece model")


def _learn(counts: PreTokenCounts, pieces: list[bytes], scores: list[float], budget: int, options: dict[str, Any],
           progress: bool) -> tuple[list[bytes], list[float], list[tuple[int, float]]]:
    """The new pieces (best first), their scores and the EM history of extending `pieces`."""
    if len(counts) == 0:
        raise CorpusError("the pre-token counts are empty: there is no text to learn new pieces from")
    vocab, new_scores, history = learn_unigram(counts, budget, base=(pieces, scores), progress=progress, **options)
    return vocab[len(pieces):], new_scores[len(pieces):], history


def _sentencepiece_lattice(spec_pieces: list[tuple[str, float, int]]) -> tuple[list[bytes], list[float]]:
    """The base's pieces as the EM sees them: the 256 bytes (a one-byte NORMAL piece's score, else
    the unknown score: SentencePiece spells only unknown characters in bytes), the NORMAL pieces,
    the user-defined ones (always taken whole: score 0), and the rest out of reach."""
    normal = [score for _, score, kind in spec_pieces if kind == NORMAL]
    unknown = (min(normal) if normal else 0.0) - 10.0
    byte_scores = [unknown] * 256
    pieces: list[bytes] = []
    scores: list[float] = []
    for text, score, kind in spec_pieces:
        value = score if kind == NORMAL else 0.0 if kind == USER_DEFINED else unknown - _NEVER_TAKEN
        encoded = text.encode("utf-8")
        if len(encoded) == 1:
            byte_scores[encoded[0]] = value
        else:
            pieces.append(encoded)
            scores.append(value)
    return [bytes([byte]) for byte in range(256)] + pieces, byte_scores + scores
