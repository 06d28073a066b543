"""The Tokenizer and its merges segmenter: round trips on hostile input, special tokens with
tiktoken's semantics, agreement with a pure-Python replay of the merge list, batch and numpy
paths, lookups and construction. Its file format is tested in tests/formats/."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polytok.errors import ConfigError, DecodeError, EncodeError, PatternError
from polytok.pretokenize import PreTokenizer
from polytok.tokenizer import Tokenizer

from conftest import SPECIAL_TOKENS, TOKENIZER_NAMES, naive_bpe

HYPOTHESIS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text built from pieces that stress pre-tokenisation and merging: letters, digits, spaces,
# newlines, apostrophes, non-Latin scripts, and the special tokens' text.
PIECES = ["a", "e", "th", "the", " ", "  ", "\n", "\r\n", "'s", "'LL", "1", "2024", ".", "é", "中文", "🙂",
          "\u0301", "\t", *SPECIAL_TOKENS, "<|", "|>", "endoftext"]
mixed_text = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def replay_reference(tokenizer: Tokenizer, text: str | bytes) -> list[int]:
    """Pure-Python BPE: pre-tokenise, then replay the merge list in order on each pre-token."""
    ids_of = {token: token_id for token_id, token in enumerate(tokenizer.vocab)}
    out = []
    for piece in PreTokenizer(tokenizer.pattern).split(text):
        word = [ids_of[bytes([byte])] for byte in piece]
        for left, right in tokenizer.merges:
            if len(word) < 2:
                break
            merged = ids_of[tokenizer.vocab[left] + tokenizer.vocab[right]]
            i, new_word = 0, []
            while i < len(word):
                if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                    new_word.append(merged)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = new_word
        out.extend(word)
    return out


@pytest.fixture(params=TOKENIZER_NAMES)
def tokenizer(request, trained_tokenizers) -> Tokenizer:
    return trained_tokenizers[request.param]


# ---- round trips --------------------------------------------------------------------------


@HYPOTHESIS
@given(text=st.text())
def test_round_trip_arbitrary_unicode(tokenizer, text):
    expected = text.encode("utf-8", "surrogatepass")
    assert tokenizer.decode_bytes(tokenizer.encode_ordinary(text)) == expected
    assert tokenizer.decode_bytes(tokenizer.encode(text, allowed_special="all")) == expected


@HYPOTHESIS
@given(data=st.binary(max_size=200))
def test_round_trip_arbitrary_bytes(tokenizer, data):
    ids = tokenizer.encode_ordinary(data)
    assert tokenizer.decode_bytes(ids) == data
    assert tokenizer.decode(ids) == data.decode("utf-8", "replace")


@HYPOTHESIS
@given(text=mixed_text)
def test_round_trip_with_special_tokens(tokenizer, text):
    ids = tokenizer.encode(text, allowed_special="all")
    assert tokenizer.decode(ids) == text
    special_ids = set(tokenizer.special_tokens.values())
    assert sum(token_id in special_ids for token_id in ids) == sum(text.count(s) for s in SPECIAL_TOKENS)
    ordinary = tokenizer.encode_ordinary(text)
    assert tokenizer.decode(ordinary) == text and not special_ids & set(ordinary)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mixed_text | st.text(max_size=60))
def test_merges_equal_pure_python_replay(tokenizer, text):
    assert tokenizer.encode_ordinary(text) == replay_reference(tokenizer, text)


def test_long_pieces_equal_pure_python_replay(trained_tokenizers):
    """Pieces longer than the flat scan's limit take the heap path: same ids as the replay."""
    tokenizer = trained_tokenizers["hf-cl100k"]
    rng = random.Random(7)
    for length in (95, 96, 97, 150, 400, 1000):
        for alphabet in ("a", "ab", "theinsa", "thequickbrownfoxjumps"):
            word = "".join(rng.choice(alphabet) for _ in range(length))
            assert tokenizer.encode(word) == replay_reference(tokenizer, word), (length, alphabet)


def test_overlapping_pairs_merge_leftmost_first():
    """ "aaaaa" with merges (a,a)->aa then (aa,a)->aaa: merge 0 everywhere left to right gives
    aa aa a, then merge 1 joins the last two: [aa, aaa]. tiktoken's rule (rank = id) agrees."""
    vocab = [bytes([byte]) for byte in range(256)] + [b"aa", b"aaa"]
    a = ord("a")
    replay = Tokenizer(vocab, segmenter="merges", pattern=None, merges=[(a, a), (256, a)])
    by_rank = Tokenizer(vocab, segmenter="merges", pattern=None)
    for tokenizer in (replay, by_rank):
        assert tokenizer.encode("aaaaa") == [256, 257]
        assert tokenizer.encode("aaaa") == [256, 256]
        assert tokenizer.encode("a" * 301) == [256] * 149 + [257]  # the heap path: same rule


