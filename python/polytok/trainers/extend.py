"""`polytok.extend`: a tokeniser continued on a new corpus, every base id kept.

BPE continuation counts the corpus with the base's pattern, cuts each pre-token as the base
encoder cuts it, and goes on merging the most frequent adjacent pair of tokens, as BPE training
does (ties: the highest count, then the smallest (left id, right id)). New tokens take ids after
every existing id, so the base's special ids and gaps (cl100k's unused 100256) stay where they
are; the pre-tokeniser and the special tokens are the base's.

The merge rule stays the base's, so the extension encodes what the base encodes wherever no new
token applies:
- a base with a merge list (polytok's BPE, HF files) replays it, then the new merges;
- a tiktoken base (ranks, no list) joins the adjacent pair whose bytes are the lowest-ranked
  token. New tokens rank after every base token, so all base merges happen first. A new merge can
  make a base merge possible again (new token + neighbour = a base token); training applies the
  rule exactly as tiktoken will when it reads the saved ranks.
A pair whose bytes already are a token is never merged (under a merge list, the base can leave
such a pair apart); it would give two ids the same bytes.

"unigram" runs EM over the base's pieces, their scores fixed, and new candidates (a polytok
Unigram, a SentencePiece Unigram model or a HF tokenizer.json Unigram: trainers/extend_unigram.py).

The ConvexTok extension solves the relaxation with the base's tokens fixed (free, outside the
budget; see `certify(..., base=)`), rounds the other colours to K tokens and cuts by shortest
path over the base's tokens and the new ones; its certificate bounds every K-token extension.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core, checks
from polytok.base_tokenizer import BaseTokenizer
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.formats import load
from polytok.certify import Certificate, encoder_tokens, extension_covers, solve_extension
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.lp.relax import check_relax_options
from polytok.lp.rounding import INTEGRAL_TOLERANCE, best_colours, check_rounding
from polytok.pretokenize import resolve_pattern
from polytok.tokenizer import Tokenizer
from polytok.trainers import unigram
from polytok.trainers.bpe import run_merge_loop
from polytok.trainers.extend_pipeline import extend_pipeline_bpe, is_pipeline_bpe
from polytok.trainers.extend_unigram import (
    extend_huggingface_unigram, extend_native_unigram, extend_sentencepiece, is_huggingface_unigram,
    is_sentencepiece_unigram,
)

ALGORITHMS = ("bpe", "convex", "unigram")


def extend(
    base: BaseTokenizer | str | Path,
    corpus_or_counts: PreTokenCounts | str | Path | Iterable[str | bytes],
    new_tokens: int,
    algorithm: str = "bpe",
    *,
    min_frequency: int = 1,
    rounding: str = "det",
    tolerance: float = 1e-4,
    time_limit: float | None = None,
    seed_size: int = 1_000_000,
    max_piece_bytes: int = 16,
    shrinking_factor: float = 0.75,
    sub_iterations: int = 2,
    add_missing_bytes: bool = False,
    character_coverage: float = 0.9995,
    num_threads: int | None = None,
    progress: bool = True,
    text_field: str | None = None,
    text_column: str | None = None,
    errors: str | None = None,
) -> BaseTokenizer:
    """`base` (a tokeniser, or a file `polytok.load` reads) with at most `new_tokens` tokens learned
    on a corpus (anything `polytok.count` reads, counted with the base's pattern and special
    tokens; `text_field`, `text_column` and `errors` say how to read it) or on PreTokenCounts made
    with the base's pattern.

    "bpe" continues the base's merges (`min_frequency`: stop when no pair is that frequent).
    "convex" solves ConvexTok's relaxation with the base's tokens fixed and K = `new_tokens`
    (the dual solver, to `tolerance`, within `time_limit` seconds), rounds it (`rounding`: det,
    bias or int) and segments by shortest path; the result carries the certified bound for
    every K-token extension of the base on this corpus.
    "unigram" extends a Unigram base by EM (Unigram training's `seed_size`, `max_piece_bytes`,
    `shrinking_factor`, `sub_iterations`); a SentencePiece or HF file's base gives a tokeniser
    that keeps that file's pipeline. `add_missing_bytes` gives a file's base that turns unknown
    characters into its unknown token (no byte fallback) the 256 byte pieces first, and byte fallback.
    A BPE that keeps its file's pipeline (a HF tokenizer.json, a SentencePiece BPE model) first
    gains the characters it spells in bytes, as many as cover `character_coverage` of their
    occurrences (at most half of `new_tokens`), then merges (trainers/extend_pipeline.py)."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown extension algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    new_tokens = checks.integer("new_tokens", new_tokens)
    checks.integer("min_frequency", min_frequency)
    checks.num_threads(num_threads)
    if algorithm == "convex":
        check_rounding(rounding)
        if rounding == "price":
            raise ConfigError('an extension rounds the relaxation\'s colour values: rounding="price" is not one of them')
        check_relax_options(solver="dual", min_frequency=1, time_limit=time_limit, tolerance=tolerance)
    unigram_options = {"seed_size": seed_size, "max_piece_bytes": max_piece_bytes,
                       "shrinking_factor": shrinking_factor, "sub_iterations": sub_iterations}
    if algorithm == "unigram":
        unigram.check_options(**unigram_options)
    if isinstance(base, (str, Path)):
        base = load(base)
    corpus_options = {name: value for name, value in
                      {"text_field": text_field, "text_column": text_column, "errors": errors}.items() if value is not None}
    if algorithm == "bpe" and is_pipeline_bpe(base):
        return extend_pipeline_bpe(base, corpus_or_counts, new_tokens, min_frequency=min_frequency,
                                   character_coverage=character_coverage, add_missing_bytes=add_missing_bytes, num_threads=num_threads, progress=progress,
                                   corpus_options=corpus_options)
    if algorithm == "unigram" and (is_sentencepiece_unigram(base) or is_huggingface_unigram(base)):
        extend_file = extend_sentencepiece if is_sentencepiece_unigram(base) else extend_huggingface_unigram
        return extend_file(base, corpus_or_counts, new_tokens, unigram_options, add_missing_bytes=add_missing_bytes,
                           num_threads=num_threads, progress=progress, corpus_options=corpus_options)
    _check_base(base, algorithm)
    counts = _counts(base, corpus_or_counts, num_threads, progress, corpus_options)
    first_id = base.n_vocab
    vocab = list(base.vocab) + [b""] * (first_id - len(base.vocab))
    record: dict[str, Any] = {"base_vocab_size": base.vocab_size, "first_new_id": first_id,
                              "new_tokens_asked": new_tokens}
    totals = {"unique_pre_tokens": len(counts), "pre_tokens": int(counts.counts.sum(dtype="uint64")),
              "base_training": base.training}
    if algorithm == "unigram":
        return extend_native_unigram(base, counts, new_tokens, unigram_options, totals, progress)
    if algorithm == "convex":
        chosen, certificate, solve = _convex_tokens(base, counts, new_tokens, rounding, tolerance, time_limit, progress)
        record.update(new_tokens=len(chosen), rounding=rounding)
        return Tokenizer(vocab + chosen, segmenter="shortest_path", pattern=base.pattern,
                         special_tokens=base.special_tokens, algorithm="convex",
                         training={"extended": record, **solve, **totals}, certificate=certificate)
    pairs, merge_counts = run_merge_loop(
        partial(_core.extend_bpe, base._encoder, counts.data, counts.offsets, counts.counts, base.vocab,
                base.merges is None, new_tokens, first_id),
        new_tokens, min_frequency, num_threads, progress, "cannot extend",
    )
    if not pairs:
        raise CorpusError(
            f"the corpus has no pair of adjacent tokens, under the base's cuts, that occurs {min_frequency} times: "
            "no pre-token the base cuts into two or more tokens (is the corpus in a script the base's pattern "
            "keeps apart, or empty?)"
        )
    for left, right in pairs:
        vocab.append(vocab[left] + vocab[right])
    record.update(new_tokens=len(pairs), rule="ranks" if base.merges is None else "merges")
    training = {"extended": record, "min_frequency": int(min_frequency), "stopped_early": len(pairs) < new_tokens,
                "last_merge_count": int(merge_counts[-1]), **totals}
    return Tokenizer(vocab, segmenter="merges", pattern=base.pattern, special_tokens=base.special_tokens,
                     merges=None if base.merges is None else list(base.merges) + pairs, algorithm="bpe",
                     training=training)


