"""Offsets of loaded SentencePiece `.model` files equal the `sentencepiece` library's own spans
(`encode(text, return_type="proto")`: each piece's begin and end in the original UTF-8 bytes),
through its normaliser (precompiled NFKC charsmap, the dummy prefix, extra whitespace removed,
'▁' for spaces, and each of them off) for Unigram and BPE, with and without byte fallback: the
fixtures of tests/data/readers, models trained here on the test excerpts, and a model polytok
writes (identity normaliser). Ids stay those of `encode`."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.apply.offsets import character_starts

spm = pytest.importorskip("sentencepiece")  # a test dependency: the reference for the spans

DATA = Path(__file__).resolve().parents[2] / "data"
READERS = DATA / "readers"
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Spaces in runs and at either end, tabs and newlines, composed and decomposed accents, NFKC's
# full-width letters, ideographic space, circled digits and ligatures, characters no model knows
# (unknown pieces, byte fallback), CJK, an emoji, and '▁' itself.
ALPHABET = "abelst  \u00e9e\u0301\u00c9AB\u2603\u0416\u4e2d\u6587\U0001f600\t\n,.#\u2581\ufb01\ufb03\uff21\uff42\u3000\u2460\u337f"
texts = st.text(alphabet=ALPHABET, max_size=30) | st.text(max_size=12)
EDGE_TEXTS = ["", " ", "   ", "\t \n", "  lead and trail  ", "a  b   c", "\u2603\u2603 snow\u2603man \u2603", "\u00c9t\u00e9 na\u00efve CAF\u00c9",
              "\u4e2d\u6587 \U0001f600!", "\u2581x \u2581 y", "\ufb01ne \ufb03 \uff21\uff22\u3000\uff43", "\u2460\u2461 \u337f", "e\u0301 \u00e9",
              "<unk> <s></s>"]

# name -> the trainer's options (Unigram and BPE, with and without byte fallback, and the
# normaliser's options off)
TRAINED = {
    "unigram-nfkc": dict(model_type="unigram"),
    "unigram-nfkc-bytes": dict(model_type="unigram", byte_fallback=True),
    "bpe-nfkc": dict(model_type="bpe"),
    "bpe-nfkc-bytes": dict(model_type="bpe", byte_fallback=True),
    "unigram-no-prefix-keep-spaces": dict(model_type="unigram", add_dummy_prefix=False, remove_extra_whitespaces=False),
    "bpe-nfkc-cf-keep-spaces-bytes": dict(model_type="bpe", byte_fallback=True, remove_extra_whitespaces=False,
                                          normalization_rule_name="nfkc_cf"),
}
FIXTURES = ["sp-unigram.model", "sp-bpe-bytes.model"]


def _excerpts() -> list[str]:
    return [line for path in sorted(DATA.glob("*.txt")) for line in path.read_text(encoding="utf-8").splitlines()[:60] if line.strip()]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, tuple[polytok.LoadedTokenizer, object]]:
    """name -> (polytok's tokeniser of the model, sentencepiece's processor of it)."""
    folder = tmp_path_factory.mktemp("sp-offsets")
    paths = {name: READERS / name for name in FIXTURES}
    lines = _excerpts()
    for name, options in TRAINED.items():
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, vocab_size=400, character_coverage=0.98,
                                       minloglevel=2, **options)
        paths[name] = folder / f"{name}.model"
        paths[name].write_bytes(out.getvalue())
    # characters of one and two bytes only, so that byte-level BPE learns whole characters (see
    # test_sentencepiece_export.py)
    short = ["".join(char for char in line if ord(char) < 0x800) for line in lines[::4]]
    written = polytok.train(polytok.texts(short), algorithm="bpe", vocab_size=300, pattern=None, progress=False)
    paths["polytok-bpe-identity"] = folder / "polytok-bpe.model"
    written.save_sentencepiece(paths["polytok-bpe-identity"])
    return {name: (polytok.load(path), spm.SentencePieceProcessor(model_file=str(path))) for name, path in paths.items()}


NAMES = FIXTURES + sorted(TRAINED) + ["polytok-bpe-identity"]


def _check(models, name: str, text: str) -> None:
    tokenizer, processor = models[name]
    pieces = processor.encode(text, return_type="proto").pieces
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert ids == [piece.id for piece in pieces] == tokenizer.encode(text), text
    assert offsets.dtype == np.int64 and offsets.shape == (len(ids), 2)
    assert offsets.tolist() == [[piece.begin, piece.end] for piece in pieces], text
    data = text.encode("utf-8")
    assert [data[start:end].decode("utf-8") for start, end in offsets.tolist()] == [piece.surface for piece in pieces], text
    chars_ids, chars = tokenizer.encode_with_offsets(text, unit="chars")
    assert chars_ids == ids
    assert np.array_equal(chars, character_starts(data)[offsets])
    if len(offsets):
        assert (np.diff(offsets[:, 0]) >= 0).all() and (offsets[:, 0] <= offsets[:, 1]).all() and offsets[-1, 1] <= len(data)


@pytest.mark.parametrize("name", NAMES)
def test_offsets_equal_sentencepiece_spans_on_edge_texts(models, name):
    for text in EDGE_TEXTS:
        _check(models, name, text)


@pytest.mark.parametrize("name", NAMES)
def test_offsets_equal_sentencepiece_spans_on_the_excerpts(models, name):
    lines = _excerpts()
    for text in lines[::7] + ["\n".join(lines[:40])]:
        _check(models, name, text)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=texts)
def test_offsets_equal_sentencepiece_spans_on_any_text(models, name, text):
    _check(models, name, text)


def test_byte_fallback_pieces_of_a_character_end_on_its_last_byte(models):
    """An unknown character spelled in bytes: its pieces but the last are empty spans at its
    start; the last covers the whole character."""
    tokenizer, _ = models["sp-bpe-bytes.model"]
    ids, offsets = tokenizer.encode_with_offsets("x\u2603")
    assert [tokenizer.vocab[token_id] for token_id in ids[-3:]] == list(map(bytes, ([0xE2], [0x98], [0x83])))
    assert offsets[-3:].tolist() == [[1, 1], [1, 1], [1, 4]]
    assert tokenizer.encode_with_offsets("x\u2603", unit="chars")[1][-3:].tolist() == [[1, 1], [1, 1], [1, 2]]


def test_spaces_the_normaliser_removes_belong_to_the_space_piece_after_them(models):
    tokenizer, _ = models["sp-unigram.model"]
    text = "  H\u00e9llo   w\u00f6rld  "
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert [tokenizer.vocab[token_id].decode() for token_id in ids] == ["\u2581", "H", "\u00e9", "l", "l", "o", "\u2581w", "\u00f6", "r", "l", "d"]
    assert offsets[0].tolist() == [2, 2]  # the dummy prefix stands for nothing of the input
    assert offsets[6].tolist() == [8, 12]  # "   w": the space piece keeps the run the normaliser made one space
    assert offsets[-1].tolist() == [16, 17]  # the trailing spaces belong to no piece
