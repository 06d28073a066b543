"""polytok.lm without PyTorch: the byte windows every tokeniser's model reads, their batches, and
the errors that come before any training (no tokenisers, a budget below one step, torch missing)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError
from polytok.lm import evaluate
from polytok.lm.data import IGNORED, encode_windows, window_offsets

DATA = Path(__file__).parents[1] / "data"
KJV = (DATA / "kjv.txt").read_bytes()


def byte_tokenizer() -> polytok.Tokenizer:
    """The 256 single bytes and nothing else: one token per byte."""
    return polytok.Tokenizer([bytes([b]) for b in range(256)], segmenter="merges", pattern=None, merges=[])


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=400), context=st.integers(4, 64))
def test_windows_cover_the_text_once_at_character_boundaries(text, context):
    data = text.encode("utf-8")
    offsets = window_offsets(data, context)
    assert offsets[0] == 0 and offsets[-1] == len(data)
    pieces = [data[start:end] for start, end in zip(offsets[:-1], offsets[1:])]
    assert b"".join(pieces) == data
    for piece in pieces:
        assert 0 < len(piece) <= context or len(data) == 0
        piece.decode("utf-8")  # every cut falls between characters


def test_windows_end_between_words_where_they_can():
    offsets = window_offsets(KJV, 256)
    cuts = offsets[1:-1]
    between_words = [KJV[cut:cut + 1] == b" " or KJV[cut - 1:cut] == b"\n" for cut in cuts]
    assert len(cuts) > 50 and all(between_words)
    assert np.diff(offsets)[:-1].min() > 256 * 0.75 - 1


def test_batches_start_with_the_window_id_and_pad_the_targets():
    tokenizer = byte_tokenizer()
    text = "In the beginning\nGod created the heaven and the earth.\n".encode()
    windows = encode_windows(tokenizer, text, window_offsets(text, 20), None, "test")
    assert windows.bos == 256 and windows.tokens == windows.bytes == len(text)
    inputs, targets = windows.batch(np.array([0, len(windows) - 1]))
    lengths = windows.lengths[[0, len(windows) - 1]]
    assert inputs.shape == targets.shape == (2, lengths.max())
    for row, length in enumerate(lengths):
        window = windows.ids[windows.starts[[0, len(windows) - 1][row]]:][:length]
        assert list(targets[row, :length]) == list(window)
        assert (targets[row, length:] == IGNORED).all()
        assert inputs[row, 0] == 256 and list(inputs[row, 1:length]) == list(window[:-1])


def test_no_tokenizers_is_an_error():
    with pytest.raises(ConfigError, match="no tokenisers"):
        evaluate({}, polytok.texts(["abc"]), polytok.texts(["abc"]), budget=10**6)
    with pytest.raises(ConfigError, match="no tokenisers"):
        evaluate([], polytok.texts(["abc"]), polytok.texts(["abc"]), budget=10**6)


def test_a_budget_below_one_step_names_the_step_size():
    with pytest.raises(ConfigError, match=r"budget=1,000 .* 4 × 512 = 2,048 bytes: raise the budget"):
        evaluate([byte_tokenizer()], polytok.texts(["abc"]), polytok.texts(["abc"]), budget=1000, batch_size=4)


@pytest.mark.parametrize("options, message", [
    ({"depth": 0}, "depth must be an integer of at least 1, got 0"),
    ({"width": 98, "heads": 2}, "heads of an even size"),
    ({"width": 100, "heads": 3}, "heads of an even size"),
    ({"seeds": 0}, "at least one seed"),
    ({"seeds": [1, 1]}, "each seed once"),
    ({"device": "tpu"}, "device='tpu'"),
    ({"warmup": 1.0}, "warmup=1.0"),
    ({"output": "results.txt"}, "should end in .json"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ConfigError, match=message):
        evaluate([byte_tokenizer()], polytok.texts(["abc"]), polytok.texts(["abc"]), budget=10**6, **options)


def test_missing_torch_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(ConfigError, match=r"needs PyTorch.*pip install 'polytok\[lm\]'"):
        evaluate([byte_tokenizer()], polytok.texts(["abc"]), polytok.texts(["abc"]), budget=10**6)
