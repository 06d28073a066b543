"""polytok.compare: two tokenisers on two languages, the tax and the Gini coefficient, the sample
sentence's cuts (terminal and HTML), reading tokeniser files, and bad input."""
from __future__ import annotations

import html.parser
import json
import re
from pathlib import Path

import pytest

import polytok
from polytok.compare import (
    compare,
    gini,
    load_tokenizers,
    read_texts,
    render_html,
    render_terminal,
)
from polytok.errors import ConfigError, CorpusError, FormatError
from test_metrics import COMMON_WORDS, GreedyTokenizer, small_tiktoken  # noqa: F401

DATA = Path(__file__).parent / "data"
EN = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")
ES = (DATA / "handbook-es-ES.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tokenizers():
    return {"words": GreedyTokenizer([w.encode() for w in COMMON_WORDS]), "tiktoken": small_tiktoken()}


def test_gini_hand_computed():
    assert gini([3.0, 3.0, 3.0]) == 0.0
    # |0-1| occurs 4 times among the 9 ordered pairs; mean 1/3: 4 / (2 * 9 * 1/3) = 2/3, the most
    # unequal split of three.
    assert gini([0.0, 0.0, 1.0]) == pytest.approx(2 / 3)
    assert gini([1.0, 3.0]) == pytest.approx(2 * 2 / (2 * 4 * 2))
    assert gini([5.0]) == 0.0


def test_two_tokenisers_on_two_languages(tokenizers):
    result = compare(tokenizers, {"en": EN, "es": ES})
    assert result["tokenizers"] == ["words", "tiktoken"] and result["texts"] == ["en", "es"]
    assert result["reference"] == "en" and result["cost"] == "tokens"
    rows = {(row["tokenizer"], row["text"]): row for row in result["rows"]}
    assert len(rows) == 4
    encoding = tokenizers["tiktoken"]
    for text_name, text in (("en", EN), ("es", ES)):
        words_row, tiktoken_row = rows[("words", text_name)], rows[("tiktoken", text_name)]
        assert words_row["tokens"] == len(tokenizers["words"].encode(text))
        assert tiktoken_row["tokens"] == len(encoding.encode_ordinary(text))
        for row in (words_row, tiktoken_row):
            assert row["words"] == len(text.split())
            assert row["bytes"] == len(text.encode("utf-8"))
            assert row["tokens_per_word"] == pytest.approx(row["tokens"] / len(text.split()))
            assert row["bytes_per_token"] == pytest.approx(len(text.encode("utf-8")) / row["tokens"])
    for name in tokenizers:
        assert rows[(name, "en")]["tax"] == 1.0
        assert rows[(name, "es")]["tax"] == pytest.approx(rows[(name, "es")]["tokens"] / rows[(name, "en")]["tokens"])
        assert result["gini"][name] == pytest.approx(gini([rows[(name, "en")]["tokens"], rows[(name, "es")]["tokens"]]))
    # Spanish pays more than English with English-leaning vocabularies.
    assert rows[("words", "es")]["tax"] > 1.0


def test_the_tax_by_bytes_and_another_reference(tokenizers):
    result = compare(tokenizers, {"en": EN, "es": ES}, reference="es", cost="tokens_per_byte")
    rows = {(row["tokenizer"], row["text"]): row for row in result["rows"]}
    for name in tokenizers:
        en, es = rows[(name, "en")], rows[(name, "es")]
        assert en["cost"] == pytest.approx(en["tokens"] / en["bytes"])
        assert en["tax"] == pytest.approx(en["cost"] / es["cost"]) and es["tax"] == 1.0
        assert result["gini"][name] == pytest.approx(gini([en["cost"], es["cost"]]))


def test_the_sample_is_cut_into_the_tokenisers_own_tokens(tokenizers):
    sample = "El niño juega en el jardín: 中文 <b>&"
    result = compare(tokenizers, {"en": EN, "es": ES}, sample=sample)
    encoding = tokenizers["tiktoken"]
    cuts = result["sample"]["cuts"]
    assert result["sample"]["text"] == sample
    assert cuts["tiktoken"]["ids"] == encoding.encode_ordinary(sample)
    assert cuts["words"]["ids"] == tokenizers["words"].encode(sample)
    for name, tokenizer in (("words", tokenizers["words"]), ("tiktoken", None)):
        pieces = [encoding.decode_single_token_bytes(i) if tokenizer is None else tokenizer.token_bytes(i)
                  for i in cuts[name]["ids"]]
        assert b"".join(pieces) == sample.encode("utf-8")
        assert cuts[name]["pieces"] == [piece.decode("utf-8", "backslashreplace") for piece in pieces]
    # "中" is e4 b8 ad: with bytes only it is three tokens, none of them UTF-8 alone.
    assert "\\xe4" in cuts["words"]["pieces"]


def test_default_sample_is_the_reference_texts_first_line(tokenizers):
    result = compare(tokenizers, {"es": "\n\n  El niño juega en el jardín.  \nsecond line\n", "en": EN})
    assert result["sample"]["text"] == "El niño juega en el jardín."


def test_terminal_view(tokenizers):
    result = compare(tokenizers, {"en": EN}, sample="The lord\tof\nthe")
    plain = render_terminal(result, colour=False).splitlines()
    assert plain[0] == "sample: The lord→of↵the"
    words_line = next(line for line in plain if line.startswith("words"))
    pieces = [piece.decode() for piece in map(tokenizers["words"].token_bytes, result["sample"]["cuts"]["words"]["ids"])]
    assert words_line.endswith("|".join(pieces).replace("\t", "→").replace("\n", "↵"))
    assert f"{len(pieces)} tokens" in words_line
    coloured = render_terminal(result, colour=True)
    words_coloured = next(line for line in coloured.splitlines() if line.startswith("words"))
    assert len(re.findall(r"\x1b\[30;48;5;\d+m", words_coloured)) == len(pieces)
    assert re.sub(r"\x1b\[[0-9;]*m", "", words_coloured).endswith("".join(pieces).replace("\t", "→").replace("\n", "↵"))


class _Spans(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self.inside = False

    def handle_starttag(self, tag, attributes):
        if tag == "tr":
            self.rows.append([])
        if tag == "span":
            self.inside = True
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "span":
            self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.rows[-1][-1] += data


def test_html_view_escapes_and_keeps_every_token(tokenizers):
    sample = 'a <b>"x" & y'
    result = compare(tokenizers, {"en": EN}, sample=sample)
    fragment = render_html(result)
    assert "<b>" not in fragment and "&lt;b&gt;&quot;x&quot; &amp; y" in fragment
    parser = _Spans()
    parser.feed(fragment)
    token_rows = [row for row in parser.rows if row]
    assert len(token_rows) == 2
    for row, name in zip(token_rows, result["tokenizers"]):
        assert row == result["sample"]["cuts"][name]["pieces"]
        assert "".join(row) == sample


def test_a_sequence_of_tokenisers_is_named_by_name_or_position():
    result = compare([GreedyTokenizer(name="mine"), GreedyTokenizer()], {"t": "some text"})
    assert result["tokenizers"] == ["mine", "tokenizer-2"]


# --------------------------------------------------------------------------- bad input


def test_empty_text_and_bad_options(tokenizers):
    with pytest.raises(CorpusError, match="text 'es' is empty"):
        compare(tokenizers, {"en": EN, "es": "  \n"})
    with pytest.raises(ConfigError, match="reference text 'fr' is not among the texts: en, es"):
        compare(tokenizers, {"en": EN, "es": ES}, reference="fr")
    with pytest.raises(ConfigError, match="unknown cost"):
        compare(tokenizers, {"en": EN}, cost="dollars")
    with pytest.raises(ConfigError, match="at least one text"):
        compare(tokenizers, {})
    with pytest.raises(ConfigError, match="at least one tokeniser"):
        compare({}, {"en": EN})


def test_tokeniser_files_that_cannot_be_read(tmp_path):
    with pytest.raises(FormatError, match=f"cannot read tokeniser file {re.escape(str(tmp_path / 'missing.json'))}"):
        load_tokenizers([tmp_path / "missing.json"])
    with pytest.raises(FormatError, match="cannot read tokeniser file"):
        load_tokenizers([tmp_path])
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(FormatError, match="empty.json is empty"):
        load_tokenizers([tmp_path / "empty.json"])
    (tmp_path / "notes.txt").write_text("just some notes\n")
    with pytest.raises(FormatError, match="notes.txt is not a tokeniser file polytok can read"):
        load_tokenizers([tmp_path / "notes.txt"])
    (tmp_path / "broken.json").write_text('{"vocab": [')
    with pytest.raises(FormatError, match="broken.json is not valid JSON"):
        load_tokenizers([tmp_path / "broken.json"])
    (tmp_path / "ranks.tiktoken").write_text("IQ== 0\nIg== 1\n")
    with pytest.raises(ConfigError, match="ranks.tiktoken is a tiktoken rank file.*--pattern"):
        load_tokenizers([tmp_path / "ranks.tiktoken"])
    (tmp_path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "added_tokens": [], "model": {"type": "CharLevel"}}))
    with pytest.raises(FormatError, match="tokenizer.json: model type 'CharLevel' is not supported"):
        load_tokenizers([tmp_path / "tokenizer.json"])


