"""The pre-token cache and the output paths: ids never depend on the cache (on, off, tiny so it
is emptied all the time), on the thread count or on the output form (list, numpy, batch, flat
batch), for every segmenter."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polytok.errors import ConfigError, EncodeError
from polytok.segmenters import DEFAULT_CACHE_SIZE
from polytok.tokenizer import Tokenizer

from conftest import SPECIAL_TOKENS

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
PIECES = ["a", "the", " the", "The", " ", "  ", "\n", "\r\n", "'s", "12345", ".", "é", "中文", "🙂", "\t", "ab" * 20,
          "Verschlüsselungsverfahren", "x" * 70, *SPECIAL_TOKENS]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join) | st.text(max_size=80)
SEGMENTERS = ["merges", "merges-ranks", "longest_match", "longest_match-marker", "viterbi", "shortest_path"]


def build(kind: str, vocab: list[bytes], merges, cache_size: int) -> Tokenizer:
    """A tokeniser of segmenter `kind` over the tokens of a trained BPE vocabulary."""
    specials = {text: len(vocab) + 100 + offset for text, offset in SPECIAL_TOKENS.items()}
    common = dict(pattern="cl100k", special_tokens=specials, cache_size=cache_size)
    if kind == "merges":
        return Tokenizer(vocab, segmenter="merges", merges=merges, **common)
    if kind == "merges-ranks":
        return Tokenizer(vocab, segmenter="merges", **common)
    if kind == "longest_match":
        return Tokenizer(vocab, segmenter="longest_match", **common)
    if kind == "longest_match-marker":
        marked = vocab + [b"##" + token for token in vocab]
        specials = {text: len(marked) + offset for text, offset in SPECIAL_TOKENS.items()}
        return Tokenizer(marked, segmenter="longest_match", continuation_marker="##",
                         **{**common, "special_tokens": specials})
    if kind == "viterbi":
        scores = [-8.0 + 0.5 * len(token) - 0.001 * token_id for token_id, token in enumerate(vocab)]
        return Tokenizer(vocab, segmenter="viterbi", scores=scores, **common)
    return Tokenizer(vocab, segmenter="shortest_path", **common)


@pytest.fixture(scope="module")
def variants(trained_tokenizers) -> dict[str, dict[int, Tokenizer]]:
    """kind -> cache size -> tokeniser: the default cache, none, and one of two pieces."""
    base = trained_tokenizers["hf-cl100k"]
    return {kind: {size: build(kind, base.vocab, base.merges, size) for size in (DEFAULT_CACHE_SIZE, 0, 2)}
            for kind in SEGMENTERS}


@SETTINGS
@given(text=texts, kind=st.sampled_from(SEGMENTERS))
def test_cache_never_changes_ids(variants, text, kind):
    cached, uncached, tiny = (variants[kind][size] for size in (DEFAULT_CACHE_SIZE, 0, 2))
    expected = uncached.encode_ordinary(text)
    for _ in range(2):  # the second round answers from the cache
        assert cached.encode_ordinary(text) == expected
        assert tiny.encode_ordinary(text) == expected
    assert cached.decode(expected) == text
    with_specials = uncached.encode(text, allowed_special="all")
    assert cached.encode(text, allowed_special="all") == with_specials == tiny.encode(text, allowed_special="all")


@SETTINGS
@given(data=st.binary(max_size=120), kind=st.sampled_from(SEGMENTERS))
def test_cache_never_changes_ids_of_bytes(variants, data, kind):
    cached, uncached = variants[kind][DEFAULT_CACHE_SIZE], variants[kind][0]
    expected = uncached.encode_ordinary(data)
    assert cached.encode_ordinary(data) == expected == cached.encode_ordinary(data)
    assert cached.decode_bytes(expected) == data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, max_size=12), kind=st.sampled_from(SEGMENTERS), threads=st.sampled_from([1, 2, None]))
def test_batch_equals_single_calls_in_every_output_form(variants, batch, kind, threads):
    tokenizer = variants[kind][DEFAULT_CACHE_SIZE]
    single = [tokenizer.encode(text, allowed_special="all") for text in batch]
    assert tokenizer.encode_batch(batch, threads, allowed_special="all") == single
    assert variants[kind][0].encode_batch(batch, threads, allowed_special="all") == single
    flat, offsets = tokenizer.encode_batch_to_numpy(batch, threads, allowed_special="all")
    assert flat.dtype == np.uint32 and offsets.dtype == np.int64 and offsets[0] == 0 and len(offsets) == len(batch) + 1
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(batch))] == single
    assert [tokenizer.encode_to_numpy(text, allowed_special="all").tolist() for text in batch] == single
    assert tokenizer.count_tokens(batch, threads, allowed_special="all").tolist() == [len(ids) for ids in single]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, kind=st.sampled_from(SEGMENTERS), allowed=st.sampled_from([frozenset(), "all"]))
def test_a_str_encodes_as_its_utf8_bytes(variants, text, kind, allowed):
    """A str's UTF-8 is not checked again, special tokens cut out or not: the same ids as its bytes."""
    tokenizer = variants[kind][DEFAULT_CACHE_SIZE]
    data = text.encode("utf-8")
    expected = tokenizer.encode(data, allowed_special=allowed, disallowed_special=())
    assert tokenizer.encode(text, allowed_special=allowed, disallowed_special=()) == expected
    assert tokenizer.encode_to_numpy(text, allowed_special=allowed, disallowed_special=()).tolist() == expected
    assert tokenizer.encode_batch([text, data], allowed_special=allowed, disallowed_special=()) == [expected] * 2
    assert tokenizer.count_tokens([text], allowed_special=allowed, disallowed_special=()).tolist() == [len(expected)]


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_a_str_without_a_pattern_encodes_as_its_utf8_bytes(trained_tokenizers, text):
    base = trained_tokenizers["hf-cl100k"]
    whole = Tokenizer(base.vocab, segmenter="merges", merges=base.merges, pattern=None)
    assert whole.encode_ordinary(text) == whole.encode_ordinary(text.encode("utf-8"))
    assert whole.decode(whole.encode_ordinary(text)) == text


