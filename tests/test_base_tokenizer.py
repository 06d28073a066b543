"""The public encode and decode API exists once, in BaseTokenizer: the native and the loaded
tokenisers implement only its small core, so they take the same arguments, and an argument a
subclass cannot honour raises instead of being dropped."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import polytok
from polytok.base_tokenizer import BaseTokenizer
from polytok.errors import ConfigError
from polytok.formats.loaded import LoadedTokenizer
from polytok.tokenizer import Tokenizer

READERS = Path(__file__).resolve().parent / "data" / "readers"
ENCODE_API = [
    "encode", "encode_nbest", "encode_ordinary", "encode_to_numpy", "encode_batch", "encode_batch_to_numpy",
    "encode_ordinary_batch", "count_tokens", "token_histogram", "decode", "decode_bytes", "encode_with_offsets",
    "encode_truncated", "chunk", "encode_batch_padded", "decode_stream", "heal",
]


def test_every_public_encode_and_decode_method_is_declared_once():
    for name in ENCODE_API:
        assert name in BaseTokenizer.__dict__, name
        for subclass in (Tokenizer, LoadedTokenizer):
            assert name not in subclass.__dict__, f"{subclass.__name__} declares {name} again"


def test_the_subclasses_implement_the_whole_core():
    assert BaseTokenizer.__abstractmethods__ == {"_make_policy", "_encode_core", "_encode_batch_core"}
    for subclass in (Tokenizer, LoadedTokenizer):
        assert not inspect.isabstract(subclass)
    with pytest.raises(TypeError, match="abstract"):
        BaseTokenizer()


@pytest.mark.parametrize("name", ["hf-wordpiece.json", "sp-unigram.model"])
def test_a_loaded_tokenizer_refuses_what_it_cannot_honour_in_every_method(name):
    tokenizer = polytok.load(READERS / name)
    native = polytok.train(polytok.texts(["the cat sat on the mat " * 20]), vocab_size=270, algorithm="unigram")
    for options in ({"sample": True}, {"dropout": 0.1}, {"alpha": 0.5}, {"seed": 3}):
        for call in (lambda **o: tokenizer.encode("x", **o), lambda **o: tokenizer.encode_batch(["x"], **o),
                     lambda **o: tokenizer.encode("x", max_tokens=2, **o)):
            with pytest.raises(ConfigError, match="apply to polytok's own tokenisers"):
                call(**options)
    with pytest.raises(ConfigError, match="encode_nbest"):
        tokenizer.encode_nbest("x", 2)
    # the native Unigram tokeniser honours the same arguments
    assert native.encode("the cat", sample=True, seed=3) == native.encode("the cat", sample=True, seed=3)
    assert native.encode_nbest("the cat", 2)[0][0] == native.encode("the cat")
