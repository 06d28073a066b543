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
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from polytok import _core, checks
from polytok.base_tokenizer import BaseTokenizer
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.formats import load
from polytok.pretokenize import resolve_pattern
from polytok.tokenizer import Tokenizer
from polytok.trainers.bpe import run_merge_loop

ALGORITHMS = ("bpe",)


def extend(
    base: BaseTokenizer | str | Path,
    corpus_or_counts: PreTokenCounts | str | Path | Iterable[str | bytes],
    new_tokens: int,
    algorithm: str = "bpe",
    *,
    min_frequency: int = 1,
    num_threads: int | None = None,
    progress: bool = True,
    text_field: str | None = None,
    text_column: str | None = None,
    errors: str | None = None,
) -> Tokenizer:
    """`base` (a tokeniser, or a file `polytok.load` reads) with at most `new_tokens` tokens learned
    on a corpus (anything `polytok.count` reads, counted with the base's pattern and special
    tokens; `text_field`, `text_column` and `errors` say how to read it) or on PreTokenCounts made
    with the base's pattern. Stops early, with fewer tokens, when no pair occurs `min_frequency` times."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown extension algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    new_tokens = checks.integer("new_tokens", new_tokens)
    checks.integer("min_frequency", min_frequency)
    checks.num_threads(num_threads)
    if isinstance(base, (str, Path)):
        base = load(base)
    _check_base(base)
    corpus_options = {name: value for name, value in
                      {"text_field": text_field, "text_column": text_column, "errors": errors}.items() if value is not None}
    counts = _counts(base, corpus_or_counts, num_threads, progress, corpus_options)
    first_id = base.n_vocab
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
    vocab = list(base.vocab) + [b""] * (first_id - len(base.vocab))
    for left, right in pairs:
        vocab.append(vocab[left] + vocab[right])
    training = {
        "extended": {
            "base_vocab_size": base.vocab_size,
            "first_new_id": first_id,
            "new_tokens_asked": new_tokens,
            "new_tokens": len(pairs),
            "rule": "ranks" if base.merges is None else "merges",
        },
        "min_frequency": int(min_frequency),
        "stopped_early": len(pairs) < new_tokens,
        "last_merge_count": int(merge_counts[-1]),
        "unique_pre_tokens": len(counts),
        "pre_tokens": int(counts.counts.sum(dtype="uint64")),
        "base_training": base.training,
    }
    return Tokenizer(
        vocab,
        segmenter="merges",
        pattern=base.pattern,
        special_tokens=base.special_tokens,
        merges=None if base.merges is None else list(base.merges) + pairs,
        algorithm="bpe",
        training=training,
    )


def _check_base(base: Any) -> None:
    """Refuses a base that BPE cannot continue, saying what would do."""
    if not isinstance(base, BaseTokenizer):
        raise ConfigError(f"base must be a polytok tokeniser or a tokeniser file, got {type(base).__name__}")
    if not isinstance(base, Tokenizer):
        raise ConfigError(
            "this base keeps its file's own pipeline (normaliser, pre-tokeniser steps or decoder that polytok's "
            "native tokeniser cannot hold), which BPE continuation cannot extend: give a tiktoken ranks file, a "
            "polytok file, or a byte-level BPE tokenizer.json whose pre-tokeniser is one regex"
        )
    if base.segmenter != "merges":  # (a merges tokeniser has all 256 bytes: its constructor checks)
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
