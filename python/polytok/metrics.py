"""Measure text and tokenisers: intrinsic metrics of a tokeniser on a corpus (`evaluate`) and the
word statistics of a corpus (`corpus_stats`: Zipf, Heaps, OOV).

Every number is defined exactly in docs/metrics.md. `evaluate` streams: documents go through the
tokeniser's own `encode_batch` in batches, and only a histogram of token ids (one int64 per
vocabulary entry) is kept, so memory does not grow with the corpus.
"""
from __future__ import annotations

import itertools
import math
import os
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from polytok import _core
from polytok.corpus import iter_documents
from polytok.errors import ConfigError, CorpusError, EncodeError
from polytok.progress import progress_bar

RENYI_ORDERS: tuple[float, ...] = (1.0, 2.0, 2.5, 3.0)

# Documents are encoded in batches of about this many characters: large enough for the encoder's
# threads to stay busy, small enough that one batch's token lists stay a few tens of MB.
BATCH_CHARACTERS = 1 << 22


# --------------------------------------------------------------------------- tokenisers


class TokenizerView:
    """What the metrics need of a tokeniser: batch encoding, the bytes of an id, the vocabulary
    size. Accepts a polytok `Tokenizer` or anything with the same methods, and a
    `tiktoken.Encoding`, so any model's tokeniser can be measured on your text."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        if hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "vocab_size"):
            self.vocab_size = int(tokenizer.vocab_size)
            #: one past the largest id: ids may have gaps (cl100k's 100256, an extension's new ids)
            self.id_limit = int(getattr(tokenizer, "n_vocab", self.vocab_size))
            self.token_bytes = tokenizer.token_bytes
        elif hasattr(tokenizer, "decode_single_token_bytes") and hasattr(tokenizer, "n_vocab"):
            self.vocab_size = int(tokenizer.n_vocab)
            self.id_limit = self.vocab_size
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
                raise EncodeError(f"the tokeniser has ids up to {len(found) - 1}, beyond its largest id {len(counts) - 1}")
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

    def token_ids(self) -> list[int]:
        """Every id that is a token, in order (the gaps between ids left out)."""
        vocabulary = getattr(self.tokenizer, "vocab", None)
        if vocabulary is not None and hasattr(self.tokenizer, "special_tokens"):
            ordinary = [token_id for token_id, token in enumerate(vocabulary) if token]
            return sorted(ordinary + list(self.tokenizer.special_tokens.values()))
        ids = []
        for token_id in range(self.id_limit):
            try:
                self.token_bytes(token_id)
            except (KeyError, ValueError):  # tiktoken's and polytok's answer to an id no token has
                continue
            ids.append(token_id)
        return ids

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
        raise CorpusError(f"corpus {describe_corpus(corpus)} has no text to evaluate")
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
    counts = np.zeros(view.id_limit, dtype=np.int64)
    totals = {"documents": 0, "bytes": 0, "characters": 0, "words": 0, "lines": 0}
    with progress_bar(progress, desc="evaluate", unit="B", unit_scale=True, leave=False) as bar:
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


def describe_corpus(corpus: Any) -> str:
    """A corpus as an error message names it: its paths (the first three), or its type."""
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
        raise CorpusError(f"corpus {describe_corpus(corpus)} has no words")
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
    with progress_bar(progress, desc="stats", unit="B", unit_scale=True, leave=False) as bar:
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
