"""`to_transformers`: a PreTrainedTokenizerFast with polytok's ids and decoding and the special
tokens mapped; skipped where transformers is not installed."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError
from apply_tokenizers import tokenizers

pytest.importorskip("transformers")

DATA = Path(__file__).parents[1] / "data"
# Characters Python's Unicode tables (14.0) assign: HF's regex engine and polytok's agree on
# them (tests/peers/test_huggingface.py); on newer ones the two pre-tokenisers may differ.
ASSIGNED = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn", "Co"))
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def wrapped():
    made = tokenizers()
    return {name: (made[name], made[name].to_transformers(bos_token="<|endoftext|>")) for name in ("bpe-cl100k", "wordpiece")}


@pytest.mark.parametrize("name", ["bpe-cl100k", "wordpiece"])
@SETTINGS
@given(text=st.text(ASSIGNED, max_size=60))
def test_ids_and_decoding_are_polytoks(wrapped, name, text):
    tokenizer, fast = wrapped[name]
    ids = tokenizer.encode(text, allowed_special="all")  # HF always splits added tokens out
    assert fast.encode(text, add_special_tokens=False) == ids
    assert fast.decode(ids) == tokenizer.decode(ids)


def test_special_tokens_are_mapped(wrapped):
    tokenizer, fast = wrapped["bpe-cl100k"]
    specials = tokenizer.special_tokens
    assert fast.eos_token == "<|endoftext|>" and fast.eos_token_id == specials["<|endoftext|>"]
    assert fast.bos_token_id == specials["<|endoftext|>"]
    assert fast.pad_token == "<pad>" and fast.pad_token_id == specials["<pad>"]
    text = "one<|endoftext|>two"
    assert fast.encode(text, add_special_tokens=False) == tokenizer.encode(text, allowed_special="all")
    batch = fast(["a b c", "a"], padding=True)
    assert batch["input_ids"][1][-1] == specials["<pad>"] and batch["attention_mask"][1][-1] == 0


def test_bad_special_names_and_loaded_files():
    tokenizer = tokenizers()["bpe-cl100k"]
    with pytest.raises(ConfigError, match="bos_token '<s>' is not a special token"):
        tokenizer.to_transformers(bos_token="<s>")
    loaded = polytok.load(DATA / "readers" / "hf-bpe-byte-level.json")
    fast = loaded.to_transformers()
    for text in ("Hello world", "héllo 😀"):
        assert fast.encode(text, add_special_tokens=False) == loaded.encode(text)
    with pytest.raises(ConfigError, match="cannot be written as a HF tokenizer.json"):
        polytok.load(DATA / "readers" / "sp-unigram.model").to_transformers()
