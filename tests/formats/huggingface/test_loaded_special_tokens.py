"""A tokeniser loaded from a HF tokenizer.json keeps the native Tokenizer's special-token rules:
by default a special token's text in the input is an EncodeError, `allowed_special` lets it
through as its id ("all": exactly what `tokenizers` gives), and `disallowed_special=()` makes it
ordinary text; added tokens not marked special stay vocabulary. A SentencePiece model reads no
control piece from text. Fixtures: tests/data/readers (made with `tokenizers` and `sentencepiece`)."""
from __future__ import annotations

from pathlib import Path

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError, EncodeError

READERS = Path(__file__).resolve().parents[2] / "data" / "readers"
HF_FILES = ["hf-bpe-byte-level-nfc.json", "hf-bpe-byte-level.json", "hf-bpe-llama.json", "hf-unigram.json", "hf-wordpiece.json"]
tokenizers = pytest.importorskip("tokenizers")


def loaded(name: str):
    return polytok.load(READERS / name)


def peer_ids(name: str, text: str) -> list[int]:
    return tokenizers.Tokenizer.from_file(str(READERS / name)).encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", HF_FILES)
def test_the_policy_on_every_encode_path(name):
    tokenizer = loaded(name)
    # not the unknown token, whose id ordinary text may give too
    special, token_id = max(item for item in tokenizer.special_tokens.items() if "unk" not in item[0].lower())
    text = f"hello {special} world"
    message = re.escape(f"contains the special token {special!r}, which is disallowed")
    for call in (lambda: tokenizer.encode(text), lambda: tokenizer.encode(text, disallowed_special="all"),
                 lambda: tokenizer.encode_to_numpy(text), lambda: tokenizer.encode(text.encode("utf-8")),
                 lambda: tokenizer.encode_with_offsets(text), lambda: tokenizer.encode(text, max_tokens=2)):
        with pytest.raises(EncodeError, match=message):
            call()
    for call in (tokenizer.encode_batch, tokenizer.count_tokens):
        with pytest.raises(EncodeError, match="text 1 of the batch contains the special token"):
            call(["plain", text])
    ordinary = tokenizer.encode(text, allowed_special=set(), disallowed_special=())
    assert ordinary == tokenizer.encode_ordinary(text)
    # hf-unigram's model holds its specials as pieces, which its segmenter may choose for the
    # text (as `tokenizers` would without the added-token stage); the other files' cannot
    assert token_id not in ordinary or name == "hf-unigram.json"
    assert tokenizer.decode(ordinary) == tokenizer.decode(tokenizer.encode_ordinary(text))
    assert tokenizer.encode_batch([text], disallowed_special=()) == [ordinary]
    everything = tokenizer.encode(text, allowed_special="all")
    assert token_id in everything and everything == peer_ids(name, text)
    assert tokenizer.encode_batch([text, text], allowed_special="all") == [everything, everything]
    assert tokenizer.encode_to_numpy(text, allowed_special={special}).tolist() == everything
    assert tokenizer.count_tokens([text], allowed_special="all").tolist() == [len(everything)]
    with pytest.raises(EncodeError, match="not special tokens of this tokeniser"):
        tokenizer.encode(text, allowed_special={"<not a special token>"})


def test_a_subset_of_the_specials_is_let_through_and_the_rest_stays_text():
    tokenizer = loaded("hf-wordpiece.json")
    text = "a [SEP] b [CLS] c"
    ids = tokenizer.encode(text, allowed_special={"[SEP]"}, disallowed_special=())
    assert tokenizer.special_tokens["[SEP]"] in ids and tokenizer.special_tokens["[CLS]"] not in ids
    with pytest.raises(EncodeError, match="'\\[CLS\\]', which is disallowed"):
        tokenizer.encode(text, allowed_special={"[SEP]"})


def test_added_tokens_not_marked_special_stay_vocabulary():
    tokenizer = loaded("hf-bpe-byte-level-nfc.json")
    text = "I love New York"
    added = tokenizer.info()["added_tokens"]["New York"]
    assert "New York" not in tokenizer.special_tokens
    assert added in tokenizer.encode(text) == peer_ids("hf-bpe-byte-level-nfc.json", text)
    assert added in tokenizer.encode_ordinary(text)


def test_a_sentencepiece_model_reads_no_control_piece_from_text():
    for name in ("sp-bpe-bytes.model", "sp-unigram.model"):
        tokenizer = loaded(name)
        assert tokenizer.special_tokens == {}
        control = {tokenizer.token_id(b"<s>"), tokenizer.token_id(b"</s>")} - {None}
        assert control and not control & set(tokenizer.encode("a <s> b </s>"))


def test_arguments_a_loaded_pipeline_cannot_honour_are_refused():
    tokenizer = loaded("hf-wordpiece.json")
    for options in ({"sample": True}, {"alpha": 0.2}, {"seed": 1}, {"dropout": 0.1}):
        with pytest.raises(ConfigError, match="apply to polytok's own tokenisers"):
            tokenizer.encode("abc", **options)


SPECIALS = ["[SEP]", "[CLS]", "[MASK]", "[UNK]"]


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.one_of(st.text(max_size=12), st.sampled_from(SPECIALS)), max_size=6))
def test_spliced_special_text_is_an_error_or_no_special_id_and_all_equals_the_peer(parts):
    tokenizer = loaded("hf-wordpiece.json")
    text = "".join(parts)
    special_ids = set(tokenizer.special_tokens.values()) - {tokenizer.special_tokens["[UNK]"]}
    try:
        ids = tokenizer.encode(text)
    except EncodeError:
        assert any(special in text for special in SPECIALS)
    else:
        assert not special_ids & set(ids)
    assert not special_ids & set(tokenizer.encode(text, disallowed_special=()))
    assert tokenizer.encode(text, allowed_special="all") == peer_ids("hf-wordpiece.json", text)
