"""Offsets tile the input exactly, in bytes and in characters, for every segmenter, special
tokens included; character offsets give each character to the token holding its first byte."""
from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError, EncodeError
from apply_tokenizers import NAMES, any_text, tokenizers

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
READERS = Path(__file__).resolve().parents[1] / "data" / "readers"


def check_byte_offsets(tokenizer, data: bytes, ids, offsets) -> None:
    assert offsets.shape == (len(ids), 2) and offsets.dtype == np.int64
    if not ids:
        assert data == b""
        return
    assert offsets[0, 0] == 0 and offsets[-1, 1] == len(data)
    assert (offsets[1:, 0] == offsets[:-1, 1]).all()
    for token_id, (start, end) in zip(ids, offsets.tolist()):
        assert data[start:end] == tokenizer.token_bytes(token_id)


def reference_character_offsets(text: str, byte_offsets: np.ndarray) -> list[list[int]]:
    """Character offsets from first principles: the byte where each character starts, and each
    byte offset as the number of characters starting before it."""
    starts, at = [], 0
    for character in text:
        starts.append(at)
        at += len(character.encode("utf-8", "surrogatepass"))
    return [[bisect.bisect_left(starts, position) for position in pair] for pair in byte_offsets.tolist()]


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=any_text)
def test_offsets_tile_the_text(name, text):
    tokenizer = tokenizers()[name]
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    data = text.encode("utf-8", "surrogatepass")
    check_byte_offsets(tokenizer, data, ids, offsets)
    same_ids, characters = tokenizer.encode_with_offsets(text, unit="chars")
    assert same_ids == ids
    assert characters.tolist() == reference_character_offsets(text, offsets)
    if ids:
        assert characters[0, 0] == 0 and characters[-1, 1] == len(text)
        assert (characters[1:, 0] == characters[:-1, 1]).all()


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(data=st.binary(max_size=80))
def test_byte_offsets_of_any_bytes(name, data):
    tokenizer = tokenizers()[name]
    ids, offsets = tokenizer.encode_with_offsets(data, disallowed_special=())  # arbitrary bytes may spell a special token
    check_byte_offsets(tokenizer, data, ids, offsets)


@SETTINGS
@given(left=any_text, right=any_text)
def test_offsets_with_special_tokens(left, right):
    tokenizer = tokenizers()["bpe-cl100k"]
    text = left + "<|endoftext|>" + right
    ids, offsets = tokenizer.encode_with_offsets(text, allowed_special="all")
    assert ids == tokenizer.encode(text, allowed_special="all")
    check_byte_offsets(tokenizer, text.encode("utf-8", "surrogatepass"), ids, offsets)
    special = ids.index(tokenizer.special_tokens["<|endoftext|>"])
    _, characters = tokenizer.encode_with_offsets(text, unit="chars", allowed_special="all")
    assert characters[special].tolist() == [len(left), len(left) + len("<|endoftext|>")]
    with pytest.raises(EncodeError, match="disallowed"):
        tokenizer.encode_with_offsets(text)


def test_a_split_character_belongs_to_its_first_token():
    tokenizer = tokenizers()["bpe-cl100k"]
    text = "a🦀b"  # the crab is in no training text: its four bytes take several tokens
    ids, offsets = tokenizer.encode_with_offsets(text)
    _, characters = tokenizer.encode_with_offsets(text, unit="chars")
    assert len(ids) >= 4
    characters_before = {0: 0, 1: 1, 2: 2, 3: 2, 4: 2, 5: 2, 6: 3}
    assert characters.tolist() == [[characters_before[start], characters_before[end]] for start, end in offsets.tolist()]
    assert any(start == end for start, end in characters.tolist())  # tokens of the crab's later bytes


def test_bad_arguments():
    tokenizer = tokenizers()["bpe-cl100k"]
    with pytest.raises(ConfigError, match="unit must be 'bytes' or 'chars'"):
        tokenizer.encode_with_offsets("x", unit="words")
    with pytest.raises(EncodeError, match="character offsets need text"):
        tokenizer.encode_with_offsets(b"\xff", unit="chars")
    assert tokenizer.encode_with_offsets(b"\xff")[1].tolist() == [[0, 1]]


def test_loaded_byte_level_file_offsets_tile_the_text():
    tokenizer = polytok.load(READERS / "hf-bpe-byte-level.json")
    for text in ("Hello world, héllo 😀", " leading and  double  spaces\n", ""):
        ids, offsets = tokenizer.encode_with_offsets(text)
        assert ids == tokenizer.encode(text)
        check_byte_offsets(tokenizer, text.encode(), ids, offsets)
