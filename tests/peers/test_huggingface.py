"""Agreement with HF `tokenizers`: the tokenizer.json we write loads with
`tokenizers.Tokenizer.from_file` and encodes to our ids, for every preset pattern; polytok reads
it back; tokenisers HF cannot reproduce are refused with a clear error."""
from __future__ import annotations

import json
import math

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError, FormatError
from polytok.formats.huggingface import load_huggingface
from polytok.formats.huggingface.write import as_tokenizers_reads_it, merges_from_ranks, to_oniguruma, tokenizers_float
from polytok.pretokenize import PRESETS

tokenizers = pytest.importorskip("tokenizers")

from conftest import SPECIAL_TOKENS, TOKENIZER_NAMES  # noqa: E402

PIECES = ["a", "the", " ", "  ", "\n", "\r\n", "'s", "'LL", "12345", ".", "é", "中文", "🙂", "\t", "\u00a0", *SPECIAL_TOKENS]


@pytest.fixture(scope="module")
def pairs(trained_tokenizers, tmp_path_factory):
    """name -> (our tokeniser, HF loading our tokenizer.json, polytok loading it back)."""
    out = {}
    for name in TOKENIZER_NAMES:
        path = tmp_path_factory.mktemp(name) / "tokenizer.json"
        trained_tokenizers[name].save_huggingface(path)
        out[name] = (trained_tokenizers[name], tokenizers.Tokenizer.from_file(str(path)), polytok.load(path))
    return out


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_ids_equal_hf_on_excerpts(pairs, name, text_excerpts):
    ours, hf, reloaded = pairs[name]
    texts = list(text_excerpts.values())
    texts.append("<|endoftext|>".join(text[:2000] for text in texts) + "<|im_start|>")
    expected = [ours.encode(text, allowed_special="all") for text in texts]
    assert [encoding.ids for encoding in hf.encode_batch(texts)] == expected
    assert [reloaded.encode(text, allowed_special="all") for text in texts] == expected
    assert reloaded.special_tokens == ours.special_tokens and reloaded.vocab == ours.vocab
    assert hf.decode(expected[-1], skip_special_tokens=False) == texts[-1]


# Characters Python's Unicode tables (14.0) assign: HF's regex engine (Oniguruma) and polytok's
# tables (generated from the newer `regex` module) agree on those, not on later additions.
ASSIGNED = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn", "Co"))

@settings(max_examples=300, deadline=None)
@given(text=st.text(ASSIGNED)
       | st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
       name=st.sampled_from(TOKENIZER_NAMES))
def test_ids_equal_hf_on_arbitrary_text(pairs, text, name):
    ours, hf, _ = pairs[name]
    assert hf.encode(text).ids == ours.encode(text, allowed_special="all")


def test_possessive_counted_quantifier_becomes_atomic():
    """Oniguruma reads `X{1,3}+` as "one or more X{1,3}"; the export writes the atomic group."""
    assert to_oniguruma(r"\p{N}{1,3}+|a{2}+b") == r"(?>\p{N}{1,3})|(?>a{2})b"
    assert to_oniguruma(r"[a-z\]]{2,}+") == r"(?>[a-z\]]{2,})"
    assert to_oniguruma(PRESETS["gpt2"]) == PRESETS["gpt2"]
    for pattern in PRESETS.values():
        tokenizers.Regex(to_oniguruma(pattern))


def test_tiktoken_style_vocabulary_exports_with_derived_merges(trained_tokenizers, tmp_path, text_excerpts):
    """Without a merge list (a loaded tiktoken file), the merges are derived from the ranks."""
    trained = trained_tokenizers["hf-cl100k"]
    by_rank = polytok.Tokenizer(trained.vocab, segmenter="merges", pattern="cl100k")
    assert merges_from_ranks(trained.vocab) == trained.merges
    by_rank.save_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = text_excerpts["handbook-de-DE.txt"]
    assert hf.encode(text).ids == by_rank.encode(text)


