"""Reading SentencePiece .model files: models trained here with `sentencepiece` (unigram and BPE,
byte fallback on and off, the nmt_nfkc and identity normalisers, user-defined pieces, the
whitespace options) load in polytok without the sentencepiece package and give the ids and the
decoded text `SentencePieceProcessor` gives; corrupt and unsupported files raise FormatError."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from excerpts import train_and_held_out_lines
from polytok.errors import EncodeError, FormatError
from polytok.formats.sentencepiece import parse_message, read_model

spm = pytest.importorskip("sentencepiece")



TRAIN, HELD_OUT = train_and_held_out_lines()

# name -> trainer options
MODELS = {
    "unigram-nfkc": dict(model_type="unigram", vocab_size=800),
    "unigram-identity-bytes": dict(model_type="unigram", vocab_size=1000, byte_fallback=True, normalization_rule_name="identity"),
    "unigram-user-defined": dict(model_type="unigram", vocab_size=700, user_defined_symbols=["<sep>", "foo"],
                                 add_dummy_prefix=False, remove_extra_whitespaces=False),
    "bpe-nfkc-bytes": dict(model_type="bpe", vocab_size=1000, byte_fallback=True),
    "bpe-identity": dict(model_type="bpe", vocab_size=600, normalization_rule_name="identity", character_coverage=0.98),
    "bpe-user-defined": dict(model_type="bpe", vocab_size=700, user_defined_symbols=["<sep>", "foo"], byte_fallback=True,
                             remove_extra_whitespaces=False, normalization_rule_name="nfkc_cf"),
}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, tuple[object, polytok.Tokenizer, Path]]:
    """name -> (SentencePieceProcessor, polytok's tokeniser, the model file)."""
    tmp = tmp_path_factory.mktemp("spm")
    corpus = tmp / "train.txt"
    corpus.write_text("\n".join(TRAIN), encoding="utf-8")
    out = {}
    for name, options in MODELS.items():
        options = {"character_coverage": 0.995, **options}
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp / name), minloglevel=2, num_threads=1, **options)
        path = tmp / f"{name}.model"
        out[name] = (spm.SentencePieceProcessor(model_file=str(path)), polytok.load(path), path)
    return out


HOSTILE = [
    "", " ", "   ", "\n", "Hello  world!! x", "  leading and trailing  ", "ＡＢＣ① ﬁ ㍿", "e\u0301 é", "中文字符 和 日本語",
    "🙂🙂 👩‍👩‍👧", "<sep>a<sep> b foo", "foofoo", "<s> </s> <unk>", "▁▁ ▁x", "\t\ttab\u3000ideographic", "\x00\x01\x7f",
    "x" * 300, "1234567890", "İstanbul ΑΣ", "\u200b\u00ad soft", "a\u0000b", "▁", "a▁", "a ▁ ",
]


@pytest.mark.parametrize("name", list(MODELS))
def test_ids_and_text_equal_sentencepiece(pairs, name):
    processor, ours, _ = pairs[name]
    for text in HELD_OUT[::2] + HOSTILE + ["\n".join(HELD_OUT[:100])]:
        expected = processor.encode(text)
        assert ours.encode(text) == expected, text
        assert ours.decode(expected) == processor.decode(expected), text


ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(max_examples=200, deadline=None)
@given(text=st.text(ALPHABET, max_size=40) | st.lists(st.sampled_from(HOSTILE[:16] + ["the", " of", "."]), max_size=6).map("".join),
       name=st.sampled_from(list(MODELS)))
def test_ids_and_text_equal_sentencepiece_on_arbitrary_text(pairs, text, name):
    processor, ours, _ = pairs[name]
    expected = processor.encode(text)
    assert ours.encode(text) == expected
    assert ours.decode(expected) == processor.decode(expected)


# Text the core's shortcuts meet: ASCII copied without a charsmap walk unless a combining mark
# follows it, marks that compose with the letter before them, runs of spaces, words longer than
# the short-word merge (32 symbols) and "▁" itself, which BPE words are cut before.
SHORTCUT_TEXT = st.lists(st.sampled_from(["a", "e", "t", "he", "the", " ", "  ", "\u0301", "\u0308", "\u0327", "é", "ﬁ", "①",
                                          "▁", "中", "\n", "\t", "Ａ", "foo", "<sep>", "x" * 40, "ab" * 20]), max_size=50).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=SHORTCUT_TEXT, name=st.sampled_from(list(MODELS)))
def test_ids_equal_sentencepiece_where_the_core_takes_shortcuts(pairs, text, name):
    processor, ours, _ = pairs[name]
    assert ours.encode(text) == processor.encode(text)


