"""Offsets through a loaded tokenizer.json's normaliser and pre-tokeniser map each token to a
span of the original text: they equal the `tokenizers` library's `Encoding.offsets`, stay in
order and inside the text, and the aligned normalisers give the text the plain ones give. That
holds for files whose tokens do not spell the text too: Metaspace BPE and Unigram ('▁' for a
space, each prepend scheme, split or not, unknown and byte-fallback tokens) and WordPiece ('##'
continuations, [UNK] for a whole word, lower case and accent stripping), each trained here with
the `tokenizers` library."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tokenizers  # a test dependency: the reference for the offsets
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

import polytok
from polytok.errors import ConfigError
from polytok.formats.huggingface.alignment import aligned_normalizer
from polytok.apply.offsets import character_starts

DATA = Path(__file__).resolve().parents[2] / "data"
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
    ids, offsets = tokenizer.encode_with_offsets(text, unit="chars", allowed_special="all")
    assert ids == encoding.ids
    assert [tuple(pair) for pair in offsets.tolist()] == encoding.offsets
    # in order and inside the text
    assert (offsets[:, 0] <= offsets[:, 1]).all() and (np.diff(offsets, axis=0) >= 0).all()
    assert len(offsets) == 0 or (offsets.min() >= 0 and offsets.max() <= len(text))
    # byte offsets are the same spans, of whole characters, in bytes
    data = text.encode("utf-8")
    ids_again, byte_offsets = tokenizer.encode_with_offsets(data, unit="bytes", allowed_special="all")
    assert ids_again == ids and (character_starts(data)[byte_offsets] == offsets).all()
    assert all(byte == len(data) or (data[byte] & 0xC0) != 0x80 for byte in byte_offsets.reshape(-1).tolist())


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
@SETTINGS
@given(text=text_strategy)
def test_offsets_through_each_normaliser_agree_with_tokenizers(name, text, tmp_path_factory):
    theirs, tokenizer = built(name, tmp_path_factory)
    aligned, alignment = aligned_normalizer(NORMALIZERS[name])(text, list(range(len(text))))
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
@SETTINGS
@given(text=text_strategy)
def test_loaded_fixtures_whose_tokens_do_not_spell_the_text_agree_with_tokenizers(name, text):
    """BERT's WordPiece ('##', [UNK], BertNormalizer); a Unigram file with Precompiled and Metaspace."""
    check_against_tokenizers(tokenizers.Tokenizer.from_file(str(READERS / name)), polytok.load(READERS / name), text)


def test_chunks_need_tokens_that_spell_the_input():
    tokenizer = polytok.load(READERS / "hf-bpe-byte-level-nfc.json")
    with pytest.raises(ConfigError, match="chunk needs tokens that spell the input"):
        tokenizer.chunk("Cafe\u0301 and more text", 4)
    assert polytok.load(READERS / "hf-bpe-byte-level.json").chunk("Hello world", 2)


# Spaces in runs and at either end, accents composed and not, capitals, characters no training
# text holds (unknown tokens, byte fallback), CJK, an emoji, tabs and newlines, '▁' itself, and
# the special tokens' text (added tokens).
SUBWORD_ALPHABET = "abelst  \u00e9e\u0301\u00c9AB\u2603\u0416\u4e2d\u6587\U0001f600\t\n,.#\u2581"
subword_texts = st.text(alphabet=SUBWORD_ALPHABET, max_size=30) | st.text(max_size=12)
EDGE_TEXTS = ["", " ", "   ", "  lead and trail  ", "a  b   c", "\u2603\u2603 snow\u2603man \u2603",
              "\u00c9t\u00e9 na\u00efve CAF\u00c9", "\u4e2d\u6587 \U0001f600!", "\u2581x \u2581 y", "#a ##b",
              "a<unk>b <unk> [UNK]c",
              # punctuation in newer Unicode than tokenizers' tables (U+2E52), and a letter they call punctuation
              "0\u2e52 x\u166dy"]

