"""Token healing against a brute-force reference: the healed prefix is what `encode(t + c)`
starts with for every continuation c, it is the longest prefix a brute-force search over many
continuations finds stable, and the token the tokeniser puts after it is one of the allowed
ones. `tokens_starting_with` equals a scan of the vocabulary."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import DecodeError, EncodeError
from polytok.apply.healing import PROBES, _healer
from polytok.pretokenize import PRESETS
from polytok.pretokenize import PreTokenizer
from apply_tokenizers import ALPHABET, NAMES, PATTERNED, alphabet_text, tokenizers

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
DATA_TEXT = "".join(path.read_text(encoding="utf-8")[:6000] for path in sorted((Path(__file__).resolve().parents[1] / "data").glob("*.txt")))
# Continuations for the brute force: every probe, every character of the alphabet and every
# pair of them, and words the tokenisers know.
CONTINUATIONS = sorted(
    {probe.decode() for probe in PROBES}
    | set(ALPHABET)
    | {a + b for a, b in itertools.product(ALPHABET, repeat=2)}
    | {"the", "hat", " the", "s the", "'s", "12345", "é中", "😀😀", "\n\n", "   x"}
)


def reference_prefix(tokenizer, text: str) -> list[int]:
    """The encoding of the pre-tokens of `text` that no continuation in CONTINUATIONS changes,
    up to the last pre-token start they all keep (at least one token removed)."""
    splitter = PreTokenizer(tokenizer.pattern)
    pieces = splitter.split(text)
    keep = len(pieces) - 1  # the last pre-token always goes
    for continuation in CONTINUATIONS:
        extended = splitter.split(text + continuation)
        same = 0
        while same < keep and same < len(extended) and extended[same] == pieces[same]:
            same += 1
        keep = same
    kept_bytes = len(b"".join(pieces[:keep]))
    ids = tokenizer.encode(text)
    ends = np.cumsum([len(tokenizer.token_bytes(i)) for i in ids])
    return ids[: int(np.searchsorted(ends, kept_bytes, side="right"))]


# Short random strings, and excerpts of some 40 to 100 tokens with a random end (past the few
# tokens heal decodes first under the presets).
prompt_text = alphabet_text.filter(bool) | st.builds(
    lambda start, end: DATA_TEXT[start : start + 250] + end, st.integers(0, len(DATA_TEXT) - 250), alphabet_text
)


@pytest.mark.parametrize("name", PATTERNED)
@SETTINGS
@given(text=prompt_text, extra=st.lists(alphabet_text, max_size=4))
def test_healed_prefix_is_stable_and_minimal(name, text, extra):
    tokenizer = tokenizers()[name]
    ids = tokenizer.encode(text)
    prefix, removed = tokenizer.heal(ids)
    data = text.encode()
    assert tokenizer.decode_bytes(prefix) + removed == data and removed
    assert prefix == ids[: len(prefix)]
    allowed = set(tokenizer.tokens_starting_with(removed, or_prefixes=True).tolist())
    for continuation in [*CONTINUATIONS, *extra]:
        full = tokenizer.encode(text + continuation)
        assert full[: len(prefix)] == prefix, continuation
        # generation restarts at the cut: the prefix and an encoding of the rest give t + c
        assert tokenizer.decode(prefix + tokenizer.encode(removed + continuation.encode())) == text + continuation
        if len(full) > len(prefix):
            assert full[len(prefix)] in allowed, continuation
    assert prefix == reference_prefix(tokenizer, text)


def test_the_lone_space_of_the_article():
    tokenizer = tokenizers()["bpe-cl100k"]
    prompt = tokenizer.encode("El niño juega en el ")
    prefix, removed = tokenizer.heal(prompt)
    assert removed == b" " and prefix == tokenizer.encode("El niño juega en el")
    allowed = tokenizer.tokens_starting_with(removed)
    assert tokenizer.encode(" the")[0] in allowed.tolist() and tokenizer.token_id(b"a") not in allowed.tolist()


def test_heal_backs_up_over_several_tokens():
    tokenizer = tokenizers()["bpe-cl100k"]
    # a word the vocabulary cuts in several tokens: every one of them can change
    word = " Verschlüsselungsverfahr"
    ids = tokenizer.encode("Das" + word)
    prefix, removed = tokenizer.heal(ids)
    assert removed == word.encode() and len(ids) - len(prefix) > 1
    # o200k glues a contraction to its word: "Ab'" + "s" is one pre-token, so both go
    o200k = tokenizers()["bpe-o200k"]
    prefix, removed = o200k.heal(o200k.encode("See Ab'"))
    assert removed == b" Ab'"


@SETTINGS
@given(text=alphabet_text.filter(bool))
def test_without_a_pattern_heal_backs_up_while_a_token_starts_with_the_removed_bytes(text):
    tokenizer = tokenizers()["bpe-none"]
    ids = tokenizer.encode(text)
    prefix, removed = tokenizer.heal(ids)
    assert tokenizer.decode_bytes(prefix) + removed == text.encode() and prefix == ids[: len(prefix)]
    assert len(tokenizer.tokens_starting_with(removed)) > 0
    if prefix:
        longer = tokenizer.token_bytes(prefix[-1]) + removed
        assert not any(tokenizer.token_bytes(i).startswith(longer) for i in range(len(tokenizer.vocab)))


def test_heal_stops_at_special_tokens():
    tokenizer = tokenizers()["bpe-cl100k"]
    ids = tokenizer.encode("hello<|endoftext|>", allowed_special="all")
    assert tokenizer.heal(ids) == (ids, b"")
    ids = tokenizer.encode("hello<|endoftext|> th", allowed_special="all")
    prefix, removed = tokenizer.heal(ids)
    assert prefix == tokenizer.encode("hello<|endoftext|>", allowed_special="all") and removed == b" th"


def test_heal_takes_ids_as_given():
    tokenizer = tokenizers()["bpe-cl100k"]
    bytes_only = [tokenizer.token_id(bytes([byte])) for byte in b"the cat"]  # not the canonical encoding
    prefix, removed = tokenizer.heal(np.array(bytes_only))
    assert removed == b" cat" and prefix == bytes_only[:3]


def test_heal_errors():
    tokenizer = tokenizers()["bpe-cl100k"]
    assert tokenizer.heal([]) == ([], b"") == tokenizer.heal(np.array([], dtype=np.uint32))  # nothing to heal
    with pytest.raises(DecodeError, match="id 100000000 at position 1 is not a token"):
        tokenizer.heal([5, 10**8])
    with pytest.raises(DecodeError, match="is not an integer id"):
        tokenizer.heal([5, "x"])
    with pytest.raises(EncodeError, match="takes bytes or str"):
        tokenizer.tokens_starting_with(5)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(prefix=st.binary(max_size=3) | alphabet_text.map(lambda t: t[:3].encode()))
def test_tokens_starting_with_equals_a_scan(name, prefix):
    tokenizer = tokenizers()[name]
    texts = [tokenizer.token_bytes(i) for i in range(len(tokenizer.vocab))]
    expected = [i for i, text in enumerate(texts) if text.startswith(prefix)]
    found = tokenizer.tokens_starting_with(prefix)
    assert sorted(found.tolist()) == expected and not found.flags.writeable
    assert [texts[i] for i in found] == sorted(texts[i] for i in expected)  # in the order of their bytes
    with_prefixes = sorted(set(expected) | {i for i, text in enumerate(texts) if len(text) < len(prefix) and prefix.startswith(text)})
    assert sorted(tokenizer.tokens_starting_with(prefix, or_prefixes=True).tolist()) == with_prefixes


@pytest.mark.parametrize("name", ["hf-bpe-byte-level.json", "hf-unigram.json", "sp-bpe-bytes.model"])
def test_loaded_tokenisers_heal_by_token_prefixes(name):
    tokenizer = polytok.load(READERS / name)
    for text in ("The quick brown fox jum", "Hello world ", "a"):
        ids = tokenizer.encode(text)
        prefix, removed = tokenizer.heal(ids)
        assert tokenizer.decode_bytes(prefix) + removed == tokenizer.decode_bytes(ids)
        assert prefix == ids[: len(prefix)] and len(tokenizer.tokens_starting_with(removed)) > 0


WORDY = st.text(alphabet="ab A1 \n\r.'\t,é中-/s", min_size=1, max_size=200)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@settings(max_examples=200, deadline=None)
@given(text=WORDY)
def test_a_space_or_line_end_before_a_letter_starts_a_pre_token(preset, text):
    """What heal relies on to pre-tokenise only a long prompt's end: a space before an ASCII
    letter starts a pre-token, and so does a letter after a line end."""
    data = text.encode()
    starts = set(np.cumsum([0, *PreTokenizer(preset).piece_lengths(data)]).tolist())
    for at in range(len(data) - 1):
        if data[at + 1 : at + 2].isalpha():
            if data[at : at + 1] == b" ":
                assert at in starts
            if data[at : at + 1] == b"\n":
                assert at + 1 in starts


@pytest.mark.parametrize("name", ["bpe-cl100k", "bpe-o200k", "wordpiece"])
@SETTINGS
@given(start=st.integers(0, 20000), end=alphabet_text)
def test_long_prompts_heal_as_with_the_whole_text_pre_tokenised(name, start, end):
    tokenizer = tokenizers()[name]
    text = (DATA_TEXT[start : start + 3000] + end) or "x"
    ids = tokenizer.encode(text)
    prefix, removed = tokenizer.heal(ids)
    data = text.encode()
    cut = _healer(tokenizer).stable_start(data)
    ends = np.cumsum([len(tokenizer.token_bytes(i)) for i in ids])
    assert prefix == ids[: int(np.searchsorted(ends, cut, side="right"))]
    assert tokenizer.decode_bytes(prefix) + removed == data