def test_every_file_format_loads_to_the_same_ids(tmp_path):
    text = (Path(__file__).parent / "data" / "handbook-en-US.txt").read_text()
    tokenizer = polytok.train(polytok.texts([text]), vocab_size=400, special_tokens=["<|endoftext|>"], progress=False)
    tokenizer.save(tmp_path / "tok.json")
    tokenizer.save_tiktoken(tmp_path / "cl100k_like")
    tokenizer.save_huggingface(tmp_path / "tokenizer.json")
    expected = tokenizer.encode_ordinary(text[:2000])
    loaded = [
        polytok.load(tmp_path / "tok.json"),
        polytok.load(tmp_path / "cl100k_like", pattern="cl100k", special_tokens=["<|endoftext|>"]),
        polytok.load(tmp_path / "tokenizer.json"),
    ]
    for other in loaded:
        assert other.encode_ordinary(text[:2000]) == expected
        assert other.special_tokens == tokenizer.special_tokens


def test_text_files_that_cannot_be_read(tmp_path):
    with pytest.raises(CorpusError, match="cannot read text file"):
        read_texts([tmp_path / "missing.txt"])
    (tmp_path / "latin1.txt").write_bytes("año".encode("latin-1"))
    with pytest.raises(CorpusError, match="latin1.txt is not UTF-8: invalid byte at offset 1"):
        read_texts([tmp_path / "latin1.txt"])
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one")
    (tmp_path / "x.txt").write_text("two")
    assert read_texts([tmp_path / "a" / "x.txt", tmp_path / "x.txt"]) == {"x": "one", str(tmp_path / "x.txt"): "two"}