def test_many_tokenizers_on_one_thread_keep_their_own_ids(trained_tokenizers):
    """More tokenisers than a thread keeps cache tables for, used in turn: each gets its own ids."""
    words = " Unmergeable Verschlüsselungsverfahren 中文分词测试 the the cat".split(" ")
    tokenizers = [trained_tokenizers[name] for name in ("hf-cl100k", "naive-cl100k", "hf-gpt2", "hf-o200k",
                                                        "hf-nanochat", "polytok-cl100k", "naive-gpt2")]
    expected = []
    for tokenizer in tokenizers:
        tokenizer.cache_size = 0
        expected.append([tokenizer.encode(word) for word in words])
        tokenizer.cache_size = DEFAULT_CACHE_SIZE
    for _ in range(3):
        assert [[tokenizer.encode(word) for word in words] for tokenizer in tokenizers] == expected


def test_cache_size_is_checked(trained_tokenizers):
    tokenizer = trained_tokenizers["hf-cl100k"]
    assert tokenizer.cache_size == DEFAULT_CACHE_SIZE
    for wrong in (-1, True, 1.5, "10", None):
        with pytest.raises(ConfigError, match="cache_size .0 turns the cache off. must be an integer of at least 0"):
            tokenizer.cache_size = wrong
    with pytest.raises(ConfigError, match="cache_size .0 turns the cache off. must be an integer of at least 0"):
        Tokenizer(tokenizer.vocab, segmenter="merges", pattern="cl100k", cache_size=-5)
    assert tokenizer.cache_size == DEFAULT_CACHE_SIZE


def test_empty_batches_and_texts(variants):
    tokenizer = variants["merges"][DEFAULT_CACHE_SIZE]
    flat, offsets = tokenizer.encode_batch_to_numpy([])
    assert flat.tolist() == [] and offsets.tolist() == [0]
    flat, offsets = tokenizer.encode_batch_to_numpy(["", "a", ""])
    assert offsets.tolist() == [0, 0, 1, 1] and tokenizer.decode(flat) == "a"
    assert tokenizer.encode_batch([]) == [] and tokenizer.encode("") == []


def test_a_flat_batch_of_many_groups_equals_single_calls_and_names_the_first_bad_text(variants):
    """A batch of 400 KB is encoded in groups of neighbouring texts on several threads: its flat
    ids and offsets are those of single calls, and a disallowed special token is reported for
    the first text that has one, whichever group finds it first."""
    tokenizer = variants["merges"][DEFAULT_CACHE_SIZE]
    special = next(iter(SPECIAL_TOKENS))
    batch = [("the text %d " % i) * (i % 150) + "é中文🙂\n" * (i % 7) for i in range(1200)]
    single = [tokenizer.encode_ordinary(text) for text in batch]
    for threads in (1, 2, 3):
        flat, offsets = tokenizer.encode_batch_to_numpy(batch, threads)
        assert np.diff(offsets).tolist() == [len(ids) for ids in single]
        assert flat.tolist() == [token for ids in single for token in ids]
    bad = list(batch)
    bad[1150] += special
    bad[700] = special + bad[700]
    for threads in (1, 2):
        with pytest.raises(EncodeError, match=r"text 700 of the batch contains the special token"):
            tokenizer.encode_batch_to_numpy(bad, threads)
