"""Measure text and tokenisers: intrinsic metrics of a tokeniser on a corpus (`evaluate`), the
word statistics of a corpus (`corpus_stats`: Zipf, Heaps, OOV) and how much a trained vocabulary
depends on its training sample (`stability`).

Every number is defined exactly in docs/metrics.md. `evaluate` streams: documents go through the
tokeniser's own `encode_batch` in batches, and only a histogram of token ids (one int64 per
vocabulary entry) is kept, so memory does not grow with the corpus.
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
from pathlib import Path
import sys
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from polytok import _core
from polytok.corpus import Texts, iter_documents, texts
from polytok.errors import ConfigError, CorpusError, EncodeError

RENYI_ORDERS: tuple[float, ...] = (1.0, 2.0, 2.5, 3.0)

# Documents are encoded in batches of about this many characters: large enough for the encoder's
# threads to stay busy, small enough that one batch's token lists stay a few tens of MB.
BATCH_CHARACTERS = 1 << 22

EXAMPLES = {
    "eval": """examples:
  polytok eval -t tok.json corpus.txt
  polytok eval -t bpe.json -t convex.json held-out/ --json
  polytok eval -t cl100k.tiktoken --pattern cl100k notes.txt --csv > metrics.csv""",
    "stability": """examples:
  polytok stability --algorithm bpe --vocab-size 4096 --samples 5 --fraction 0.5 corpus.txt
  polytok stability -a convex -v 1280 -k 3 -f 0.25 --seed 7 corpus.txt --json""",
    "stats": """examples:
  polytok stats quijote.txt
  polytok stats corpus/ --json
  polytok stats corpus.txt --plots figures/    # rank-frequency.png and growth.png""",
}


# --------------------------------------------------------------------------- tokenisers


class TokenizerView:
    """What the metrics need of a tokeniser: batch encoding, the bytes of an id, the vocabulary
    size. Accepts a polytok `Tokenizer` or anything with the same methods, and a
    `tiktoken.Encoding`, so any model's tokeniser can be measured on your text."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        if hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "vocab_size"):
            self.vocab_size = int(tokenizer.vocab_size)
            self.token_bytes = tokenizer.token_bytes
        elif hasattr(tokenizer, "decode_single_token_bytes") and hasattr(tokenizer, "n_vocab"):
            self.vocab_size = int(tokenizer.n_vocab)
            self.token_bytes = tokenizer.decode_single_token_bytes
        else:
            raise ConfigError(
                f"cannot measure a {type(tokenizer).__name__}: expected a polytok Tokenizer "
                "(encode_batch, token_bytes, vocab_size) or a tiktoken.Encoding"
            )

    def add_counts(self, texts: list, num_threads: int | None, counts: np.ndarray) -> None:
        """Adds how often each id occurs in the encoding of `texts` to `counts`: in the Rust
        core without id lists for polytok tokenisers (special-token text counts as ordinary
        text), through encode_batch for others."""
        histogram = getattr(self.tokenizer, "token_histogram", None)
        if histogram is not None:
            found = histogram(texts, num_threads)
            if len(found) > len(counts):
                raise EncodeError(f"the tokeniser has ids up to {len(found) - 1}, beyond its vocab_size {len(counts)}")
            counts[: len(found)] += found.astype(np.int64)
            return
        encoded = self.encode_batch(texts, num_threads)
        try:
            _core.add_token_counts(encoded, counts)
        except (TypeError, ValueError) as error:
            raise EncodeError(f"the tokeniser returned unusable ids: {error}") from None

    def encode_batch(self, texts: list, num_threads: int | None) -> list[list[int]]:
        """Token ids of each text, with the tokeniser's own rule for special-token text."""
        try:
            if num_threads is None:
                return self.tokenizer.encode_batch(texts)
            return self.tokenizer.encode_batch(texts, num_threads=num_threads)
        except ValueError as error:
            # tiktoken refuses special-token text in the input with a ValueError.
            raise EncodeError(f"cannot encode the corpus: {error}") from None

    def pieces(self, ids: Iterable[int]) -> list[bytes]:
        """The bytes of each id."""
        return [self.token_bytes(int(i)) for i in ids]