# (model, normaliser, Metaspace's settings or None for BertPreTokenizer) of each file
BUILDS = {
    "bpe-metaspace-first": ("bpe", None, dict(prepend_scheme="first", split=True)),
    "bpe-metaspace-always-unsplit": ("bpe", None, dict(prepend_scheme="always", split=False)),
    "bpe-metaspace-never": ("bpe", None, dict(prepend_scheme="never", split=True)),
    "bpe-metaspace-fused-unk": ("bpe-fuse", None, dict(prepend_scheme="always", split=True)),
    "bpe-metaspace-byte-fallback-nfkc": ("bpe-bytes", normalizers.NFKC(), dict(prepend_scheme="first", split=True)),
    "unigram-metaspace": ("unigram", None, dict(prepend_scheme="always", split=True)),
    "unigram-metaspace-lowercase-unsplit": ("unigram", normalizers.Lowercase(), dict(prepend_scheme="first", split=False)),
    "wordpiece-bert": ("wordpiece", normalizers.BertNormalizer(lowercase=True, strip_accents=True), None),
    "wordpiece-nfkc-lowercase": ("wordpiece", normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]), None),
}
_SUBWORD: dict[str, tuple] = {}


def build(name: str, tmp_path_factory) -> tuple:
    """(tokenizers' Tokenizer, polytok's) for the file `name` of BUILDS, trained on the excerpts."""
    if name in _SUBWORD:
        return _SUBWORD[name]
    model, normalizer, metaspace = BUILDS[name]
    if model.startswith("bpe"):
        tokenizer = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=model == "bpe-fuse",
                                                    byte_fallback=model == "bpe-bytes"))
        specials = ["<unk>"] + ([f"<0x{byte:02X}>" for byte in range(256)] if model == "bpe-bytes" else [])
        trainer = trainers.BpeTrainer(vocab_size=400 + len(specials), special_tokens=specials)
    elif model == "unigram":
        tokenizer = tokenizers.Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>"], unk_token="<unk>")
    else:
        tokenizer = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
        trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"])
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    if metaspace is None:
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(**metaspace)
        tokenizer.decoder = decoders.Metaspace(**metaspace)
    # training texts without the test alphabet's rarer characters, so that they stay unknown
    texts = [text.replace("\u00e9", "e") for text in excerpts() if text.isascii() or "\u00e9" in text]
    tokenizer.train_from_iterator(texts, trainer)
    path = tmp_path_factory.mktemp("subword") / f"{name}.json"
    tokenizer.save(str(path))
    _SUBWORD[name] = (tokenizers.Tokenizer.from_file(str(path)), polytok.load(path))
    return _SUBWORD[name]


@pytest.mark.parametrize("name", sorted(BUILDS))
@SETTINGS
@given(text=subword_texts)
@example(text="\r\x1f")  # U+001F is not White_Space, though str.isspace says it is
def test_subword_offsets_agree_with_tokenizers(name, text, tmp_path_factory):
    check_against_tokenizers(*build(name, tmp_path_factory), text)


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_subword_offsets_on_edge_texts_and_excerpts(name, tmp_path_factory):
    theirs, tokenizer = build(name, tmp_path_factory)
    for text in EDGE_TEXTS + excerpts():
        check_against_tokenizers(theirs, tokenizer, text)


def test_the_files_emit_what_the_offsets_must_handle(tmp_path_factory):
    """The trained files do give unknown, byte-fallback and continuation tokens on these texts,
    so the tests above exercise them."""
    def ids(name: str, token: str) -> tuple[list[int], int]:
        theirs = build(name, tmp_path_factory)[0]
        return theirs.encode(" ".join(EDGE_TEXTS), add_special_tokens=False).ids, theirs.token_to_id(token)

    for name, token in [("bpe-metaspace-first", "<unk>"), ("bpe-metaspace-fused-unk", "<unk>"),
                        ("unigram-metaspace", "<unk>"), ("bpe-metaspace-byte-fallback-nfkc", "<0xE2>"),
                        ("wordpiece-bert", "[UNK]"), ("wordpiece-bert", "##a")]:
        found, token_id = ids(name, token)
        assert token_id in found, (name, token)


def test_wordpiece_unknown_word_spans_the_word(tmp_path_factory):
    _, tokenizer = build("wordpiece-bert", tmp_path_factory)
    text = "the \u2603snow\u2603 is"
    ids, offsets = tokenizer.encode_with_offsets(text, unit="chars", allowed_special="all")
    unknown = [tuple(span) for token_id, span in zip(ids, offsets.tolist()) if tokenizer.vocab[token_id] == b"[UNK]"]
    assert unknown == [(4, 10)]


def test_bytes_that_are_not_utf8_are_refused(tmp_path_factory):
    _, tokenizer = build("unigram-metaspace", tmp_path_factory)
    with pytest.raises(polytok.Error, match="not UTF-8"):
        tokenizer.encode_with_offsets(b"\xff abc", allowed_special="all")