def test_tokenizers_sharing_a_thread_never_share_cached_pieces(trained_tokenizers):
    """Merged pieces are cached per thread; each tokeniser must still get its own ids."""
    first, second = trained_tokenizers["hf-cl100k"], trained_tokenizers["naive-cl100k"]
    words = " Unmergeable Verschlüsselungsverfahren 中文分词测试".split()
    expected = {id(t): [replay_reference(t, w) for w in words] for t in (first, second)}
    for _ in range(3):
        for tokenizer in (first, second):
            assert [tokenizer.encode(w) for w in words] == expected[id(tokenizer)]


def test_merge_list_and_tiktoken_rule_agree_on_real_text(trained_tokenizers, text_excerpts):
    """For trained merge lists, replaying the list equals tiktoken's rule (rank = id)."""
    for name in TOKENIZER_NAMES:
        with_merges = trained_tokenizers[name]
        by_rank = Tokenizer(with_merges.vocab, segmenter="merges", pattern=with_merges.pattern)
        for text in text_excerpts.values():
            assert by_rank.encode_ordinary(text) == with_merges.encode_ordinary(text), name


def test_input_types(trained_tokenizers):
    tokenizer = trained_tokenizers["hf-cl100k"]
    expected = tokenizer.encode("héllo wörld")
    assert tokenizer.encode("héllo wörld".encode()) == expected
    assert tokenizer.encode(bytearray("héllo wörld".encode())) == expected
    for wrong in (None, 12, ["a"], [104, 105]):
        with pytest.raises(TypeError, match="expected str, bytes or bytearray"):
            tokenizer.encode(wrong)
    with pytest.raises(TypeError):
        tokenizer.encode_batch(["fine", 3])


def test_empty_input(tokenizer):
    assert tokenizer.encode("") == []
    assert tokenizer.encode(b"") == []
    assert tokenizer.encode_batch([]) == []
    assert tokenizer.encode_batch(["", b""]) == [[], []]
    assert tokenizer.encode_to_numpy("").dtype == np.uint32
    assert tokenizer.decode([]) == "" and tokenizer.decode_bytes(np.array([], dtype=np.int64)) == b""


def test_huge_inputs(trained_tokenizers, text_excerpts):
    """Megabytes of one letter or of spaces are single pre-tokens: merging must stay fast."""
    tokenizer = trained_tokenizers["hf-cl100k"]
    mix = "".join(text_excerpts.values()) * 12
    for text in ("a" * 1_000_000, " " * 1_000_000, mix):
        ids = tokenizer.encode_to_numpy(text)
        assert tokenizer.decode_bytes(ids) == text.encode("utf-8")


# ---- special tokens -----------------------------------------------------------------------


def test_special_tokens_follow_tiktoken_semantics(trained_tokenizers):
    tokenizer = trained_tokenizers["naive-cl100k"]
    end, fim = tokenizer.special_tokens["<|endoftext|>"], tokenizer.special_tokens["<|fim_prefix|>"]
    text = "<|endoftext|>hello<|fim_prefix|><|endoftext|> world<|endoftext|>"
    with pytest.raises(EncodeError, match=r"<\|endoftext\|>.*allowed_special"):
        tokenizer.encode(text)
    with pytest.raises(EncodeError, match=r"<\|fim_prefix\|>"):
        tokenizer.encode(text, allowed_special={"<|endoftext|>"})
    ids = tokenizer.encode(text, allowed_special="all")
    assert ids[0] == end and ids[-1] == end and [end, fim, end, end] == [i for i in ids if i in (end, fim)]
    assert fim in tokenizer.encode(text, allowed_special={"<|fim_prefix|>", "<|endoftext|>"})
    # allowed subset with nothing disallowed: the other special's text is ordinary text
    only_end = tokenizer.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=())
    assert fim not in only_end and only_end.count(end) == 3 and tokenizer.decode(only_end) == text
    # disallowed nothing: all ordinary, identical to encode_ordinary
    assert tokenizer.encode(text, disallowed_special=()) == tokenizer.encode_ordinary(text)
    # a custom disallowed text raises even if it is no special token (as tiktoken does)
    with pytest.raises(EncodeError, match="hello"):
        tokenizer.encode(text, allowed_special="all", disallowed_special={"hello"})
    with pytest.raises(EncodeError, match="not special tokens"):
        tokenizer.encode("x", allowed_special={"<|nope|>"})
    with pytest.raises(EncodeError, match="batch"):
        tokenizer.encode_batch(["fine", "also <|endoftext|>"])
    # adjacent specials and specials at both ends
    assert tokenizer.encode("<|endoftext|><|endoftext|>", allowed_special="all") == [end, end]