# Batches mix str and UTF-8 bytes, empty texts, user-defined pieces and lone surrogates (which
# no peer accepts: those texts are compared with polytok's own encode only).
BATCH = st.lists(
    st.text(st.characters(codec="utf-8"), max_size=30) | SHORTCUT_TEXT | st.sampled_from(HOSTILE + ["\ud800x\udfff"]),
    max_size=8,
)


def _as_given(texts: list[str]) -> list[str | bytes]:
    """Every other text as UTF-8 bytes, where it has no surrogates."""
    return [text.encode("utf-8") if index % 2 and not _has_surrogates(text) else text for index, text in enumerate(texts)]


def _has_surrogates(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


@settings(max_examples=150, deadline=None)
@given(texts=BATCH, name=st.sampled_from(list(MODELS)))
def test_encode_batch_equals_encode_and_sentencepiece_whatever_the_threads(pairs, texts, name):
    processor, ours, _ = pairs[name]
    given_texts = _as_given(texts)
    expected = [ours.encode(text) for text in given_texts]
    for threads in (1, 2, None):
        assert ours.encode_batch(given_texts, num_threads=threads) == expected
    peer_texts = [index for index, text in enumerate(texts) if not _has_surrogates(text)]
    assert [expected[index] for index in peer_texts] == processor.encode([texts[index] for index in peer_texts])


@pytest.mark.parametrize("name", ["unigram-user-defined", "bpe-nfkc-bytes"])
def test_encode_batch_of_many_documents_equals_sentencepiece_batch(pairs, name):
    processor, ours, _ = pairs[name]
    documents = ["\n".join(HELD_OUT[start : start + 20]) for start in range(0, len(HELD_OUT), 20)] + HOSTILE
    expected = processor.encode(documents, num_threads=2)
    assert ours.encode_batch(documents, num_threads=2) == expected
    assert ours.encode_batch(documents, num_threads=1) == expected


def test_encode_batch_refuses_bytes_that_are_not_utf8(pairs):
    _, ours, _ = pairs["bpe-nfkc-bytes"]
    with pytest.raises(EncodeError, match="not UTF-8"):
        ours.encode_batch(["fine", b"\xff\xfe"], num_threads=2)


def test_model_fields_are_read(pairs):
    processor, ours, path = pairs["bpe-user-defined"]
    spec = read_model(path.read_bytes(), "model")
    assert spec["model_type"] == 2 and spec["byte_fallback"] and not spec["remove_extra_whitespaces"]
    assert spec["add_dummy_prefix"] and spec["escape_whitespaces"] and spec["normalizer_name"] == "nfkc_cf"
    assert [piece for piece, _, _ in spec["pieces"]] == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    assert [score for _, score, _ in spec["pieces"]] == pytest.approx([processor.get_score(i) for i in range(processor.get_piece_size())])
    info = ours.info()
    assert info["loaded_from"] == "SentencePiece model" and info["algorithm"] == "bpe"
    assert any("nfkc_cf" in line for line in info["lossy"])
    _, identity, _ = pairs["unigram-identity-bytes"]
    assert all("outside the vocabulary" not in line for line in identity.info()["lossy"])  # byte fallback loses nothing


def test_truncated_and_corrupt_models_raise_format_error(pairs, tmp_path):
    _, _, path = pairs["unigram-nfkc"]
    data = path.read_bytes()
    broken = tmp_path / "broken.model"
    for damaged in [data[: len(data) // 2], data[:3], b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0a\x05\x0f\x00"]:
        broken.write_bytes(damaged)
        with pytest.raises(FormatError):
            polytok.load(broken)
    with pytest.raises(FormatError, match="protobuf"):
        parse_message(b"\x0b", "x")


def test_unsupported_model_type_is_named(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(TRAIN[:300]), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "word"), vocab_size=300, model_type="word", minloglevel=2)
    with pytest.raises(FormatError, match="'word'"):
        polytok.load_sentencepiece(tmp_path / "word.model")


@pytest.mark.parametrize("name", ["unigram-nfkc", "bpe-user-defined"])
def test_counts_and_histograms_of_a_loaded_model_follow_its_pipeline(pairs, name):
    """count_tokens, encode_ordinary_batch, token_histogram (and so `evaluate`) go through the
    file's normaliser like encode: the core alone would count un-normalised text."""
    import numpy as np

    processor, ours, _ = pairs[name]
    texts = HOSTILE + HELD_OUT[:50]
    expected = [processor.encode(text) for text in texts]
    assert ours.encode_ordinary_batch(texts, num_threads=2) == expected
    assert ours.count_tokens(texts, num_threads=2).tolist() == [len(ids) for ids in expected]
    histogram = ours.token_histogram(texts, num_threads=2)
    assert histogram.tolist() == np.bincount([i for ids in expected for i in ids], minlength=ours.vocab_size).tolist()
    assert polytok.evaluate(ours, polytok.texts(texts), progress=False)["tokens"] == sum(map(len, expected))
