"""polytok.metrics: intrinsic metrics hand-computed on tiny token streams, agreement with
tokenization-scorer, the Rust text counts against Python's own, Zipf and Heaps fits that recover
known parameters, the OOV rate, stability, and bad input."""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok import _core, metrics
from polytok.errors import ConfigError, CorpusError, EncodeError
from polytok.pretokenize import PRESETS

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------- test doubles


class GreedyTokenizer:
    """Test double with the methods polytok.Tokenizer offers the metrics: ids 0..255 are the
    bytes, then `tokens`; a text is cut by greedy longest match over its UTF-8 bytes."""

    def __init__(self, tokens: list[bytes] = (), name: str | None = None):
        self.vocab = [bytes([b]) for b in range(256)] + list(tokens)
        self.index = {token: i for i, token in enumerate(self.vocab)}
        self.longest = max(len(token) for token in self.vocab)
        self.special_tokens: dict[str, int] = {}
        if name:
            self.name = name

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_bytes(self, identifier: int) -> bytes:
        return self.vocab[identifier]

    def encode(self, text: str | bytes) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        ids, start = [], 0
        while start < len(data):
            for end in range(min(len(data), start + self.longest), start, -1):
                identifier = self.index.get(data[start:end])
                if identifier is not None:
                    ids.append(identifier)
                    start = end
                    break
        return ids

    def encode_batch(self, texts, num_threads=None) -> list[list[int]]:
        return [self.encode(text) for text in texts]


COMMON_WORDS = [" the", " and", " of", " to", " in", " that", " he", " shall", " unto", " lord", " is",
                " de", " la", " que", " el", " en", " los", " del", " se", " las", " un", " por",
                " Debian", " package", " system", " file", " server", "ing", "tion", "ment", "es"]


