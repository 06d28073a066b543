"""The one budget rule: vocab_size = base + special tokens + K, checked once by `train`, and every
algorithm's training record names K `budget`."""
from __future__ import annotations

import numpy as np
import pytest

import polytok
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.trainers import TRAINERS, base_size, budget

COUNTS = PreTokenCounts.from_dict({b"hello": 4, b" world": 3, b" wide": 2, b"!": 1}, pattern="cl100k")


def test_budget_is_what_the_vocabulary_leaves_after_the_base_and_the_special_tokens():
    assert budget(300, [], 256) == 44
    assert budget(np.int64(300), ["<s>", "</s>"], 256) == 42
    assert budget(515, ["<s>"], 512) == 2
    assert budget(256, [], 256) == 0


@pytest.mark.parametrize("vocab_size", [255, 300.0, True, "300", None])
def test_budget_refuses_anything_but_a_large_enough_integer_with_one_message(vocab_size):
    with pytest.raises(ConfigError) as error:
        budget(vocab_size, ["<s>"], 256)
    assert str(error.value) == (
        f"vocab_size must be an integer of at least 257 (256 byte tokens + 1 special tokens), got {vocab_size!r}"
    )


def test_base_sizes():
    assert base_size("bpe", {}) == base_size("unigram", {}) == base_size("convex", {}) == 256
    assert base_size("wordpiece", {}) == 512
    assert base_size("wordpiece", {"continuation_marker": None}) == 256


@pytest.mark.parametrize("algorithm", sorted(TRAINERS))
def test_every_training_record_names_the_budget_the_same(algorithm):
    options = {"solver": "highs"} if algorithm == "convex" else {}
    vocab_size = base_size(algorithm, options) + 1 + 5
    tokenizer = polytok.train(COUNTS, algorithm=algorithm, vocab_size=vocab_size, special_tokens=["<s>"],
                              progress=False, **options)
    assert tokenizer.training["budget"] == 5
    assert "vocab_size" not in tokenizer.training


def test_the_budget_is_not_an_option():
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['budget'\]"):
        polytok.train(COUNTS, vocab_size=300, budget=10, progress=False)
