"""polytok.stability: Jaccard similarity of vocabularies trained on sampled subsets, its
determinism under a seed, one-shot iterators, and bad options."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from polytok.corpus import texts
from polytok.errors import ConfigError, CorpusError
from polytok.stability import jaccard, stability
from test_metrics import GreedyTokenizer

DATA = Path(__file__).parent / "data"


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
    result = stability(texts(KJV_LINES), vocab_size=300, samples=3, fraction=1.0, trainer=word_trainer())
    assert result["mean_jaccard"] == 1.0 == result["min_jaccard"] == result["mean_jaccard_learned"]
    assert result["sample_sizes"] == [sum(map(len, KJV_LINES))] * 3


def test_stability_reports_the_jaccard_of_the_trained_vocabularies():
    calls: list = []
    result = stability(texts(KJV_LINES), algorithm="bpe", vocab_size=400, samples=3, fraction=0.3, seed=5,
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
    again = stability(texts(KJV_LINES), algorithm="bpe", vocab_size=400, samples=3, fraction=0.3, seed=5,
                              trainer=word_trainer(), pattern="cl100k")
    assert again == result
    other = stability(texts(KJV_LINES), vocab_size=400, samples=3, fraction=0.3, seed=6, trainer=word_trainer())
    assert other["sample_sizes"] != result["sample_sizes"]


def test_stability_reads_a_one_shot_iterator_for_every_sample():
    calls: list = []
    stability(iter(KJV_LINES[:200]), vocab_size=300, samples=2, fraction=1.0, trainer=word_trainer(calls))
    assert calls[0][0] == calls[1][0] == KJV_LINES[:200]


def test_stability_bad_options():
    with pytest.raises(ConfigError, match="at least 2 samples"):
        stability(texts(KJV_LINES), vocab_size=300, samples=1, trainer=word_trainer())
    with pytest.raises(ConfigError, match="fraction"):
        stability(texts(KJV_LINES), vocab_size=300, fraction=0.0, trainer=word_trainer())
    with pytest.raises(CorpusError, match="empty"):
        stability(texts(["one line"]), vocab_size=300, fraction=0.01, trainer=word_trainer())


def test_jaccard_hand_computed():
    assert jaccard({b"a", b"b", b"c"}, {b"b", b"c", b"d"}) == 0.5
    assert jaccard(set(), set()) == 1.0
    assert jaccard({b"a"}, set()) == 0.0


def test_the_default_trainer_is_polytok_train():
    result = stability(texts(KJV_LINES[:300]), vocab_size=300, samples=2, fraction=1.0, progress=False)
    assert result["mean_jaccard"] == 1.0
    assert len(result["jaccard"]) == 2