def _convex_tokens(base: Tokenizer, counts: PreTokenCounts, budget: int, rounding: str, tolerance: float,
                   time_limit: float | None, progress: bool) -> tuple[list[bytes], Certificate, dict[str, Any]]:
    """ConvexTok with the base's tokens fixed: the new tokens (best first), the certificate of
    the bound over every `budget`-token extension, and the solve's record."""
    base_tokens = sorted({token for token in base.vocab if len(token) > 1})
    solve = solve_extension(counts, base_tokens, budget, tolerance=tolerance, time_limit=time_limit, progress=progress)
    graph, fixed, values = solve.graph, solve.graph.fixed, solve.colour_values
    if bool(fixed.all()):
        raise CorpusError("every substring of the corpus' pre-tokens is a base token already: nothing to learn")
    score = values / graph.colour_lengths if rounding == "bias" else values
    # A base token is never chosen again; "int" keeps only the colours the relaxation set to one.
    score = np.where(fixed, -1.0, np.where(values >= 1.0 - INTEGRAL_TOLERANCE, score, 0.0)
                     if rounding == "int" else score)
    tokens = graph.colour_bytes(best_colours(graph, score, budget, positive=rounding == "int"))
    path = shortest_path_tokens(sorted(set(base_tokens) | set(tokens) | set(single_bytes())), counts)
    certificate = Certificate.from_counts(
        bound=solve.bound, budget=budget, covers=extension_covers(len(base_tokens), budget), tokens=path,
        shortest_path_tokens=path, solver="dual", status=solve.solution.status, residuals=solve.solution.residuals,
        seconds=solve.solution.seconds, base_tokens=encoder_tokens(base, counts),
    )
    return tokens, certificate, {"solver": "dual", "tolerance": tolerance, "stages": len(solve.stages)}