def test_compare_and_evaluate_on_real_polytok_tokenizers(tmp_path):
    data = Path(__file__).parent / "data"
    english, spanish = (data / "handbook-en-US.txt").read_text(), (data / "handbook-es-ES.txt").read_text()
    tokenizers = {
        "bpe": polytok.train(polytok.texts([english, spanish]), vocab_size=800, progress=False),
        "unigram": polytok.train(polytok.texts([english, spanish]), algorithm="unigram", vocab_size=800, progress=False),
    }
    comparison = polytok.compare(tokenizers, {"en": english, "es": spanish})
    for row in comparison["rows"]:
        tokenizer, text = tokenizers[row["tokenizer"]], {"en": english, "es": spanish}[row["text"]]
        assert row["tokens"] == len(tokenizer.encode_ordinary(text))
        assert row["bytes_per_token"] == pytest.approx(len(text.encode()) / row["tokens"])
    english_tokens = {row["tokenizer"]: row["tokens"] for row in comparison["rows"] if row["text"] == "en"}
    for row in comparison["rows"]:
        assert row["tax"] == pytest.approx(row["tokens"] / english_tokens[row["tokenizer"]])
    saved = tmp_path / "bpe.json"
    tokenizers["bpe"].save(saved)
    metrics = polytok.evaluate(polytok.load(saved), [data / "handbook-fr-FR.txt"])
    french = (data / "handbook-fr-FR.txt").read_text()
    assert metrics["tokens"] == len(tokenizers["bpe"].encode_ordinary(french))
    assert metrics["bytes_per_token"] == pytest.approx(len(french.encode()) / metrics["tokens"])
