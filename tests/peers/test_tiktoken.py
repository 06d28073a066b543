"""Agreement with tiktoken: a `tiktoken.Encoding` built from our ranks, pattern and special
tokens gives the same ids; our tiktoken files load in both libraries; bad files name the line."""
from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError, FormatError

tiktoken = pytest.importorskip("tiktoken")

from conftest import SPECIAL_TOKENS, TOKENIZER_NAMES  # noqa: E402

SETTINGS = settings(max_examples=300, deadline=None)
PIECES = ["a", "the", " ", "  ", "\n", "\r\n", "'s", "'LL", "12345", ".", "é", "中文", "🙂", "\t", *SPECIAL_TOKENS]


def as_tiktoken(tokenizer: polytok.Tokenizer) -> "tiktoken.Encoding":
    return tiktoken.Encoding(
        "polytok-test",
        pat_str=tokenizer.pattern,
        mergeable_ranks={token: rank for rank, token in enumerate(tokenizer.vocab)},
        special_tokens=tokenizer.special_tokens,
    )


@pytest.fixture(scope="module")
def pairs(trained_tokenizers):
    return {name: (trained_tokenizers[name], as_tiktoken(trained_tokenizers[name])) for name in TOKENIZER_NAMES}


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_ids_equal_tiktoken_on_excerpts(pairs, name, text_excerpts):
    ours, theirs = pairs[name]
    for text in text_excerpts.values():
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    joined = "<|endoftext|>".join(text[:3000] for text in text_excerpts.values()) + "<|im_start|>"
    assert ours.encode(joined, allowed_special="all") == theirs.encode(joined, allowed_special="all")
    assert ours.encode_batch(list(text_excerpts.values())) == theirs.encode_ordinary_batch(list(text_excerpts.values()))


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_long_pieces_equal_tiktoken(pairs, name):
    ours, theirs = pairs[name]
    for text in ("a" * 5000, "ab" * 3000, "the" * 2000, " " * 5000, "1" * 4000, "é" * 3000):
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


# Characters Python's Unicode tables (14.0) assign: tiktoken's regex engine and polytok's tables
# (generated from the newer `regex` module) agree on those, not on later additions.
ASSIGNED = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn", "Co"))


@SETTINGS
@given(text=st.text(ASSIGNED), name=st.sampled_from(TOKENIZER_NAMES))
def test_ids_equal_tiktoken_on_arbitrary_text(pairs, text, name):
    ours, theirs = pairs[name]
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


@SETTINGS
def assert_special_tokens_handled_alike(ours, theirs, text: str, allowed: set[str]) -> None:
    """Where tiktoken refuses a disallowed special token, polytok raises EncodeError; elsewhere
    both give the same ids."""
    try:
        expected = theirs.encode(text, allowed_special=allowed)
    except ValueError:
        with pytest.raises(polytok.errors.EncodeError):
            ours.encode(text, allowed_special=allowed)
    else:
        assert ours.encode(text, allowed_special=allowed) == expected


@given(text=st.lists(st.sampled_from(PIECES), max_size=30).map("".join), name=st.sampled_from(TOKENIZER_NAMES),
       allowed=st.sets(st.sampled_from(sorted(SPECIAL_TOKENS))))
def test_special_token_semantics_equal_tiktoken(pairs, text, name, allowed):
    ours, theirs = pairs[name]
    assert_special_tokens_handled_alike(ours, theirs, text, allowed)
    assert ours.encode(text, allowed_special=allowed, disallowed_special=()) == theirs.encode(
        text, allowed_special=allowed, disallowed_special=()
    )


@pytest.mark.parametrize("name", ["naive-cl100k", "hf-o200k"])
def test_tiktoken_file_round_trip(trained_tokenizers, name, tmp_path, text_excerpts):
    tokenizer = trained_tokenizers[name]
    path = tmp_path / "ranks.tiktoken"
    tokenizer.save_tiktoken(path)
    from tiktoken.load import load_tiktoken_bpe

    assert load_tiktoken_bpe(str(path)) == {token: rank for rank, token in enumerate(tokenizer.vocab)}
    loaded = polytok.load_tiktoken(path, pattern=tokenizer.pattern, special_tokens=tokenizer.special_tokens)
    assert loaded.merges is None and loaded.vocab == tokenizer.vocab
    text = text_excerpts["handbook-fr-FR.txt"] + "<|endoftext|>"
    assert loaded.encode(text, allowed_special="all") == tokenizer.encode(text, allowed_special="all")


def test_bad_tiktoken_files_name_the_line(tmp_path):
    lines = [f"{base64.b64encode(bytes([byte])).decode()} {byte}" for byte in range(256)]

    def load_with(edited: list[str]):
        path = tmp_path / "bad.tiktoken"
        path.write_text("\n".join(edited) + "\n")
        return polytok.load_tiktoken(path, pattern="cl100k")

    assert load_with(lines).vocab_size == 256
    cases = [
        (lines[:5] + ["!!notbase64 5"] + lines[6:], r"line 6: '!!notbase64' is not valid base64"),
        (lines[:7] + ["YQ== seven"] + lines[8:], r"line 8: rank 'seven' is not an integer"),
        (lines[:9] + ["YQ=="] + lines[10:], r"line 10: expected 'base64-token rank'"),
        (lines[:3] + [lines[2]] + lines[4:], r"line 4: rank 2 appears twice"),
        (lines[:100] + lines[101:], r"byte 0x64 is no other token"),  # a missing rank is an unused id
        (lines + ["eno= 2000"], r"1744 ranks below the largest \(2000\) are missing, the first 256"),
        (lines[:65] + ["QUE= 65"] + lines[66:], r"byte 0x41 is not a token"),
        (lines[:65] + ["Qg== 65"] + lines[66:], r"token 66 repeats the bytes of an earlier token"),
    ]
    for edited, message in cases:
        with pytest.raises(FormatError, match=message):
            load_with(edited)
    with pytest.raises(FormatError, match="cannot read"):
        polytok.load_tiktoken(tmp_path / "missing.tiktoken", pattern="cl100k")