def test_export_refuses_what_hf_cannot_reproduce(tmp_path):
    vocab = [bytes([byte]) for byte in range(256)]
    bad_regex = polytok.Tokenizer(vocab, segmenter="merges", pattern=r"(?P<word>\w+)|\s")
    with pytest.raises(ConfigError, match="Oniguruma"):
        bad_regex.save_huggingface(tmp_path / "tokenizer.json")
    a, b, c = b"abc"
    duplicated = polytok.Tokenizer(vocab + [b"ab", b"bc", b"abc", b"abc"], segmenter="merges", pattern="cl100k",
                                   merges=[(a, b), (b, c), (256, c), (a, 257)])
    with pytest.raises(ConfigError, match="both b'abc'"):
        duplicated.save_huggingface(tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()


def test_reading_unsupported_hf_files_names_the_problem(trained_tokenizers, tmp_path):
    path = tmp_path / "tokenizer.json"
    trained_tokenizers["naive-cl100k"].save_huggingface(path)
    record = json.loads(path.read_text())
    edits = [
        (lambda r: r["model"].__setitem__("type", "WordLevel"), "model type 'WordLevel' is not supported"),
        (lambda r: r.__setitem__("normalizer", {"type": "StripAccents"}), "normalizer type 'StripAccents' is not supported"),
        (lambda r: r["model"]["vocab"].__setitem__("Ġ", 99999), r"no token has id \d+"),
        (lambda r: r["model"]["merges"].__setitem__(3, "Ġ"), r"model.merges\[3\]"),
        (lambda r: r["pre_tokenizer"].__setitem__("type", "UnicodeScripts"), "pre_tokenizer type 'UnicodeScripts' is not supported"),
    ]
    for edit, message in edits:
        edited = json.loads(json.dumps(record))
        edit(edited)
        path.write_text(json.dumps(edited))
        with pytest.raises(FormatError, match=message):
            polytok.load(path)
        with pytest.raises(FormatError, match=message):
            load_huggingface(path)


SUBWORD_OPTIONS = {
    "wordpiece-cl100k": dict(algorithm="wordpiece", vocab_size=1200, pattern="cl100k", min_frequency=2),
    "wordpiece-unmarked-gpt2": dict(algorithm="wordpiece", vocab_size=900, pattern="gpt2", continuation_marker=None, min_frequency=2),
    "unigram-cl100k": dict(algorithm="unigram", vocab_size=1200, pattern="cl100k"),
    "unigram-o200k": dict(algorithm="unigram", vocab_size=1000, pattern="o200k"),
}
# Markdown headings start words with the marker "##": HF must still take word-initial tokens.
MARKER_TEXT = "### Heading\n## Sub ##a #\n#####x a##b"


@pytest.fixture(scope="module")
def subword_pairs(text_excerpts, tmp_path_factory):
    """name -> (polytok WordPiece/Unigram, HF loading its tokenizer.json, polytok loading it back)."""
    texts = list(text_excerpts.values())
    out = {}
    for name, options in SUBWORD_OPTIONS.items():
        ours = polytok.train(polytok.texts(texts), special_tokens=list(SPECIAL_TOKENS), progress=False, **options)
        path = tmp_path_factory.mktemp(name) / "tokenizer.json"
        ours.save_huggingface(path)
        out[name] = (ours, tokenizers.Tokenizer.from_file(str(path)), polytok.load(path))
    return out


@pytest.mark.parametrize("name", SUBWORD_OPTIONS)
def test_subword_ids_equal_hf_on_excerpts(subword_pairs, name, text_excerpts):
    ours, hf, reloaded = subword_pairs[name]
    texts = [*text_excerpts.values(), MARKER_TEXT]
    texts.append("<|endoftext|>".join(text[:2000] for text in texts) + "<|im_start|>")
    expected = [ours.encode(text, allowed_special="all") for text in texts]
    assert [ours.encode_ordinary(text) for text in texts[:-1]] == [hf.encode(text, add_special_tokens=False).ids for text in texts[:-1]]
    assert [encoding.ids for encoding in hf.encode_batch(texts)] == expected
    assert [reloaded.encode(text, allowed_special="all") for text in texts] == expected
    assert (reloaded.segmenter, reloaded.vocab, reloaded.scores, reloaded.continuation_marker, reloaded.special_tokens) == \
        (ours.segmenter, ours.vocab, ours.scores, ours.continuation_marker, ours.special_tokens)
    # HF's decode gives the text back: the continuation tag and marker are replaced away first
    assert hf.decode(expected[-1], skip_special_tokens=False) == texts[-1]
    assert reloaded.decode(expected[-1]) == texts[-1]


@settings(max_examples=200, deadline=None)
@given(text=st.text(ASSIGNED)
       | st.lists(st.sampled_from([*PIECES, "##", "#", "##a", " ##"]), max_size=30).map("".join),
       name=st.sampled_from(list(SUBWORD_OPTIONS)))
def test_subword_ids_equal_hf_on_arbitrary_text(subword_pairs, text, name):
    ours, hf, reloaded = subword_pairs[name]
    expected = ours.encode(text, allowed_special="all")
    assert hf.encode(text).ids == expected
    assert reloaded.encode(text, allowed_special="all") == expected


def test_unigram_scores_are_written_as_tokenizers_reads_them(subword_pairs, tmp_path):
    """HF's float parser is off by one unit in the last place on some shortest spellings, which
    flips near-ties; the writer spells each score so that it reads back exactly."""
    ours, _, _ = subword_pairs["unigram-cl100k"]
    assert any(as_tokenizers_reads_it(score) != score for score in ours.scores)  # the case arises
    ours.save_huggingface(tmp_path / "tokenizer.json")
    numbers = regex.findall(r"\[\".*?\", (\S+)\]", (tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert [float(number) for number in numbers] == ours.scores
    exact = sum(tokenizers_float(number, math.nan) == score for number, score in zip(numbers, ours.scores))
    assert exact >= 0.99 * len(ours.scores)


def test_shortest_path_is_refused_plainly(tmp_path):
    vocab = [bytes([byte]) for byte in range(256)] + [b"ab"]
    convex = polytok.Tokenizer(vocab, segmenter="shortest_path", pattern="cl100k")
    with pytest.raises(ConfigError, match="HF tokenizers has no shortest-path model"):
        convex.save_huggingface(tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()