def tokenizer_name(tokenizer: Any, position: int) -> str:
    """A display name: the tokeniser's own `name` if it has one, else its position."""
    name = getattr(tokenizer, "name", None)
    return str(name) if name else f"tokenizer-{position + 1}"


# --------------------------------------------------------------------------- documents


def _batches(documents: Iterable[str | bytes], batch_characters: int) -> Iterator[tuple[list[str | bytes], int]]:
    """Consecutive documents of about `batch_characters` characters in all, with that size.

    Documents are taken in chunks sized from the mean length so far, so that a corpus of short
    lines costs a few C-level calls per thousand documents rather than Python work per document."""
    iterator = iter(documents)
    batch: list[str | bytes] = []
    size = seen = taken = 0
    while True:
        remaining = batch_characters - size
        wanted = 1 if seen == 0 else max(1, min(4096, remaining * taken // max(seen, 1)))
        chunk = list(itertools.islice(iterator, wanted))
        if not chunk:
            break
        length = sum(map(len, chunk))
        batch += chunk
        size += length
        seen += length
        taken += len(chunk)
        if size >= batch_characters:
            yield batch, size
            batch, size = [], 0
    if batch:
        yield batch, size


def text_stats(documents: list[str | bytes]) -> dict[str, int]:
    """Total bytes (UTF-8), characters (code points), whitespace-separated words (`str.split()`)
    and non-blank lines of some documents, counted in the Rust core."""
    try:
        columns = _core.text_stats(documents)
    except (TypeError, ValueError) as error:
        raise CorpusError(f"a corpus {error}") from None
    return {name: int(column.sum()) for name, column in zip(("bytes", "characters", "words", "lines"), columns)}


def _progress(enabled: bool, description: str):
    from tqdm import tqdm

    return tqdm(total=None, unit="B", unit_scale=True, desc=description, disable=not enabled, leave=False)


# --------------------------------------------------------------------------- evaluate


def _ratio(numerator: float, denominator: float) -> float | None:
    # None (JSON null) rather than inf or NaN: the quantity is undefined, not large.
    return numerator / denominator if denominator else None


def renyi_entropy(probabilities: np.ndarray, order: float) -> float:
    """Rényi entropy in bits of a distribution: log2(sum p^a) / (1 - a), Shannon's when a = 1."""
    p = probabilities[probabilities > 0]
    if order == 1.0:
        return float(-(p * np.log2(p)).sum())
    return float(np.log2((p**order).sum()) / (1.0 - order))


def average_token_rank(counts: np.ndarray) -> float | None:
    """Mean over token occurrences of the token's rank by corpus frequency (1 = most frequent).
    Ties share no rank order, yet the mean is the same however they are ordered."""
    ordered = np.sort(counts[counts > 0])[::-1].astype(np.float64)
    if not len(ordered):
        return None
    ranks = np.arange(1, len(ordered) + 1, dtype=np.float64)
    return float((ordered * ranks).sum() / ordered.sum())


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _utf8_characters(data: bytes) -> int:
    # Bytes that start a character (not 10xxxxxx): summed over the tokens of a valid UTF-8 text
    # this gives the text's code points, whatever the cuts inside characters.
    return sum(1 for byte in data if byte & 0xC0 != 0x80)


def token_count_metrics(counts: np.ndarray, vocab_size: int, token_bytes: Callable[[int], bytes]) -> dict[str, Any]:
    """The metrics that depend only on the histogram of token ids (`counts[id]` = occurrences)."""
    tokens = int(counts.sum())
    used = np.flatnonzero(counts)
    types = len(used)
    probabilities = counts[used] / tokens if tokens else np.zeros(0)
    used_counts = counts[used].astype(np.float64)
    pieces = [token_bytes(int(i)) for i in used]
    lengths = np.array([len(piece) for piece in pieces], dtype=np.float64)
    characters = np.array([_utf8_characters(piece) for piece in pieces], dtype=np.float64)
    valid = np.array([_is_utf8(piece) for piece in pieces], dtype=bool)

    result: dict[str, Any] = {
        "tokens": tokens,
        "types": types,
        "vocab_size": vocab_size,
        "vocabulary_utilisation": _ratio(types, vocab_size),
        "type_token_ratio": _ratio(types, tokens),
    }
    for order in RENYI_ORDERS:
        entropy = renyi_entropy(probabilities, order) if tokens else None
        key = _order_key(order)
        result[f"renyi_entropy_{key}"] = entropy
        result[f"renyi_efficiency_observed_{key}"] = (
            _ratio(entropy, math.log2(types)) if entropy is not None and types > 1 else None
        )
        result[f"renyi_efficiency_vocabulary_{key}"] = (
            _ratio(entropy, math.log2(vocab_size)) if entropy is not None and vocab_size > 1 else None
        )
    result["average_token_rank"] = average_token_rank(counts)
    result["mean_token_bytes"] = _ratio(float(used_counts @ lengths), tokens)
    result["mean_token_characters"] = _ratio(float(used_counts @ characters), tokens)
    result["single_byte_token_share"] = _ratio(float(used_counts[lengths == 1].sum()), tokens)
    result["invalid_utf8_token_share"] = _ratio(float(used_counts[~valid].sum()), tokens)
    return result


def _order_key(order: float) -> str:
    return f"{order:g}"


def evaluate(
    tokenizer: Any,
    corpus: Any,
    *,
    num_threads: int | None = None,
    progress: bool = False,
    batch_characters: int = BATCH_CHARACTERS,
    **reader_options: Any,
) -> dict[str, Any]:
    """Intrinsic metrics of `tokenizer` on `corpus` (compression, fertility, utilisation, Rényi
    entropy and efficiency, token rank and length, byte-level shares), as one flat dict.

    The corpus is anything polytok.corpus reads; `reader_options` go to it (text_field, errors, ...).
    """
    documents = iter_documents(corpus, **reader_options)
    result = evaluate_documents(tokenizer, documents, num_threads=num_threads, progress=progress,
                                batch_characters=batch_characters)
    if result is None:
        raise CorpusError(f"corpus {_describe(corpus)} has no text to evaluate")
    return result


def evaluate_documents(
    tokenizer: Any,
    documents: Iterable[str | bytes],
    *,
    num_threads: int | None = None,
    progress: bool = False,
    batch_characters: int = BATCH_CHARACTERS,
) -> dict[str, Any] | None:
    """`evaluate` on documents (str or bytes) rather than a corpus source; None if they hold no text."""
    view = TokenizerView(tokenizer)
    counts = np.zeros(view.vocab_size, dtype=np.int64)
    totals = {"documents": 0, "bytes": 0, "characters": 0, "words": 0, "lines": 0}
    with _progress(progress, "evaluate") as bar:
        for batch, characters in _batches(documents, batch_characters):
            # Text first: it also checks that every document is str or bytes.
            for name, value in text_stats(batch).items():
                totals[name] += value
            view.add_counts(batch, num_threads, counts)
            totals["documents"] += len(batch)
            bar.update(characters)
    if totals["bytes"] == 0:
        return None
    by_histogram = token_count_metrics(counts, view.vocab_size, view.token_bytes)
    tokens = by_histogram["tokens"]
    result: dict[str, Any] = dict(totals)
    result["tokens"] = tokens
    result["bytes_per_token"] = _ratio(totals["bytes"], tokens)
    result["characters_per_token"] = _ratio(totals["characters"], tokens)
    result["tokens_per_word"] = _ratio(tokens, totals["words"])
    result["tokens_per_line"] = _ratio(tokens, totals["lines"])
    result.update(by_histogram)
    return result


def _describe(corpus: Any) -> str:
    if isinstance(corpus, (str, os.PathLike)):
        return str(corpus)
    if isinstance(corpus, (list, tuple)) and all(isinstance(item, (str, os.PathLike)) for item in corpus[:3]):
        shown = ", ".join(str(item) for item in corpus[:3])
        return shown + (", ..." if len(corpus) > 3 else "")
    return f"({type(corpus).__name__})"


# --------------------------------------------------------------------------- corpus statistics


def fit_zipf(frequencies: np.ndarray, min_frequency: int = 10) -> dict[str, Any]:
    """Zipf exponent a of f(r) ~ r^-a: the maximum-likelihood a of the ranks of the word
    occurrences under P(r) = r^-a / sum_{s<=R} s^-a, over the R head types of frequency
    >= min_frequency (whose ranks the sample pins down; the tail's ranks are mostly ties)."""
    from scipy.optimize import minimize_scalar

    ordered = np.sort(np.asarray(frequencies, dtype=np.float64))[::-1]
    head = ordered[ordered >= min_frequency]
    if len(head) < 2:
        return {"zipf_alpha": None, "zipf_types_fitted": int(len(head))}
    log_ranks = np.log(np.arange(1, len(head) + 1, dtype=np.float64))
    occurrences = head.sum()
    rank_term = float(head @ log_ranks)

    def negative_log_likelihood(alpha: float) -> float:
        # log sum exp(-a log r), shifted by its largest term (r = 1, which is 0) for stability.
        return alpha * rank_term + occurrences * math.log(float(np.exp(-alpha * log_ranks).sum()))

    fit = minimize_scalar(negative_log_likelihood, bounds=(1e-6, 10.0), method="bounded", options={"xatol": 1e-7})
    return {"zipf_alpha": float(fit.x), "zipf_types_fitted": int(len(head))}


def fit_heaps(words_read: np.ndarray, distinct: np.ndarray, min_words: int = 100) -> dict[str, Any]:
    """Heaps' law V = K N^b: least squares of log V on log N over the growth-curve checkpoints
    with N >= min_words (all of them when fewer than two are that far)."""
    words_read = np.asarray(words_read, dtype=np.float64)
    distinct = np.asarray(distinct, dtype=np.float64)
    keep = words_read >= min_words
    if keep.sum() < 2:
        keep = words_read > 0
    if keep.sum() < 2:
        return {"heaps_k": None, "heaps_beta": None}
    beta, intercept = np.polyfit(np.log(words_read[keep]), np.log(distinct[keep]), 1)
    return {"heaps_k": float(math.exp(intercept)), "heaps_beta": float(beta)}


def _log_spaced(last: int, points: int) -> np.ndarray:
    """About `points` integers from 1 to `last`, evenly spaced in log scale, always with `last`."""
    return np.unique(np.round(np.geomspace(1, last, num=min(points, last))).astype(np.int64))


def corpus_stats(
    corpus: Any,
    *,
    held_out: float = 0.1,
    zipf_min_frequency: int = 10,
    heaps_min_words: int = 100,
    curve_points: int = 256,
    progress: bool = False,
    **reader_options: Any,
) -> dict[str, Any]:
    """Word statistics of a corpus, following the article's method: words are whitespace-separated
    and lowercased; Zipf's a on rank-frequency, Heaps' K and b on the growth curve, the OOV rate of
    the last `held_out` share of words given the vocabulary of the rest, characters against bytes.

    Also returns the curves (log-spaced points) under "curves", for plots."""
    result = corpus_stats_of_documents(
        iter_documents(corpus, **reader_options),
        held_out=held_out,
        zipf_min_frequency=zipf_min_frequency,
        heaps_min_words=heaps_min_words,
        curve_points=curve_points,
        progress=progress,
    )
    if result is None:
        raise CorpusError(f"corpus {_describe(corpus)} has no words")
    return result


def corpus_stats_of_documents(
    documents: Iterable[str | bytes],
    *,
    held_out: float = 0.1,
    zipf_min_frequency: int = 10,
    heaps_min_words: int = 100,
    curve_points: int = 256,
    progress: bool = False,
) -> dict[str, Any] | None:
    """`corpus_stats` on documents (str or bytes) rather than a corpus source; None if no words."""
    if not 0.0 < held_out < 1.0:
        raise ConfigError(f"held_out must be between 0 and 1 (exclusive), got {held_out}")
    index: dict[str, int] = {}
    counts: list[int] = []
    first_seen: list[int] = []
    position = 0
    totals = {"documents": 0, "bytes": 0, "characters": 0, "lines": 0}
    with _progress(progress, "stats") as bar:
        for batch, _ in _batches(documents, BATCH_CHARACTERS):
            measured = text_stats(batch)
            for name in ("bytes", "characters", "lines"):
                totals[name] += measured[name]
            totals["documents"] += len(batch)
            for document in batch:
                text = document if isinstance(document, str) else document.decode("utf-8", "surrogateescape")
                for word in text.lower().split():
                    identifier = index.get(word)
                    if identifier is None:
                        index[word] = len(counts)
                        counts.append(1)
                        first_seen.append(position)
                    else:
                        counts[identifier] += 1
                    position += 1
            bar.update(measured["bytes"])
    words = position
    if words == 0:
        return None

    frequencies = np.array(counts, dtype=np.int64)
    first = np.array(first_seen, dtype=np.int64)  # increasing: ids are given in order of first use
    checkpoints = _log_spaced(words, curve_points)
    distinct_at = np.searchsorted(first, checkpoints, side="left")  # types first seen before N words

    # floor(words * (1 - held_out)) in integers, so 0.9 * 10 is 9 and not 8.999...; at least one
    # word is always held out.
    split = min((words * round((1.0 - held_out) * 1_000_000)) // 1_000_000, words - 1)
    oov_rate = float(frequencies[first >= split].sum()) / (words - split)

    ordered = np.sort(frequencies)[::-1]
    rank_points = _log_spaced(len(ordered), curve_points)
    hapax = int((frequencies == 1).sum())
    return {
        **totals,
        "words": words,
        "distinct_words": len(counts),
        "hapax_legomena": hapax,
        "hapax_share_of_distinct": hapax / len(counts),
        **fit_zipf(frequencies, zipf_min_frequency),
        **fit_heaps(checkpoints, distinct_at, heaps_min_words),
        "oov_held_out_words": words - split,
        "oov_rate": oov_rate,
        "bytes_per_character": totals["bytes"] / totals["characters"],
        "curves": {
            "rank": rank_points.tolist(),
            "frequency": ordered[rank_points - 1].tolist(),
            "words_read": checkpoints.tolist(),
            "distinct_words": distinct_at.tolist(),
        },
    }


# --------------------------------------------------------------------------- stability


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
    for identifier in range(view.vocab_size):
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
        import polytok

        trainer = polytok.train
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
            raise CorpusError(f"sample {number + 1} of corpus {_describe(corpus)} is empty; raise the fraction ({fraction})")
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


# --------------------------------------------------------------------------- output


def format_value(value: Any) -> str:
    """A number as a table shows it: integers with separators, floats to 4 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    return f"{float(value):.4g}"


def format_table(columns: Mapping[str, Mapping[str, Any]], keys: Sequence[str] | None = None, label: str = "metric") -> str:
    """A text table: one row per key (metric), one column per named result."""
    names = list(columns)
    if keys is None:
        keys = [key for key, value in next(iter(columns.values())).items() if not isinstance(value, (dict, list))]
    rows = [[label, *names]] + [[key, *(format_value(columns[name].get(key)) for name in names)] for key in keys]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths)))
        for row in rows
    ]
    return "\n".join(lines)


def to_csv(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> str:
    """CSV text of `rows` (dicts), numbers written in full precision."""
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: ("" if row.get(key) is None else row.get(key)) for key in fields})
    return stream.getvalue()


def scalars(result: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a result that are numbers or strings (not curves, tables or nested dicts)."""
    return {key: value for key, value in result.items() if not isinstance(value, (dict, list))}


def _long_rows(columns: Mapping[str, Mapping[str, Any]], label: str) -> list[dict[str, Any]]:
    return [
        {label: name, "metric": key, "value": value}
        for name, result in columns.items()
        for key, value in scalars(result).items()
    ]


# --------------------------------------------------------------------------- command line


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """The corpus reader's options (JSON field, parquet column, invalid UTF-8 policy)."""
    parser.add_argument("--text-field", default="text", help="JSON field holding the text in .jsonl files")
    parser.add_argument("--text-column", default="text", help="column holding the text in .parquet files")
    parser.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8 in a text file: stop with an error naming the byte offset, or replace it",
    )


def reader_options(args: argparse.Namespace) -> dict[str, Any]:
    """The corpus reader's options from parsed arguments."""
    return {"text_field": args.text_field, "text_column": args.text_column, "errors": args.errors}


def add_tokenizer_format_options(parser: argparse.ArgumentParser) -> None:
    """Options for tokeniser files that lack a pattern or special tokens (tiktoken)."""
    parser.add_argument("--pattern", help="pre-tokenisation preset or regex, for formats that lack one (tiktoken)")
    parser.add_argument("--special", action="append", default=[], help="special token, for formats that lack them")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--json / --csv instead of a text table."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON")
    group.add_argument("--csv", action="store_true", help="print CSV")


def _quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False))


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok eval -t TOK [-t TOK ...] CORPUS...`."""
    parser.add_argument(
        "-t", "--tokenizer", action="append", required=True,
        help="tokeniser file (polytok JSON, .tiktoken, HF tokenizer.json, SentencePiece .model); repeatable",
    )
    parser.add_argument("corpus", type=Path, nargs="+", help="text, .jsonl or .parquet files, directories or globs")
    parser.add_argument("--threads", type=int, default=None, help="encoder threads (default: all cores)")
    add_tokenizer_format_options(parser)
    add_output_options(parser)
    add_corpus_options(parser)


def run_eval(args: argparse.Namespace) -> None:
    """Print the intrinsic metrics of each tokeniser on the corpus."""
    from polytok.compare import load_tokenizers

    tokenizers = load_tokenizers(args.tokenizer, pattern=args.pattern, special_tokens=args.special)
    results = {
        name: evaluate(tokenizer, list(args.corpus), num_threads=args.threads, progress=not _quiet(args), **reader_options(args))
        for name, tokenizer in tokenizers.items()
    }
    if args.json:
        print(json.dumps(results, indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(_long_rows(results, "tokenizer"), ["tokenizer", "metric", "value"]))
    else:
        print(format_table(results))


def add_stability_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok stability --algorithm A --vocab-size N --samples k --fraction f CORPUS...`."""
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("-a", "--algorithm", default="bpe", help="bpe, convex (and the others polytok.train knows)")
    parser.add_argument("-v", "--vocab-size", type=int, required=True, help="total vocabulary size")
    parser.add_argument("-k", "--samples", type=int, default=5, help="independent samples to train on (at least 2)")
    parser.add_argument("-f", "--fraction", type=float, default=0.5, help="probability that a line is in a sample")
    parser.add_argument("--unit", choices=["line", "document"], default="line", help="what a sample keeps or drops")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples")
    parser.add_argument("--pattern", default="cl100k", help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    parser.add_argument("--special", action="append", default=[], help="special token (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_corpus_options(parser)


def run_stability(args: argparse.Namespace) -> None:
    """Train on k samples and print the Jaccard similarities of their vocabularies."""
    pattern = None if args.pattern.lower() == "none" else args.pattern
    result = stability(
        list(args.corpus),
        algorithm=args.algorithm,
        vocab_size=args.vocab_size,
        samples=args.samples,
        fraction=args.fraction,
        seed=args.seed,
        unit=args.unit,
        reader_options=reader_options(args),
        pattern=pattern,
        special_tokens=args.special,
        progress=not _quiet(args),
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(format_table({"stability": result}))
    print("\npairwise Jaccard similarity (all tokens):")
    for row in result["jaccard"]:
        print("  " + "  ".join(f"{value:.4f}" for value in row))


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok stats CORPUS... [--json] [--plots DIR]`."""
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("--held-out", type=float, default=0.1, help="share of words, at the end, for the OOV rate")
    parser.add_argument("--plots", metavar="DIR", help="write rank-frequency.png and growth.png into DIR")
    parser.add_argument("--json", action="store_true", help="print JSON (curves included)")
    add_corpus_options(parser)


def run_stats(args: argparse.Namespace) -> None:
    """Print the word statistics of a corpus; optionally write its plots."""
    result = corpus_stats(list(args.corpus), held_out=args.held_out, progress=not _quiet(args), **reader_options(args))
    if args.plots:
        from polytok.report import write_corpus_plots

        written = write_corpus_plots(result, args.plots)
        if not _quiet(args):
            print("plots: " + ", ".join(str(path) for path in written), file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table({"corpus": result}))
