"""The HF tokenizer.json and SentencePiece readers on committed files (tests/data/readers, made
by tools/gen_reader_fixtures.py): polytok gives the ids and decoded text `tokenizers` and
`sentencepiece` gave, without those libraries, through every encoding method of the loaded
tokeniser; what only native tokenisers offer is refused; metrics and compare take it."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import polytok
from polytok.errors import ConfigError, DecodeError, EncodeError
from polytok.formats.loaded import LoadedTokenizer

READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
EXPECTED = json.loads((READERS / "expected.json").read_text(encoding="utf-8"))["files"]

# file -> (the core segmenter polytok runs behind the file's pipeline, the pipeline's components)
SHAPES = {
    "hf-bpe-byte-level.json": ("merges", {"model": "BPE", "normalizer": None, "pre_tokenizer": "ByteLevel", "decoder": "ByteLevel"}),
    "hf-bpe-byte-level-nfc.json": ("char_merges", {"model": "BPE", "normalizer": "NFC", "pre_tokenizer": "ByteLevel",
                                                   "decoder": "ByteLevel"}),
    "hf-bpe-llama.json": ("char_merges", {"model": "BPE", "normalizer": ["Prepend", "Replace"], "pre_tokenizer": None,
                                          "decoder": ["Replace", "ByteFallback", "Fuse", "Strip"]}),
    "hf-wordpiece.json": ("char_longest_match", {"model": "WordPiece", "normalizer": "BertNormalizer",
                                                 "pre_tokenizer": "BertPreTokenizer", "decoder": "WordPiece"}),
    "hf-unigram.json": ("char_viterbi", {"model": "Unigram", "normalizer": "Precompiled", "pre_tokenizer": "Metaspace",
                                         "decoder": "Metaspace"}),
    "sp-unigram.model": ("char_viterbi", {"model": "unigram", "normalizer": "user_defined", "add_dummy_prefix": True,
                                          "remove_extra_whitespaces": True, "escape_whitespaces": True, "byte_fallback": False}),
    "sp-bpe-bytes.model": ("char_merges", {"model": "bpe", "normalizer": "identity", "add_dummy_prefix": True,
                                           "remove_extra_whitespaces": True, "escape_whitespaces": True, "byte_fallback": True}),
}


@pytest.fixture(scope="module")
def loaded() -> dict[str, LoadedTokenizer]:
    return {name: polytok.load(READERS / name) for name in EXPECTED}


def test_every_fixture_has_a_shape():
    assert sorted(EXPECTED) == sorted(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_ids_and_text_equal_the_peer_library(loaded, name):
    tokenizer = loaded[name]
    for case in EXPECTED[name]:
        assert tokenizer.encode(case["text"], allowed_special="all") == case["ids"], case["text"]
        assert tokenizer.decode(case["ids"]) == case["decoded"], case["text"]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_encoding_method_follows_the_pipeline(loaded, name):
    tokenizer = loaded[name]
    texts = [case["text"] for case in EXPECTED[name]]
    expected = [case["ids"] for case in EXPECTED[name]]
    assert tokenizer.encode_batch(texts, num_threads=2, allowed_special="all") == expected
    assert tokenizer.encode_batch(texts, num_threads=1, allowed_special="all") == expected
    assert [tokenizer.encode_to_numpy(text, allowed_special="all").tolist() for text in texts] == expected
    assert tokenizer.encode(texts[0].encode("utf-8"), allowed_special="all") == expected[0]
    assert tokenizer.count_tokens(texts, allowed_special="all").tolist() == [len(ids) for ids in expected]
    flat, offsets = tokenizer.encode_batch_to_numpy(texts, allowed_special="all")
    assert flat.dtype == np.uint32 and offsets.dtype == np.int64
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    ordinary = tokenizer.encode_ordinary_batch(texts)
    assert ordinary == [tokenizer.encode_ordinary(text) for text in texts]
    histogram = tokenizer.token_histogram(texts, num_threads=2)
    assert histogram.tolist() == np.bincount([i for ids in ordinary for i in ids], minlength=tokenizer.vocab_size).tolist()
    assert tokenizer.decode(np.array(expected[0])) == EXPECTED[name][0]["decoded"]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_batch_methods_refuse_one_text(loaded, name):
    tokenizer = loaded[name]
    for call in (tokenizer.encode_batch, tokenizer.encode_ordinary_batch, tokenizer.count_tokens,
                 tokenizer.token_histogram, tokenizer.encode_batch_to_numpy):
        with pytest.raises(EncodeError, match="takes a list of texts, got one str"):
            call("hello world")
    assert tokenizer.count_tokens(["hello world"], allowed_special="all").tolist() == [len(tokenizer.encode("hello world", allowed_special="all"))]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_info_describes_the_file(loaded, name):
    tokenizer = loaded[name]
    segmenter, components = SHAPES[name]
    info = tokenizer.info()
    assert isinstance(tokenizer, LoadedTokenizer) and tokenizer.segmenter == info["segmenter"] == segmenter
    assert info["loaded_from"] == ("HF tokenizer.json" if name.startswith("hf-") else "SentencePiece model")
    assert info["pipeline"] == components
    assert info["vocab_size"] == tokenizer.vocab_size == tokenizer.n_vocab == len(tokenizer.vocab)
    # the added tokens marked special are the special tokens (a SentencePiece model has none)
    expected = {token["content"]: token["id"] for token in tokenizer.pipeline.added if token.get("special")}
    assert tokenizer.special_tokens == expected and (name.startswith("sp-") or expected)
    for token_id in (0, tokenizer.vocab_size - 1):
        assert tokenizer.token_bytes(token_id) == tokenizer.vocab[token_id]
        assert tokenizer.token_id(tokenizer.vocab[token_id]) <= token_id


def test_byte_level_bpe_runs_polytoks_pre_tokeniser_and_merges(loaded):
    tokenizer = loaded["hf-bpe-byte-level.json"]
    assert tokenizer.pattern is not None and tokenizer.merges and tokenizer.info()["lossy"] == []
    assert tokenizer.info()["added_tokens"] == {"<|endoftext|>": 0}
    # the added token is always recognised, as in `tokenizers`; encode_ordinary leaves it to BPE
    assert tokenizer.encode("<|endoftext|>", allowed_special="all") == [0] != tokenizer.encode_ordinary("<|endoftext|>")


def test_lossy_pipelines_say_where(loaded):
    assert any("[UNK]" in line for line in loaded["hf-wordpiece.json"].info()["lossy"])
    assert any("outside the vocabulary" in line for line in loaded["sp-unigram.model"].info()["lossy"])
    assert not any("outside the vocabulary" in line for line in loaded["sp-bpe-bytes.model"].info()["lossy"])
    assert loaded["hf-wordpiece.json"].continuation_marker == "##"


def test_what_only_native_tokenisers_offer_is_refused(loaded, tmp_path):
    hf, sp = loaded["hf-bpe-llama.json"], loaded["sp-unigram.model"]
    for tokenizer in (hf, sp):
        for options in ({"sample": True}, {"dropout": 0.1}, {"alpha": 0.5}, {"seed": 3}):
            with pytest.raises(ConfigError, match="sample, alpha, dropout and seed apply to polytok's own"):
                tokenizer.encode("x", **options)
            with pytest.raises(ConfigError, match="sample, alpha, dropout and seed apply to polytok's own"):
                tokenizer.encode_batch(["x"], **options)
        with pytest.raises(ConfigError, match="encode_nbest"):
            tokenizer.encode_nbest("x", 2)
        with pytest.raises(ConfigError, match=tokenizer.info()["loaded_from"]):
            tokenizer.save(tmp_path / "polytok.json")
        with pytest.raises(ConfigError, match="keep the original file"):
            tokenizer.save_tiktoken(tmp_path / "ranks.tiktoken")
        with pytest.raises(ConfigError, match="keep the original file"):
            pickle.dumps(tokenizer)
        with pytest.raises(DecodeError, match="is not a token"):
            tokenizer.decode([tokenizer.vocab_size + 5])
        with pytest.raises(EncodeError, match="not UTF-8"):
            tokenizer.encode(b"\xff\xfe", allowed_special="all")
    with pytest.raises(ConfigError, match="cannot be written as a HF tokenizer.json"):
        sp.save_huggingface(tmp_path / "tokenizer.json")
    assert not list(tmp_path.iterdir())


def test_a_loaded_hf_file_is_written_back_as_read(loaded, tmp_path):
    name = "hf-bpe-byte-level-nfc.json"
    loaded[name].save_huggingface(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8")) == json.loads((READERS / name).read_text(encoding="utf-8"))
    again = polytok.load(tmp_path / "again.json")
    assert [again.encode(case["text"], allowed_special="all") for case in EXPECTED[name]] == [case["ids"] for case in EXPECTED[name]]


def test_metrics_and_compare_take_loaded_tokenisers(loaded, tmp_path):
    texts = [case["text"] for case in EXPECTED["hf-wordpiece.json"] if case["text"].strip()]
    tokenizers = {name: loaded[name] for name in ("hf-wordpiece.json", "sp-unigram.model")}
    result = polytok.compare(tokenizers, {"a": texts[0], "b": texts[1]})
    for row in result["rows"]:
        text = {"a": texts[0], "b": texts[1]}[row["text"]]
        assert row["tokens"] == len(tokenizers[row["tokenizer"]].encode_ordinary(text))
    document = " ".join(" ".join(texts).split())  # one line, one document
    (tmp_path / "corpus.txt").write_text(document, encoding="utf-8")
    metrics = polytok.evaluate(loaded["sp-bpe-bytes.model"], [tmp_path / "corpus.txt"], progress=False)
    assert metrics["tokens"] == len(loaded["sp-bpe-bytes.model"].encode(document))