def test_tiktoken_export_refuses_duplicate_tokens(tmp_path):
    """A merge list may reach the same bytes twice ("ab"+"c" and "a"+"bc"); ranks cannot say that."""
    a, b, c = b"abc"
    vocab = [bytes([byte]) for byte in range(256)] + [b"ab", b"bc", b"abc", b"abc"]
    tokenizer = polytok.Tokenizer(vocab, segmenter="merges", pattern="cl100k", merges=[(a, b), (b, c), (256, c), (a, 257)])
    assert tokenizer.decode(tokenizer.encode("abc")) == "abc"
    with pytest.raises(ConfigError, match=r"tokens 258 and 259 are both b'abc'"):
        tokenizer.save_tiktoken(tmp_path / "ranks.tiktoken")
    assert not (tmp_path / "ranks.tiktoken").exists()


# ---- the real OpenAI vocabularies (rank files from the bpe-openai wheel) ---------------------

REAL_NAMES = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module")
def real_pairs(tmp_path_factory):
    """name -> (polytok tokeniser, tiktoken.get_encoding(name)), from the same checked rank files."""
    from real_vocabularies import load_pair, packaged_rank_files, unpack

    if packaged_rank_files() is None:
        pytest.skip("bpe-openai (test extra) is not installed")
    directory = tmp_path_factory.mktemp("openai-ranks")
    unpack(directory)
    return {name: load_pair(name, directory) for name in REAL_NAMES}


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_vocabulary_is_tiktokens(real_pairs, name):
    """The same ranks, the preset's pattern is tiktoken's text, the same special tokens."""
    from polytok.pretokenize import PRESETS

    ours, theirs = real_pairs[name]
    assert ours.vocab == sorted(theirs._mergeable_ranks, key=theirs._mergeable_ranks.get)
    assert ours.pattern == theirs._pat_str == PRESETS[{"cl100k_base": "cl100k", "o200k_base": "o200k"}[name]]
    assert ours.special_tokens == theirs._special_tokens
    assert ours.n_vocab == theirs.n_vocab


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_vocabulary_equals_tiktoken_on_excerpts(real_pairs, name, text_excerpts):
    ours, theirs = real_pairs[name]
    texts = list(text_excerpts.values())
    for text in texts:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.encode_batch(texts) == theirs.encode_ordinary_batch(texts)
    assert [ours.encode_to_numpy(text).tolist() for text in texts[:2]] == theirs.encode_ordinary_batch(texts[:2])
    specials = sorted(theirs._special_tokens)
    joined = "".join(text[:2000] + specials[index % len(specials)] for index, text in enumerate(texts))
    assert ours.encode(joined, allowed_special="all") == theirs.encode(joined, allowed_special="all")
    assert ours.encode(joined, disallowed_special=()) == theirs.encode(joined, disallowed_special=())


REAL_SETTINGS = settings(max_examples=150, deadline=None)
# Special-token look-alikes and the pieces that stress the o200k and cl100k patterns.
REAL_PIECES = [*PIECES, "<|endofprompt|>", "<|fim_middle|>", "<|", "|>", "endoftext", "ABC", "Ab", "'re", "'S",
               "ſ", "/", "\r", "\u00a0", "\u2028", "Ǆ", "ǅ", "ʰ", "\u0301", "١٢٣", "नमस्ते", "Привет"]


@REAL_SETTINGS
@given(text=st.text(ASSIGNED) | st.lists(st.sampled_from(REAL_PIECES), max_size=40).map("".join),
       name=st.sampled_from(REAL_NAMES))
def test_real_vocabulary_equals_tiktoken_on_arbitrary_text(real_pairs, text, name):
    ours, theirs = real_pairs[name]
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")


@REAL_SETTINGS
@given(text=st.lists(st.sampled_from(REAL_PIECES), max_size=30).map("".join), name=st.sampled_from(REAL_NAMES),
       allowed=st.sets(st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "<|fim_middle|>"])))
def test_real_vocabulary_special_token_semantics_equal_tiktoken(real_pairs, text, name, allowed):
    ours, theirs = real_pairs[name]
    allowed = allowed & set(theirs._special_tokens)
    assert_special_tokens_handled_alike(ours, theirs, text, allowed)


# One character repeated: one huge pre-token for every pattern (tiktoken's own limits set the size).
RUNS = ["a", " ", "^", "\n", "🙂", "中", "1", "ab", " a", "é", "\r\n", "A", "'s"]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_vocabulary_equals_tiktoken_on_long_runs(real_pairs, name):
    ours, theirs = real_pairs[name]
    for unit in RUNS:
        text = unit * (20000 // len(unit))
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), unit
        assert ours.encode_ordinary(text + "x") == theirs.encode_ordinary(text + "x"), unit


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_vocabulary_handles_megabyte_runs(real_pairs, name):
    """1 MB of one character, beyond what tiktoken handles (it overflows its stack on spaces with
    o200k): the ids round trip and equal those of the batch and numpy paths."""
    ours, _ = real_pairs[name]
    for unit in ("a", " ", "^", "\n", "🙂", "中"):
        text = unit * (1_000_000 // len(unit.encode()))
        ids = ours.encode_ordinary(text)
        assert ours.decode(ids) == text, unit
        assert ours.encode_batch([text, text[:1000]], num_threads=2) == [ids, ours.encode_ordinary(text[:1000])]
        assert ours.encode_to_numpy(text).tolist() == ids
