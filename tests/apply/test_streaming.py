"""Streaming decode: the steps plus the flush equal `decode(ids)` for every id sequence, each
step's text is whole characters (a prefix of the final text), for every segmenter, batches of
streams and the loaded fixtures; bad ids are DecodeErrors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError, DecodeError
from apply_tokenizers import NAMES, any_text, tokenizers

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
READERS = Path(__file__).resolve().parents[1] / "data" / "readers"


def stream_all(tokenizer, ids) -> tuple[list[str], str]:
    stream = tokenizer.decode_stream()
    return [stream.step(token_id) for token_id in ids], stream.flush()


def check_stream(tokenizer, ids) -> None:
    steps, rest = stream_all(tokenizer, ids)
    expected = tokenizer.decode(ids)
    assert "".join(steps) + rest == expected
    emitted = ""
    for text in steps:
        emitted += text
        assert expected.startswith(emitted)


def known_ids(tokenizer, draws: list[int]) -> list[int]:
    """Draws mapped onto the tokeniser's ids: ordinary ids, with special ids now and then."""
    specials = sorted(tokenizer.special_tokens.values())
    return [specials[d % len(specials)] if d % 17 == 0 and specials else d % len(tokenizer.vocab) for d in draws]


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(draws=st.lists(st.integers(0, 10**6), max_size=40))
def test_steps_and_flush_equal_decode_for_any_ids(name, draws):
    tokenizer = tokenizers()[name]
    check_stream(tokenizer, known_ids(tokenizer, draws))


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=any_text)
def test_streams_of_encodings_give_the_text(name, text):
    tokenizer = tokenizers()[name]
    ids = tokenizer.encode(text)
    steps, rest = stream_all(tokenizer, ids)
    assert "".join(steps) + rest == tokenizer.decode(ids)


@pytest.mark.parametrize("name", NAMES)
def test_split_characters_wait_for_their_last_byte(name):
    tokenizer = tokenizers()[name]
    for character in ("😀", "中", "é"):
        data = character.encode("utf-8")
        ids = [tokenizer.token_id(bytes([byte])) for byte in data]
        steps, rest = stream_all(tokenizer, ids)
        assert steps == [""] * (len(data) - 1) + [character] and rest == ""
        # cut short: the unfinished character is flushed as U+FFFD, as decode gives it
        steps, rest = stream_all(tokenizer, ids[:-1])
        assert steps == [""] * (len(data) - 1) and rest == "\ufffd" == tokenizer.decode(ids[:-1])


def test_a_stream_starts_anew_after_flush():
    tokenizer = tokenizers()["bpe-cl100k"]
    stream = tokenizer.decode_stream()
    first = tokenizer.token_id(b"\xe4")
    assert stream.step(first) == "" and stream.flush() == "\ufffd"
    assert stream.step(tokenizer.token_id(b"a")) == "a"


def test_numpy_ids_are_accepted():
    tokenizer = tokenizers()["bpe-cl100k"]
    ids = tokenizer.encode_to_numpy("héllo 😀")
    stream = tokenizer.decode_stream()
    assert "".join(stream.step(token_id) for token_id in ids) + stream.flush() == "héllo 😀"


@SETTINGS
@given(texts=st.lists(any_text, min_size=1, max_size=4))
def test_batch_of_streams(texts):
    tokenizer = tokenizers()["bpe-o200k"]
    pad = tokenizer.special_tokens["<pad>"]
    encoded = [tokenizer.encode(text) for text in texts]
    width = max(len(ids) for ids in encoded)
    streams = tokenizer.decode_stream(batch_size=len(texts))
    out = [""] * len(texts)
    for position in range(width):
        column = [ids[position] if position < len(ids) else pad for ids in encoded]
        for row, text in enumerate(streams.step(column)):
            out[row] += text
    for row, text in enumerate(streams.flush()):
        out[row] += text
    assert out == [text + "<pad>" * (width - len(ids)) for text, ids in zip(texts, encoded)]


def test_bad_ids_are_decode_errors():
    tokenizer = tokenizers()["bpe-cl100k"]
    stream = tokenizer.decode_stream()
    for bad in (tokenizer.n_vocab, 10**12, -1):
        with pytest.raises(DecodeError, match=f"id {bad} is not a token"):
            stream.step(bad)
    for bad in ("a", 1.5, None, True):
        with pytest.raises(DecodeError, match="is not an integer id"):
            stream.step(bad)
    batch = tokenizer.decode_stream(batch_size=2)
    with pytest.raises(DecodeError, match="got 1 ids for 2 streams"):
        batch.step([1])
    with pytest.raises(DecodeError, match="is not a token"):
        batch.step([1, -5])
    with pytest.raises(ConfigError, match="batch_size must be an integer of at least 1"):
        tokenizer.decode_stream(batch_size=0)


# ---- loaded files: their own decoders ----------------------------------------------------------

EXPECTED = json.loads((READERS / "expected.json").read_text(encoding="utf-8"))["files"]


@pytest.fixture(scope="module")
def loaded():
    return {name: polytok.load(READERS / name) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loaded_streams_of_encodings_equal_decode(loaded, name):
    tokenizer = loaded[name]
    for case in EXPECTED[name]:
        check_stream(tokenizer, case["ids"])


# A ByteFallback decoder (Llama's) turns a whole run of byte tokens into U+FFFD once it is not
# valid UTF-8, so characters a stream has emitted can turn into U+FFFD later: not context-free.
CONTEXT_FREE = [name for name in sorted(EXPECTED) if name != "hf-bpe-llama.json"]


@pytest.mark.parametrize("name", CONTEXT_FREE)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(draws=st.lists(st.integers(0, 10**6), max_size=20))
def test_loaded_streams_of_any_ids_equal_decode(loaded, name, draws):
    tokenizer = loaded[name]
    check_stream(tokenizer, [draw % tokenizer.vocab_size for draw in draws])


def test_loaded_stream_rejects_bad_ids(loaded):
    stream = loaded["sp-unigram.model"].decode_stream()
    with pytest.raises(DecodeError, match="is not a token"):
        stream.step(np.int64(10**9))