def test_special_tokens_overlapping_prefixes():
    """When one special token's text starts another's, the longest match wins."""
    vocab = [bytes([byte]) for byte in range(256)]
    tokenizer = Tokenizer(vocab, segmenter="merges", pattern="cl100k",
                          special_tokens={"<|a|>": 256, "<|a|>b": 257, "|>b<": 258})
    assert tokenizer.encode("<|a|>b<|a|>", allowed_special="all") == [257, 256]
    assert tokenizer.encode("x<|a|>c", allowed_special="all") == [ord("x"), 256, ord("c")]
    # with only the shorter one allowed, the longer one's text is ordinary after it
    assert tokenizer.encode("<|a|>b", allowed_special={"<|a|>"}, disallowed_special=()) == [256, ord("b")]
    with pytest.raises(EncodeError, match=r"\|>b<"):
        tokenizer.encode("<|a|>b<", allowed_special={"<|a|>", "<|a|>b"})


# ---- batch, numpy, counting ------------------------------------------------------------------


def test_batch_numpy_and_counts_agree_with_encode(tokenizer, text_excerpts):
    texts = [line for text in text_excerpts.values() for line in text.splitlines()[:60]]
    texts += ["<|endoftext|>" + texts[0], b"\xff\xfe raw bytes", ""]
    single = [tokenizer.encode(text, allowed_special="all") for text in texts]
    for threads in (None, 1, 2, 3):
        assert tokenizer.encode_batch(texts, threads, allowed_special="all") == single
    counts = tokenizer.count_tokens(texts, allowed_special="all")
    assert counts.tolist() == [len(ids) for ids in single]
    array = tokenizer.encode_to_numpy(texts[0], allowed_special="all")
    assert array.dtype == np.uint32 and array.tolist() == single[0]
    assert tokenizer.encode_ordinary_batch(texts) == [tokenizer.encode_ordinary(t) for t in texts]
    with pytest.raises(ConfigError):
        tokenizer.encode_batch(texts, num_threads=0)


def test_batch_methods_refuse_one_text(tokenizer):
    """One str or bytes given where a list of texts is expected would be read as a batch of
    one-character texts; every batch method says so instead."""
    calls = {
        "encode_batch": tokenizer.encode_batch, "encode_batch_to_numpy": tokenizer.encode_batch_to_numpy,
        "encode_ordinary_batch": tokenizer.encode_ordinary_batch, "count_tokens": tokenizer.count_tokens,
        "token_histogram": tokenizer.token_histogram, "encode_batch_padded": tokenizer.encode_batch_padded,
    }
    for name, call in calls.items():
        for one in ("hello world", b"hello world", bytearray(b"hi")):
            with pytest.raises(EncodeError, match=rf"{name} takes a list of texts, got one {type(one).__name__}"):
                call(one)
        if name == "encode_batch_padded":
            assert call(["hello world", b"hi"], pad_id=0).ids.shape[0] == 2
        else:
            assert len(call(["hello world", b"hi"])) == (tokenizer.n_vocab if name == "token_histogram" else 2)
    assert tokenizer.count_tokens(iter(["a", "bc"])).tolist() == [len(tokenizer.encode("a")), len(tokenizer.encode("bc"))]


# ---- decoding and lookup -------------------------------------------------------------------


def test_decode_rejects_ids_that_are_no_token(trained_tokenizers):
    tokenizer = trained_tokenizers["naive-cl100k"]
    last = tokenizer.n_vocab - 1
    for bad in ([tokenizer.n_vocab], [5, -1], [1 << 40], np.array([1, last + 7])):
        with pytest.raises(DecodeError, match=r"is not a token: ordinary ids are 0\.\.\d+ and special ids"):
            tokenizer.decode(bad)
    with pytest.raises(DecodeError, match=f"id {last + 1} at position 2"):
        tokenizer.decode_bytes([1, 2, last + 1])
    with pytest.raises(DecodeError):
        tokenizer.decode(["a"])
    assert tokenizer.decode([0xE4, 0xB8]) == "\ufffd"  # a cut UTF-8 sequence follows `errors`
    with pytest.raises(UnicodeDecodeError):
        tokenizer.decode([0xE4, 0xB8], errors="strict")


def test_token_lookup(tokenizer):
    for token_id in (0, 97, 255, 256, len(tokenizer.vocab) - 1):
        assert tokenizer.token_id(tokenizer.token_bytes(token_id)) == token_id
    for text, token_id in tokenizer.special_tokens.items():
        assert tokenizer.token_id(text) == token_id
        assert tokenizer.token_bytes(token_id) == text.encode()
    assert tokenizer.vocab_size == len(tokenizer.vocab) + len(SPECIAL_TOKENS) == tokenizer.n_vocab
    with pytest.raises(EncodeError):
        tokenizer.token_id(b"\x00no such token\x00")
    with pytest.raises(DecodeError):
        tokenizer.token_bytes(tokenizer.n_vocab)


