"""Truncation never splits a character and keeps as many tokens as it can; chunks are slices of
the encoding that decode to their spans and cover the text; padded batches hold each encoding
with its mask, on either side; bad sizes are ConfigErrors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import polytok
from polytok.apply.chunking import truncate
from polytok.errors import ConfigError, EncodeError
from apply_tokenizers import NAMES, any_text, tokenizers

READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def ends_on_character(data: bytes, end: int) -> bool:
    return end == len(data) or (data[end] & 0xC0) != 0x80


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=any_text, max_tokens=st.integers(1, 12))
def test_truncation_keeps_whole_characters(name, text, max_tokens):
    tokenizer = tokenizers()[name]
    ids = tokenizer.encode(text)
    data = text.encode("utf-8", "surrogatepass")
    ends = np.cumsum([len(tokenizer.token_bytes(i)) for i in ids]).tolist()
    kept = tokenizer.encode_truncated(text, max_tokens)
    assert kept == ids[: len(kept)] and len(kept) <= max_tokens
    assert data.startswith(tokenizer.decode_bytes(kept)) and ends_on_character(data, ends[len(kept) - 1] if kept else 0)
    # maximal: every longer cut within the limit would split a character
    assert all(not ends_on_character(data, ends[k - 1]) for k in range(len(kept) + 1, min(max_tokens, len(ids)) + 1))
    tail = tokenizer.encode_truncated(text, max_tokens, side="left")
    assert tail == ids[len(ids) - len(tail) :] and len(tail) <= max_tokens
    start = len(data) - len(tokenizer.decode_bytes(tail))
    assert ends_on_character(data, start)
    assert all(not ends_on_character(data, ends[k - 1]) for k in range(max(len(ids) - max_tokens, 1), len(ids) - len(tail)))


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(texts=st.lists(any_text, min_size=1, max_size=3), max_tokens=st.integers(1, 12))
def test_encode_with_max_tokens_is_the_truncation(name, texts, max_tokens):
    tokenizer = tokenizers()[name]
    expected = [tokenizer.encode_truncated(text, max_tokens) for text in texts]
    assert [tokenizer.encode(text, max_tokens=max_tokens) for text in texts] == expected
    assert [tokenizer.encode_to_numpy(text, max_tokens=max_tokens).tolist() for text in texts] == expected
    assert tokenizer.encode_batch(texts, 2, max_tokens=max_tokens) == expected
    for kept in expected:
        tokenizer.decode_bytes(kept).decode("utf-8", "surrogatepass")  # whole characters only


LOADED = ["sp-bpe-bytes.model", "sp-unigram.model", "hf-unigram.json", "hf-wordpiece.json", "hf-bpe-byte-level.json",
          "hf-bpe-llama.json"]


@pytest.mark.parametrize("name", LOADED)
@SETTINGS
@given(texts=st.lists(any_text, min_size=1, max_size=3), max_tokens=st.integers(1, 12))
def test_loaded_encode_with_max_tokens_keeps_whole_characters(name, texts, max_tokens):
    tokenizer = polytok.load(READERS / name)
    # a loaded file's special tokens ("<unk>", "[CLS]") are refused as text by default
    assume(not any(special in text for text in texts for special in tokenizer.special_tokens))
    for text in texts:
        ids = tokenizer.encode(text)
        kept = tokenizer.encode(text, max_tokens=max_tokens)
        assert kept == tokenizer.encode_truncated(text, max_tokens) == ids[: len(kept)] and len(kept) <= max_tokens
        assert tokenizer.encode_to_numpy(text, max_tokens=max_tokens).tolist() == kept
        whole = tokenizer.decode_bytes(ids)
        # maximal: a longer cut within the limit would end inside a character of the tokens' bytes
        for longer in range(len(kept) + 1, min(max_tokens, len(ids)) + 1):
            end = len(tokenizer.decode_bytes(ids[:longer]))
            assert end < len(whole) and (whole[end] & 0xC0) == 0x80
    assert tokenizer.encode_batch(texts, max_tokens=max_tokens) == [tokenizer.encode(t, max_tokens=max_tokens) for t in texts]


@pytest.mark.parametrize("name", ["bpe-cl100k", "viterbi"])
def test_max_tokens_applies_to_sampled_encodings(name):
    tokenizer = tokenizers()[name]
    text = "the hat ate 12 bats, éte 中中 😀"
    options = {"sample": True} if name == "viterbi" else {"dropout": 0.3}
    full = tokenizer.encode(text, seed=7, **options)
    assert tokenizer.encode(text, seed=7, max_tokens=5, **options) == truncate(tokenizer, full, 5)
    assert tokenizer.encode_batch([text], seed=7, max_tokens=5, **options) == [truncate(tokenizer, full, 5)]


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=any_text, max_tokens=st.integers(4, 14), overlap=st.integers(0, 3))
def test_chunks_decode_back_to_the_text(name, text, max_tokens, overlap):
    tokenizer = tokenizers()[name]
    ids = tokenizer.encode(text)
    chunks = tokenizer.chunk(text, max_tokens, overlap)
    if not ids:
        assert chunks == []
        return
    assert chunks[0].start == 0 and chunks[0].first_token == 0
    assert chunks[-1].end == len(text) and chunks[-1].first_token + len(chunks[-1].ids) == len(ids)
    rebuilt = ""
    for previous, current in zip([None, *chunks], chunks):
        assert 1 <= len(current.ids) <= max_tokens
        assert tokenizer.decode(current.ids) == current.text == text[current.start : current.end]
        assert ids[current.first_token : current.first_token + len(current.ids)] == current.ids
        if previous is not None:
            assert previous.first_token < current.first_token <= previous.first_token + len(previous.ids)
            assert previous.first_token + len(previous.ids) - current.first_token <= overlap
            assert previous.start < current.start <= previous.end
        rebuilt += current.text[len(rebuilt) - current.start :]
    assert rebuilt == text


def test_chunks_of_bytes_carry_byte_spans():
    tokenizer = tokenizers()["bpe-cl100k"]
    data = "héllo wörld, 😀 again and again".encode()
    chunks = tokenizer.chunk(data, 5, 1)
    assert chunks[0].start == 0 and chunks[-1].end == len(data)
    assert all(data[c.start : c.end] == c.text == tokenizer.decode_bytes(c.ids) for c in chunks)


@pytest.mark.parametrize("side", ["left", "right"])
@SETTINGS
@given(texts=st.lists(any_text, min_size=1, max_size=5), max_tokens=st.none() | st.integers(1, 9))
def test_padded_batch(side, texts, max_tokens):
    tokenizer = tokenizers()["bpe-o200k"]
    pad = tokenizer.special_tokens["<pad>"]
    batch = tokenizer.encode_batch_padded(texts, max_tokens=max_tokens, padding_side=side, pad_to_multiple_of=4)
    expected = [tokenizer.encode(t) if max_tokens is None else tokenizer.encode_truncated(t, max_tokens) for t in texts]
    width = max(len(ids) for ids in expected)
    assert batch.ids.shape == batch.attention_mask.shape == (len(texts), -(-width // 4) * 4)
    assert batch.ids.dtype == np.int64 and batch.attention_mask.dtype == np.uint8
    for row, ids in enumerate(expected):
        mask = batch.attention_mask[row].astype(bool)
        assert batch.ids[row][mask].tolist() == ids and (batch.ids[row][~mask] == pad).all()
        assert mask.sum() == len(ids)
        if ids and len(ids) < mask.size:
            assert mask[0 if side == "right" else -1] and not mask[-1 if side == "right" else 0]


def test_pad_id_is_found_or_asked_for():
    with_pad = tokenizers()["bpe-cl100k"]
    assert with_pad.encode_batch_padded(["a", ""]).ids[1, 0] == with_pad.special_tokens["<pad>"]
    assert with_pad.encode_batch_padded(["a", ""], pad_id=0).ids[1, 0] == 0
    from polytok.tokenizer import Tokenizer

    plain = Tokenizer(with_pad.vocab, segmenter="merges", pattern="cl100k")
    with pytest.raises(ConfigError, match="no padding token"):
        plain.encode_batch_padded(["a"])
    with pytest.raises(ConfigError, match="pad_id must be an id"):
        with_pad.encode_batch_padded(["a"], pad_id=-1)


def test_bad_sizes_are_config_errors():
    tokenizer = tokenizers()["bpe-cl100k"]
    for bad in (0, -3, 1.5, True, None):
        with pytest.raises(ConfigError, match="max_tokens must be an integer of at least 1"):
            tokenizer.encode_truncated("hello", bad)
        with pytest.raises(ConfigError, match="max_tokens must be an integer of at least 1"):
            tokenizer.chunk("hello", bad)
    for overlap in (4, 5):
        with pytest.raises(ConfigError, match=f"overlap \\({overlap}\\) must be below max_tokens \\(4\\)"):
            tokenizer.chunk("hello", 4, overlap)
    with pytest.raises(ConfigError, match="overlap must be an integer of at least 0"):
        tokenizer.chunk("hello", 4, -1)
    with pytest.raises(ConfigError, match="side must be 'left' or 'right'"):
        tokenizer.encode_truncated("hello", 3, side="middle")
    with pytest.raises(ConfigError, match="padding_side must be 'left' or 'right'"):
        tokenizer.encode_batch_padded(["a"], padding_side="top")
    with pytest.raises(ConfigError, match="max_tokens must be an integer of at least 1"):
        tokenizer.encode_batch_padded(["a"], max_tokens=0)
    loaded = polytok.load(READERS / "hf-unigram.json")
    for bad in (0, -3, 1.5, True, "4"):
        for encoder in (tokenizer, loaded):
            for call in (encoder.encode, encoder.encode_to_numpy):
                with pytest.raises(ConfigError, match="max_tokens must be an integer of at least 1"):
                    call("hello", max_tokens=bad)
            with pytest.raises(ConfigError, match="max_tokens must be an integer of at least 1"):
                encoder.encode_batch(["hello"], max_tokens=bad)


def test_a_character_longer_than_a_chunk_is_an_encode_error():
    tokenizer = tokenizers()["bpe-cl100k"]
    assert len(tokenizer.encode("🦀")) > 1
    with pytest.raises(EncodeError, match="character at byte 1 of the text takes more than max_tokens=1"):
        tokenizer.chunk("a🦀", 1)
    assert tokenizer.encode_truncated("a🦀", 1) == tokenizer.encode("a")
    assert tokenizer.encode_truncated("🦀", 1) == []


@pytest.mark.parametrize("name", ["sp-bpe-bytes.model", "hf-unigram.json", "hf-wordpiece.json", "hf-bpe-byte-level.json"])
def test_loaded_truncation_and_padding(name):
    tokenizer = polytok.load(READERS / name)
    text = "Héllo wörld, 中文 😀 and more words here"
    ids = tokenizer.encode(text)
    for limit in range(1, len(ids) + 1):
        kept = tokenizer.encode_truncated(text, limit)
        assert kept == ids[: len(kept)] and len(kept) <= limit
        tokenizer.decode_bytes(kept).decode("utf-8")  # whole characters: no error
    for limit in range(1, len(ids) + 1):
        kept = tokenizer.encode_truncated(text, limit)
        assert tokenizer.encode(text, max_tokens=limit) == kept == tokenizer.encode_to_numpy(text, max_tokens=limit).tolist()
        assert tokenizer.encode_batch([text, "a"], max_tokens=limit) == [kept, tokenizer.encode_truncated("a", limit)]
    batch = tokenizer.encode_batch_padded([text, "a"], max_tokens=5, pad_id=0)
    assert batch.attention_mask.sum(axis=1).tolist() == [len(tokenizer.encode_truncated(text, 5)), len(tokenizer.encode("a"))]