def small_tiktoken():
    """A tiktoken.Encoding with the 256 bytes, the prefixes of a few common words, the cl100k
    pattern and one special token."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([b]): b for b in range(256)}
    for word in COMMON_WORDS:
        data = word.encode("utf-8")
        for end in range(2, len(data) + 1):
            ranks.setdefault(data[:end], len(ranks))
    return tiktoken.Encoding("polytok-test", pat_str=PRESETS["cl100k"], mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})


# --------------------------------------------------------------------------- hand-computed metrics


def test_metrics_hand_computed_on_a_tiny_stream():
    tokenizer = GreedyTokenizer([b"ab", b"abc"])
    # "abc ab\nab" -> abc | ' ' | ab | '\n' | ab: ids 257, 32, 256, 10, 256.
    assert tokenizer.encode("abc ab\nab") == [257, 32, 256, 10, 256]
    result = polytok.evaluate(tokenizer, ["abc ab\nab"])
    assert result["documents"] == 1
    assert (result["bytes"], result["characters"], result["words"], result["lines"]) == (9, 9, 3, 2)
    assert result["tokens"] == 5 and result["types"] == 4 and result["vocab_size"] == 258
    assert result["bytes_per_token"] == pytest.approx(9 / 5)
    assert result["characters_per_token"] == pytest.approx(9 / 5)
    assert result["tokens_per_word"] == pytest.approx(5 / 3)
    assert result["tokens_per_line"] == pytest.approx(5 / 2)
    assert result["vocabulary_utilisation"] == pytest.approx(4 / 258)
    assert result["type_token_ratio"] == pytest.approx(4 / 5)
    # p = (0.4, 0.2, 0.2, 0.2)
    shannon = -(0.4 * math.log2(0.4) + 3 * 0.2 * math.log2(0.2))
    assert result["renyi_entropy_1"] == pytest.approx(shannon)
    assert result["renyi_entropy_2"] == pytest.approx(-math.log2(0.4**2 + 3 * 0.2**2))
    assert result["renyi_entropy_2.5"] == pytest.approx(math.log2(0.4**2.5 + 3 * 0.2**2.5) / (1 - 2.5))
    assert result["renyi_entropy_3"] == pytest.approx(math.log2(0.4**3 + 3 * 0.2**3) / (1 - 3))
    for key in ("1", "2", "2.5", "3"):
        assert result[f"renyi_efficiency_observed_{key}"] == pytest.approx(result[f"renyi_entropy_{key}"] / 2.0)
        assert result[f"renyi_efficiency_vocabulary_{key}"] == pytest.approx(
            result[f"renyi_entropy_{key}"] / math.log2(258)
        )
    # ranks: "ab" 1 (twice), then three tokens seen once at ranks 2, 3, 4.
    assert result["average_token_rank"] == pytest.approx((2 * 1 + 2 + 3 + 4) / 5)
    assert result["mean_token_bytes"] == pytest.approx((3 + 1 + 2 + 1 + 2) / 5)
    assert result["mean_token_characters"] == pytest.approx(9 / 5)
    assert result["single_byte_token_share"] == pytest.approx(2 / 5)
    assert result["invalid_utf8_token_share"] == 0.0


def test_byte_tokens_that_split_a_character():
    # "é" is c3 a9; with bytes only, each token is one byte and neither is UTF-8 alone.
    result = polytok.evaluate(GreedyTokenizer(), ["é"])
    assert (result["bytes"], result["characters"], result["tokens"]) == (2, 1, 2)
    assert result["single_byte_token_share"] == 1.0
    assert result["invalid_utf8_token_share"] == 1.0
    # The lead byte carries the character, the continuation byte none: 1 character over 2 tokens.
    assert result["mean_token_characters"] == pytest.approx(0.5) == result["characters_per_token"]
    assert result["renyi_entropy_1"] == pytest.approx(1.0)
    assert result["renyi_efficiency_observed_1"] == pytest.approx(1.0)


def test_one_type_has_no_efficiency_and_zero_entropy():
    result = polytok.evaluate(GreedyTokenizer(), ["aaaa"])
    assert result["types"] == 1
    assert result["renyi_entropy_2"] == pytest.approx(0.0)
    assert result["renyi_efficiency_observed_2"] is None  # 0 / log2(1): undefined, not infinite
    assert result["renyi_efficiency_vocabulary_2"] == pytest.approx(0.0)
    assert json.loads(json.dumps(result)) == result  # no NaN or inf anywhere


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=12))
def test_average_token_rank_is_the_mean_rank_of_the_occurrences(counts):
    occurrences = [identifier for identifier, count in enumerate(counts) for _ in range(count)]
    # Brute force in Counter.most_common's tie order; the definition must not depend on it.
    rank = {identifier: position + 1 for position, (identifier, _) in enumerate(collections.Counter(occurrences).most_common())}
    expected = sum(rank[identifier] for identifier in occurrences) / len(occurrences)
    assert metrics.average_token_rank(np.array(counts)) == pytest.approx(expected)
    assert metrics.average_token_rank(np.array(counts[::-1])) == pytest.approx(expected)


def test_agrees_with_tokenization_scorer():
    scorer = pytest.importorskip("tokenization_scorer")
    encoding = small_tiktoken()
    lines = [line for line in (DATA / "kjv.txt").read_text(encoding="utf-8").splitlines() if line.strip()][:300]
    result = polytok.evaluate(encoding, lines)
    # tokenization-scorer reads whitespace-separated tokens, one line per sequence.
    stream = "\n".join(" ".join(f"t{i}" for i in encoding.encode_ordinary(line)) for line in lines)
    vocabulary = encoding.n_vocab
    assert result["vocab_size"] == vocabulary
    assert result["renyi_entropy_1"] == pytest.approx(scorer.score(stream, metric="shannon_entropy"), rel=1e-12)
    assert result["renyi_efficiency_observed_1"] == pytest.approx(scorer.score(stream, metric="shannon_efficiency"), rel=1e-12)
    assert result["renyi_efficiency_vocabulary_1"] == pytest.approx(
        scorer.score(stream, metric="shannon_efficiency", vocab=vocabulary), rel=1e-12
    )
    for order in (2.0, 2.5, 3.0):
        key = f"{order:g}"
        assert result[f"renyi_entropy_{key}"] == pytest.approx(scorer.score(stream, metric="renyi_entropy", power=order), rel=1e-12)
        assert result[f"renyi_efficiency_observed_{key}"] == pytest.approx(scorer.score(stream, metric="renyi", power=order), rel=1e-12)
        assert result[f"renyi_efficiency_vocabulary_{key}"] == pytest.approx(
            scorer.score(stream, metric="renyi", power=order, vocab=vocabulary), rel=1e-12
        )
    # And the sequence length: tokenization-scorer's seq_len is minus tokens per line.
    assert result["tokens_per_line"] == pytest.approx(-scorer.score(stream, metric="seq_len"))


def test_batches_do_not_change_the_numbers():
    text = (DATA / "handbook-es-ES.txt").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tokenizer = GreedyTokenizer([w.encode() for w in COMMON_WORDS])
    whole = metrics.evaluate_documents(tokenizer, lines)
    small = metrics.evaluate_documents(tokenizer, lines, batch_characters=100)
    assert whole == small
    assert whole["tokens"] == sum(len(tokenizer.encode(line)) for line in lines)
    assert whole["words"] == len(text.split())


def test_tiktoken_and_its_own_counts_agree():
    encoding = small_tiktoken()
    text = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")
    result = polytok.evaluate(encoding, [text])
    assert result["tokens"] == len(encoding.encode_ordinary(text))
    assert result["bytes"] == len(text.encode("utf-8"))


# --------------------------------------------------------------------------- the Rust text counts


def _python_counts(text: str) -> tuple[int, int, int, int]:
    return (len(text.encode("utf-8", "surrogateescape")), len(text), len(text.split()),
            sum(1 for line in text.split("\n") if line.strip()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)
                | st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000ab", max_size=40), max_size=5))
def test_text_stats_equal_python_split_and_lines(documents):
    columns = _core.text_stats(documents)
    for position, document in enumerate(documents):
        assert tuple(int(column[position]) for column in columns) == _python_counts(document)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60))
def test_text_stats_of_invalid_utf8_count_like_surrogateescape(data):
    columns = _core.text_stats([data])
    decoded = data.decode("utf-8", "surrogateescape")
    assert tuple(int(column[0]) for column in columns) == _python_counts(decoded)


def test_every_code_point_is_whitespace_exactly_when_python_says_so():
    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    _, _, words, _ = _core.text_stats(characters)
    expected = np.fromiter((not character.isspace() for character in characters), dtype=np.uint64)
    assert [characters[i] for i in np.flatnonzero(words != expected)] == []


def test_text_stats_rejects_what_is_not_text():
    with pytest.raises(TypeError, match="document 1 is a int"):
        _core.text_stats(["ok", 3])
    with pytest.raises(CorpusError, match="lone surrogates"):
        metrics.text_stats(["\udc80"])


# --------------------------------------------------------------------------- corpus statistics


def _zipf_documents(alpha: float, types: int, words: int, seed: int) -> list[str]:
    generator = np.random.default_rng(seed)
    probabilities = np.arange(1, types + 1, dtype=float) ** -alpha
    draws = generator.choice(types, size=words, p=probabilities / probabilities.sum())
    # Word ids are shuffled against their probability rank, so the fit cannot lean on their names.
    names = [f"w{n}" for n in generator.permutation(types)]
    return [" ".join(names[d] for d in draws[start:start + 1000]) for start in range(0, words, 1000)]


@pytest.mark.parametrize("alpha", [0.9, 1.1, 1.4])
def test_zipf_fit_recovers_the_exponent_of_a_zipf_sample(alpha):
    stats = polytok.corpus_stats(_zipf_documents(alpha, types=100_000, words=200_000, seed=int(alpha * 10)))
    assert stats["words"] == 200_000
    assert stats["zipf_alpha"] == pytest.approx(alpha, abs=0.02)


def test_zipf_fit_is_exact_on_exact_power_law_frequencies():
    frequencies = np.round(1e6 * np.arange(1, 2001, dtype=float) ** -1.25)
    fit = metrics.fit_zipf(frequencies, min_frequency=10)
    assert fit["zipf_alpha"] == pytest.approx(1.25, abs=2e-3)


def _heaps_documents(k: float, beta: float, words: int) -> list[str]:
    """A word stream whose vocabulary after n words is exactly min(n, round(K n^b)): a new word
    whenever the curve steps up, else a repeat of an old one."""
    stream, distinct = [], 0
    for n in range(1, words + 1):
        if distinct < min(n, round(k * n**beta)):
            stream.append(f"w{distinct}")
            distinct += 1
        else:
            stream.append(f"w{(n * 7919) % distinct}")
    return [" ".join(stream[start:start + 500]) for start in range(0, words, 500)]


@pytest.mark.parametrize(("k", "beta"), [(2.4, 0.73), (10.0, 0.5)])
def test_heaps_fit_recovers_k_and_beta(k, beta):
    stats = polytok.corpus_stats(_heaps_documents(k, beta, 100_000))
    assert stats["heaps_beta"] == pytest.approx(beta, abs=0.005)
    assert stats["heaps_k"] == pytest.approx(k, rel=0.03)
    curves = stats["curves"]
    assert curves["words_read"][-1] == stats["words"] == 100_000
    assert curves["distinct_words"][-1] == stats["distinct_words"]
    assert all(b >= a for a, b in zip(curves["distinct_words"], curves["distinct_words"][1:]))


def test_words_hapax_oov_and_bytes_hand_computed():
    # 20 words, lowercased: the first 18 give the vocabulary; of the last two, "niño" is new.
    text = "The the THE cat sat on the mat " * 2 + "a cat sat on niño The"
    stats = polytok.corpus_stats([text])
    assert stats["words"] == 22
    # 22 words: the held-out part is the last 22 - floor(0.9 * 22) = 3 words: "niño" (new) and "the".
    assert stats["oov_held_out_words"] == 3
    assert stats["oov_rate"] == pytest.approx(1 / 3)
    assert stats["distinct_words"] == 7  # the cat sat on mat a niño
    assert stats["hapax_legomena"] == 2  # a, niño
    assert stats["characters"] == len(text) and stats["bytes"] == len(text.encode("utf-8")) == len(text) + 1
    assert stats["bytes_per_character"] == pytest.approx((len(text) + 1) / len(text))


def test_oov_of_the_last_tenth():
    words = [f"w{i % 9}" for i in range(18)] + ["w0", "new"]
    stats = polytok.corpus_stats([" ".join(words)])
    assert stats["oov_held_out_words"] == 2
    assert stats["oov_rate"] == 0.5


def test_corpus_stats_of_an_empty_corpus_is_an_error():
    with pytest.raises(CorpusError, match="no words"):
        polytok.corpus_stats(["", "   \n\t"])
    with pytest.raises(ConfigError, match="held_out"):
        polytok.corpus_stats(["a b"], held_out=1.0)


# --------------------------------------------------------------------------- stability


def word_trainer(calls: list | None = None):
    """A stand-in for polytok.train: the vocabulary is the 256 bytes plus the most frequent words
    (ties by the word), up to vocab_size."""

    def train(corpus, *, algorithm, vocab_size, **options):
        counts = collections.Counter(word.encode("utf-8") for document in corpus for word in document.split())
        ranked = sorted(counts, key=lambda word: (-counts[word], word))
        tokenizer = GreedyTokenizer([word for word in ranked if len(word) > 1][: vocab_size - 256])
        if calls is not None:
            calls.append((list(corpus), algorithm, vocab_size, options, tokenizer))
        return tokenizer

    return train


KJV_LINES = (DATA / "kjv.txt").read_text(encoding="utf-8").splitlines(keepends=True)


def test_stability_is_one_when_every_sample_is_the_whole_corpus():
    result = metrics.stability(KJV_LINES, vocab_size=300, samples=3, fraction=1.0, trainer=word_trainer())
    assert result["mean_jaccard"] == 1.0 == result["min_jaccard"] == result["mean_jaccard_learned"]
    assert result["sample_sizes"] == [sum(map(len, KJV_LINES))] * 3


def test_stability_reports_the_jaccard_of_the_trained_vocabularies():
    calls: list = []
    result = metrics.stability(KJV_LINES, algorithm="bpe", vocab_size=400, samples=3, fraction=0.3, seed=5,
                               trainer=word_trainer(calls), pattern="cl100k")
    assert [call[1:4] for call in calls] == [("bpe", 400, {"pattern": "cl100k"})] * 3
    vocabularies = [set(call[4].vocab) for call in calls]
    learned = [set(token for token in vocabulary if len(token) > 1) for vocabulary in vocabularies]
    for i in range(3):
        for j in range(3):
            expected = len(vocabularies[i] & vocabularies[j]) / len(vocabularies[i] | vocabularies[j])
            assert result["jaccard"][i][j] == pytest.approx(expected)
            expected = len(learned[i] & learned[j]) / len(learned[i] | learned[j])
            assert result["jaccard_learned"][i][j] == pytest.approx(expected)
    assert 0 < result["mean_jaccard_learned"] < result["mean_jaccard"] < 1
    # Each line was kept with probability 0.3: the samples are about 30% of the corpus, and differ.
    total = sum(map(len, KJV_LINES))
    assert all(0.2 < size / total < 0.4 for size in result["sample_sizes"])
    assert len({tuple(call[0]) for call in calls}) == 3
    again = metrics.stability(KJV_LINES, algorithm="bpe", vocab_size=400, samples=3, fraction=0.3, seed=5,
                              trainer=word_trainer(), pattern="cl100k")
    assert again == result
    other = metrics.stability(KJV_LINES, vocab_size=400, samples=3, fraction=0.3, seed=6, trainer=word_trainer())
    assert other["sample_sizes"] != result["sample_sizes"]


def test_stability_reads_a_one_shot_iterator_for_every_sample():
    calls: list = []
    metrics.stability(iter(KJV_LINES[:200]), vocab_size=300, samples=2, fraction=1.0, trainer=word_trainer(calls))
    assert calls[0][0] == calls[1][0] == KJV_LINES[:200]


def test_stability_bad_options():
    with pytest.raises(ConfigError, match="at least 2 samples"):
        metrics.stability(KJV_LINES, vocab_size=300, samples=1, trainer=word_trainer())
    with pytest.raises(ConfigError, match="fraction"):
        metrics.stability(KJV_LINES, vocab_size=300, fraction=0.0, trainer=word_trainer())
    with pytest.raises(CorpusError, match="empty"):
        metrics.stability(["one line"], vocab_size=300, fraction=0.01, trainer=word_trainer())


# --------------------------------------------------------------------------- bad input


def test_an_empty_corpus_is_an_error():
    with pytest.raises(CorpusError, match="no text"):
        polytok.evaluate(GreedyTokenizer(), [""])
    with pytest.raises(CorpusError, match="no text"):
        polytok.evaluate(GreedyTokenizer(), [])


def test_what_is_not_a_tokeniser_is_an_error():
    with pytest.raises(ConfigError, match="cannot measure a str"):
        polytok.evaluate("tok.json", ["text"])


def test_ids_outside_the_vocabulary_are_an_error():
    class Broken(GreedyTokenizer):
        def encode_batch(self, texts, num_threads=None):
            return [[300] for _ in texts]

    with pytest.raises(EncodeError, match="token id 300 .* outside the vocabulary of 256 ids"):
        polytok.evaluate(Broken(), ["text"])


def test_special_token_text_follows_the_tokenisers_rule():
    with pytest.raises(EncodeError, match="cannot encode the corpus"):
        polytok.evaluate(small_tiktoken(), ["one <|endoftext|> two"])


# --------------------------------------------------------------------------- command line


def _parse(add_arguments, argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("-q", "--quiet", action="store_true")
    add_arguments(parser)
    return parser.parse_args(["-q", *argv])


def test_cli_eval_prints_json_table_and_csv(tmp_path, monkeypatch, capsys):
    (tmp_path / "tok.json").write_text('{"format": "polytok"}')
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abc ab\nab", encoding="utf-8")
    monkeypatch.setattr(polytok.formats, "load", lambda path, **options: GreedyTokenizer([b"ab", b"abc"]))
    metrics.run_eval(_parse(metrics.add_eval_arguments, ["-t", str(tmp_path / "tok.json"), str(corpus), "--json"]))
    printed = json.loads(capsys.readouterr().out)
    assert printed["tok"]["tokens"] == 5 and printed["tok"]["tokens_per_word"] == pytest.approx(5 / 3)
    metrics.run_eval(_parse(metrics.add_eval_arguments, ["-t", str(tmp_path / "tok.json"), str(corpus), "--csv"]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tokenizer,metric,value" and "tok,tokens,5" in lines
    metrics.run_eval(_parse(metrics.add_eval_arguments, ["-t", str(tmp_path / "tok.json"), str(corpus)]))
    table = capsys.readouterr().out
    assert "bytes_per_token" in table and "1.8" in table


def test_cli_stats_and_plots(tmp_path, capsys):
    metrics.run_stats(_parse(metrics.add_stats_arguments, [str(DATA / "kjv.txt"), "--json", "--plots", str(tmp_path)]))
    printed = json.loads(capsys.readouterr().out)
    assert printed["words"] == len((DATA / "kjv.txt").read_text(encoding="utf-8").split())
    for name in ("rank-frequency.png", "growth.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_cli_stability_passes_its_options_to_train(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(polytok, "train", word_trainer(calls), raising=False)
    metrics.run_stability(_parse(metrics.add_stability_arguments, [
        str(DATA / "kjv.txt"), "-a", "bpe", "-v", "300", "-k", "2", "-f", "0.5", "--pattern", "none", "--json"]))
    printed = json.loads(capsys.readouterr().out)
    assert printed["samples"] == 2 and len(printed["jaccard"]) == 2
    assert calls[0][3] == {"pattern": None, "special_tokens": [], "progress": False}


def test_documents_that_are_not_text_are_an_error():
    with pytest.raises(CorpusError, match="corpus item 1 is int; expected str or bytes"):
        polytok.evaluate(GreedyTokenizer(), ["fine", 7])
    with pytest.raises(CorpusError, match="corpus item 1 is list; expected str or bytes"):
        polytok.evaluate(GreedyTokenizer(), ["fine", ["not", "text"]])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=40), st.integers(min_value=1, max_value=200))
def test_batches_keep_every_document_in_order(documents, budget):
    batches = list(metrics._batches(documents, budget))
    assert [document for batch, _ in batches for document in batch] == documents
    assert all(size == sum(map(len, batch)) for batch, size in batches)
    assert all(size >= budget for _, size in batches[:-1])