# ---- construction ----------------------------------------------------------------------------


def test_constructor_rejects_bad_arguments():
    vocab = [bytes([byte]) for byte in range(256)]
    with pytest.raises(ConfigError, match="byte 0x41"):
        Tokenizer(vocab[:65] + vocab[66:], segmenter="merges", pattern="cl100k")
    with pytest.raises(ConfigError, match="after the 256 ordinary ids"):
        Tokenizer(vocab, segmenter="merges", pattern="cl100k", special_tokens={"<s>": 3})
    with pytest.raises(ConfigError, match="share id"):
        Tokenizer(vocab, segmenter="merges", pattern=None, special_tokens={"<s>": 300, "</s>": 300})
    with pytest.raises(ConfigError, match="unknown segmenter"):
        Tokenizer(vocab, segmenter="magic", pattern=None)
    with pytest.raises(PatternError):
        Tokenizer(vocab, segmenter="merges", pattern="(unclosed")
    with pytest.raises(ConfigError, match="merge 0"):
        Tokenizer(vocab + [b"ab"], segmenter="merges", pattern=None, merges=[(97, 99)])
    with pytest.raises(ConfigError, match="outside"):
        Tokenizer(vocab + [b"ab"], segmenter="merges", pattern=None, merges=[(97, 400)])


def test_pattern_none_means_no_split():
    """Without a pattern the whole text is one pre-token, so tokens may span a space."""
    vocab, merges = naive_bpe(["ab ab ab ab"], None, 6)
    text = "ab ab ab ab"
    for pattern, spans in ((None, True), ("cl100k", False)):
        tokenizer = Tokenizer(vocab, segmenter="merges", pattern=pattern, merges=merges)
        tokens = [tokenizer.token_bytes(i) for i in tokenizer.encode(text)]
        assert b"".join(tokens) == text.encode()
        assert any(b" " in token.strip() for token in tokens) == spans


def test_token_histogram_counts_the_ordinary_encoding():
    vocab = [bytes([b]) for b in range(256)] + [b"ab", b"abc"]
    tokenizer = Tokenizer(vocab, segmenter="merges", pattern="gpt2", merges=[(97, 98), (256, 99)],
                          special_tokens={"<|s|>": 258})
    texts = ["abc ab", "<|s|>abc", ""]
    expected = np.zeros(259, dtype=np.uint64)
    for text in texts:
        for token in tokenizer.encode_ordinary(text):
            expected[token] += 1
    for threads in (1, 2):
        assert tokenizer.token_histogram(texts, num_threads=threads).tolist() == expected.tolist()


def test_empty_entries_are_unused_ids_within_limits():
    byte_tokens = [bytes([byte]) for byte in range(256)]
    # ids 256 and 257 are no ordinary token; a special token takes 257, and 258 is learned
    tokenizer = Tokenizer(byte_tokens + [b"", b"", b"ab"], segmenter="merges", pattern=None,
                          special_tokens={"<s>": 257}, merges=[(97, 98)])
    assert tokenizer.encode("abab<s>", allowed_special="all") == [258, 258, 257]
    assert tokenizer.vocab_size == 258 and tokenizer.n_vocab == 259
    with pytest.raises(DecodeError, match="id 256 .* except \\[256, 257\\]"):
        tokenizer.decode([256])
    with pytest.raises(ConfigError, match="names an unused"):
        Tokenizer(byte_tokens + [b""], segmenter="merges", pattern=None, merges=[(97, 256)])
    with pytest.raises(ConfigError, match="ordinary token's id|whose vocabulary entry is empty"):
        Tokenizer(byte_tokens + [b"ab"], segmenter="merges", pattern=None, special_tokens={"<s>": 256})
    with pytest.raises(ConfigError, match="token 256 is empty"):
        Tokenizer(byte_tokens + [b""], segmenter="longest_match", pattern=None)
    # a Unigram's unused id: never in a lattice, whatever its score
    unigram = Tokenizer(byte_tokens + [b"", b"ab"], segmenter="viterbi", pattern=None, scores=[-5.0] * 256 + [0.0, -1.0],
                        special_tokens={"<s>": 256})
    assert unigram.encode("abab<s>", allowed_special="all") == [257, 257, 256]
    with pytest.raises(ConfigError, match="1025 vocabulary entries are empty"):
        Tokenizer(byte_tokens + [b""] * 1025, segmenter="shortest_path", pattern=None)
