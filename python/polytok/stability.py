"""How much a trained vocabulary depends on its training sample: train on independent random
subsets of a corpus and compare the vocabularies by Jaccard similarity (the ConvexTok paper's
Fig. 3). Every number is defined in docs/metrics.md.
"""
from __future__ import annotations

import itertools
import os
from typing import Any, Callable, Mapping

import numpy as np

from polytok.corpus import Texts, iter_documents, texts
from polytok.errors import ConfigError, CorpusError
from polytok.metrics import TokenizerView, describe_corpus
from polytok.trainers import train


def jaccard(first: set, second: set) -> float:
    """|A ∩ B| / |A ∪ B|; 1 for two empty sets."""
    union = len(first | second)
    return len(first & second) / union if union else 1.0


def _vocabularies(tokenizer: Any) -> tuple[set[bytes], set[bytes]]:
    """Every token as bytes (the paper's T), and the learned ones: neither single bytes nor special."""
    view = TokenizerView(tokenizer)
    special_ids = set(_special_ids(tokenizer))
    everything: set[bytes] = set()
    learned: set[bytes] = set()
    for identifier in view.token_ids():
        piece = view.token_bytes(identifier)
        everything.add(piece)
        if identifier not in special_ids and len(piece) > 1:
            learned.add(piece)
    return everything, learned


def _special_ids(tokenizer: Any) -> list[int]:
    special = getattr(tokenizer, "special_tokens", None)
    if special is None:
        special = getattr(tokenizer, "_special_tokens", {})
    return list(special.values()) if isinstance(special, Mapping) else []


def _sampled(corpus: Any, fraction: float, seed: np.random.SeedSequence, unit: str, reader_options: dict) -> list[str | bytes]:
    generator = np.random.default_rng(seed)
    sample: list[str | bytes] = []
    for document in iter_documents(corpus, **reader_options):
        pieces = document.splitlines(keepends=True) if unit == "line" else [document]
        keep = generator.random(len(pieces)) < fraction
        sample.extend(piece for piece, kept in zip(pieces, keep) if kept)
    return sample


def stability(
    corpus: Any,
    *,
    algorithm: str = "bpe",
    vocab_size: int,
    samples: int = 5,
    fraction: float = 0.5,
    seed: int = 0,
    unit: str = "line",
    trainer: Callable[..., Any] | None = None,
    reader_options: Mapping[str, Any] | None = None,
    **train_options: Any,
) -> dict[str, Any]:
    """Train on `samples` independent random subsets of the corpus (each line, or document, kept
    with probability `fraction`) and compare the vocabularies by Jaccard similarity (the ConvexTok
    paper's Fig. 3). `trainer` defaults to polytok.train; `train_options` go to it."""
    if samples < 2:
        raise ConfigError(f"stability needs at least 2 samples to compare, got {samples}")
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"fraction must be in (0, 1], got {fraction}")
    if unit not in ("line", "document"):
        raise ConfigError(f"unit must be 'line' or 'document', got {unit!r}")
    if trainer is None:
        trainer = train
    reader_options = dict(reader_options or {})
    documents = corpus.documents if isinstance(corpus, Texts) else corpus
    if not isinstance(documents, (str, bytes, os.PathLike)) and iter(documents) is documents:
        # A one-shot iterator: keep its documents, each sample reads them again.
        corpus = texts(list(iter_documents(corpus, **reader_options)))
        reader_options = {}

    vocabularies: list[tuple[set[bytes], set[bytes]]] = []
    sample_sizes: list[int] = []
    for number, child in enumerate(np.random.SeedSequence(seed).spawn(samples)):
        subset = _sampled(corpus, fraction, child, unit, reader_options)
        if not subset:
            raise CorpusError(f"sample {number + 1} of corpus {describe_corpus(corpus)} is empty; raise the fraction ({fraction})")
        sample_sizes.append(sum(len(piece) for piece in subset))
        tokenizer = trainer(texts(subset), algorithm=algorithm, vocab_size=vocab_size, **train_options)
        vocabularies.append(_vocabularies(tokenizer))

    full = np.eye(samples)
    learned = np.eye(samples)
    for i, j in itertools.combinations(range(samples), 2):
        full[i, j] = full[j, i] = jaccard(vocabularies[i][0], vocabularies[j][0])
        learned[i, j] = learned[j, i] = jaccard(vocabularies[i][1], vocabularies[j][1])
    pairs = np.triu_indices(samples, k=1)
    return {
        "algorithm": algorithm,
        "vocab_size": vocab_size,
        "samples": samples,
        "fraction": fraction,
        "unit": unit,
        "seed": seed,
        "sample_sizes": sample_sizes,
        "mean_jaccard": float(full[pairs].mean()),
        "min_jaccard": float(full[pairs].min()),
        "max_jaccard": float(full[pairs].max()),
        "mean_jaccard_learned": float(learned[pairs].mean()),
        "jaccard": full.tolist(),
        "jaccard_learned": learned.tolist(),
    }