def _check_base(base: Any, algorithm: str) -> None:
    """Refuses a base that `algorithm` cannot extend, saying what would do."""
    if not isinstance(base, BaseTokenizer):
        raise ConfigError(f"base must be a polytok tokeniser or a tokeniser file, got {type(base).__name__}")
    if algorithm == "unigram":
        if not isinstance(base, Tokenizer) or base.segmenter != "viterbi":
            raise ConfigError(f"a Unigram extension needs a Unigram base (a polytok Unigram, a SentencePiece Unigram "
                              f"model or a HF tokenizer.json Unigram); this base is {base.algorithm or 'not one'} "
                              f"(segmenter {base.segmenter!r})")
        return
    if not isinstance(base, Tokenizer):
        raise ConfigError(
            f"this base keeps its file's own pipeline (normaliser, pre-tokeniser steps or decoder that polytok's "
            f"native tokeniser cannot hold), which {algorithm!r} cannot extend; such a base is extended by 'bpe' "
            f"when it is a BPE, by 'unigram' when it is a Unigram (this one: {base.algorithm})"
        )
    if algorithm == "convex":  # (merges and shortest_path tokenisers have all 256 bytes: their constructors check)
        if base.segmenter not in ("merges", "shortest_path"):
            raise ConfigError(f"a ConvexTok extension cuts by shortest path over the base's tokens, which needs all "
                              f"256 bytes; a {base.segmenter!r} base does not promise them")
        return
    if base.segmenter != "merges":
        raise ConfigError(f"BPE continuation needs a BPE base (segmenter 'merges'); this base uses {base.segmenter!r}")


def _counts(base: Tokenizer, source: Any, num_threads: int | None, progress: bool,
            corpus_options: dict[str, Any]) -> PreTokenCounts:
    """The corpus counted as the base pre-tokenises it, or given counts checked against its pattern."""
    if isinstance(source, PreTokenCounts):
        if corpus_options:
            raise ConfigError(f"{sorted(corpus_options)} only apply when reading a corpus, not PreTokenCounts")
        if resolve_pattern(source.pattern) != base.pattern:
            raise ConfigError(
                f"the PreTokenCounts were counted with pattern {source.pattern!r}, the base pre-tokenises with "
                f"{base.pattern!r}; count the corpus with the base's pattern"
            )
        return source
    return count(source, pattern=base.pattern, special_tokens=list(base.special_tokens), num_threads=num_threads,
                 progress=progress, **corpus_options)
