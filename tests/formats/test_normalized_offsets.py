"""Offsets through a loaded tokenizer.json's normaliser map each token to a span of the original
text: they equal the `tokenizers` library's `Encoding.offsets`, stay in order and inside the
text, and the aligned normalisers give the text the plain ones give."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tokenizers  # a test dependency: the reference for the offsets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError
from polytok.offsets import character_starts

DATA = Path(__file__).parent.parent / "data"
READERS = DATA / "readers"
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

PRECOMPILED = json.loads((READERS / "hf-unigram.json").read_text(encoding="utf-8"))["normalizer"]
NORMALIZERS = {
    "NFC": {"type": "NFC"},
    "NFD": {"type": "NFD"},
    "NFKC": {"type": "NFKC"},
    "NFKD": {"type": "NFKD"},
    "Lowercase": {"type": "Lowercase"},
    "Replace-string": {"type": "Replace", "pattern": {"String": "ll"}, "content": "L"},
    "Replace-regex": {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": "  "},
    "Replace-delete": {"type": "Replace", "pattern": {"String": "e"}, "content": ""},
    "Prepend": {"type": "Prepend", "prepend": "\u2581x"},
    "Strip": {"type": "Strip", "strip_left": True, "strip_right": True},
    "BertNormalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
    "BertNormalizer-keep-accents": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                    "strip_accents": False, "lowercase": False},
    "Precompiled": PRECOMPILED,
    "Sequence": {"type": "Sequence", "normalizers": [
        {"type": "NFKD"}, {"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        {"type": "Prepend", "prepend": "\u2581"}, {"type": "Strip", "strip_left": False, "strip_right": True}]},
}

# Characters every normaliser rewrites: composed and decomposed accents, marks out of order,
# compatibility forms (ligature, full-width, superscript), case pairs whose lower case is longer
# or context dependent, Hangul, controls, odd whitespace, CJK ideographs and an emoji.
ALPHABET = "aeilsHE \u00e9e\u0301\u0323\u0302\u00c5\ufb01\uff48\u00b2\u0130\u03a3\u00df\ud55c\u1100\u1161\x07\u200b\t\n\u3000\u4e2d\u6587\U0001f600,."
text_strategy = st.text(alphabet=ALPHABET, max_size=30) | st.text(max_size=12)


def excerpts() -> list[str]:
    """A short excerpt of each tests/data text."""
    return [path.read_text(encoding="utf-8")[1000:1400] for path in sorted(DATA.glob("*.txt"))]


_BUILT: dict[str, tuple] = {}


def built(name: str, tmp_path_factory) -> tuple:
    """(tokenizers' Tokenizer, polytok's) for the byte-level BPE fixture with normaliser `name`."""
    if name not in _BUILT:
        record = json.loads((READERS / "hf-bpe-byte-level.json").read_text(encoding="utf-8"))
        record["normalizer"] = NORMALIZERS[name]
        record["post_processor"] = None
        path = tmp_path_factory.mktemp("normalized") / f"{name}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
        _BUILT[name] = (tokenizers.Tokenizer.from_file(str(path)), polytok.load(path))
    return _BUILT[name]


def check_against_tokenizers(theirs_tokenizer, tokenizer, text: str) -> None:
    encoding = theirs_tokenizer.encode(text, add_special_tokens=False)
    ids, offsets = tokenizer.encode_with_offsets(text, unit="chars")
    assert ids == encoding.ids
    assert [tuple(pair) for pair in offsets.tolist()] == encoding.offsets
    # in order and inside the text
    assert (offsets[:, 0] <= offsets[:, 1]).all() and (np.diff(offsets, axis=0) >= 0).all()
    assert len(offsets) == 0 or (offsets.min() >= 0 and offsets.max() <= len(text))
    # byte offsets are the same spans, of whole characters, in bytes
    data = text.encode("utf-8")
    ids_again, byte_offsets = tokenizer.encode_with_offsets(data, unit="bytes")
    assert ids_again == ids and (character_starts(data)[byte_offsets] == offsets).all()
    assert all(byte == len(data) or (data[byte] & 0xC0) != 0x80 for byte in byte_offsets.reshape(-1).tolist())


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
@SETTINGS
@given(text=text_strategy)
def test_offsets_through_each_normaliser_agree_with_tokenizers(name, text, tmp_path_factory):
    theirs, tokenizer = built(name, tmp_path_factory)
    aligned, alignment = tokenizer.pipeline.aligned_text(text)
    assert aligned == tokenizer.pipeline.normalizer(text) and len(alignment) == len(aligned)
    check_against_tokenizers(theirs, tokenizer, text)


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_offsets_through_each_normaliser_on_the_excerpts(name, tmp_path_factory):
    theirs, tokenizer = built(name, tmp_path_factory)
    for text in excerpts():
        check_against_tokenizers(theirs, tokenizer, text)


@pytest.mark.parametrize("name", ["hf-bpe-byte-level-nfc.json", "hf-bpe-llama.json"])
@SETTINGS
@given(text=text_strategy)
def test_loaded_fixtures_with_normalisers_agree_with_tokenizers(name, text):
    """NFC with ByteLevel's prefix space; Llama's Prepend and Replace of spaces with byte fallback."""
    check_against_tokenizers(tokenizers.Tokenizer.from_file(str(READERS / name)), polytok.load(READERS / name), text)


@pytest.mark.parametrize("name", ["hf-wordpiece.json", "hf-unigram.json"])
def test_files_whose_tokens_do_not_spell_the_text_refuse_offsets(name):
    with pytest.raises(ConfigError, match="offsets need a pipeline whose tokens spell the input"):
        polytok.load(READERS / name).encode_with_offsets("Héllo wörld")


def test_chunks_need_tokens_that_spell_the_input():
    tokenizer = polytok.load(READERS / "hf-bpe-byte-level-nfc.json")
    with pytest.raises(ConfigError, match="chunk needs tokens that spell the input"):
        tokenizer.chunk("Cafe\u0301 and more text", 4)
    assert polytok.load(READERS / "hf-bpe-byte-level.json").chunk("Hello world", 2)
