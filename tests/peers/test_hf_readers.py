"""Reading HF tokenizer.json files: models trained here with `tokenizers` (BPE byte-level and
char-level with byte fallback, WordPiece, Unigram) and their normalisers, pre-tokenisers,
decoders and added tokens load in polytok and give the ids and decoded text `tokenizers` gives,
on held-out text and on arbitrary text; unsupported or corrupt files give a clear FormatError."""
from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from excerpts import train_and_held_out_lines
from polytok.errors import EncodeError, FormatError

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers  # noqa: E402
from tokenizers import normalizers as hf_normalizers  # noqa: E402

SPECIALS = ["<unk>", "<s>", "</s>", "<mask>"]
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]


TRAIN, HELD_OUT = train_and_held_out_lines()


def _bpe_byte_level(add_prefix_space: bool = False, normalizer=None, digits: bool = False):
    hf = tokenizers.Tokenizer(models.BPE())
    if normalizer is not None:
        hf.normalizer = normalizer
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]) if digits else byte_level
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(
        vocab_size=1200, special_tokens=["<|endoftext|>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return hf


def _llama2():
    """Llama 2's layout: no pre-tokeniser, "▁" for spaces by normalisers, byte fallback."""
    hf = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    hf.normalizer = hf_normalizers.Sequence([hf_normalizers.Prepend("▁"), hf_normalizers.Replace(" ", "▁")])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=1200, special_tokens=SPECIALS[:3] + BYTE_TOKENS, show_progress=False))
    return hf


def _metaspace_bpe():
    hf = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    hf.normalizer = hf_normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    hf.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(prepend_scheme="first")])
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=900, special_tokens=SPECIALS + BYTE_TOKENS[:128],
                                                      limit_alphabet=150, show_progress=False))
    return hf


def _wordpiece():
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    hf.normalizer = hf_normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.train_from_iterator(TRAIN, trainers.WordPieceTrainer(vocab_size=1200, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                                            limit_alphabet=300, show_progress=False))
    return hf


def _unigram():
    hf = tokenizers.Tokenizer(models.Unigram())
    hf.normalizer = hf_normalizers.Sequence([hf_normalizers.NFKC(), hf_normalizers.Replace(Regex(" {2,}"), " ")])
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=1000, special_tokens=SPECIALS[:3], unk_token="<unk>", show_progress=False))
    return hf


def _unigram_whitespace():
    hf = tokenizers.Tokenizer(models.Unigram())
    hf.normalizer = hf_normalizers.Lowercase()
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=False)])
    hf.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=800, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False))
    return hf


def _llama3_style(record) -> None:
    """Llama 3's layout: a Split regex before a regex-free ByteLevel, and whole-word tokens taken
    before any merge (ignore_merges)."""
    record["model"]["ignore_merges"] = True
    record["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def _wordpiece_punctuation():
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("merged_with_previous")])
    hf.decoder = decoders.WordPiece(cleanup=False)
    hf.train_from_iterator(TRAIN, trainers.WordPieceTrainer(vocab_size=900, special_tokens=["[UNK]"], show_progress=False))
    return hf


def _with_added_tokens(hf):
    hf.add_special_tokens([AddedToken("<mask>", lstrip=True), AddedToken("[SEP]", rstrip=True)])
    hf.add_tokens([AddedToken("New York", normalized=True), AddedToken("ÅÅ", normalized=False)])
    return hf


def _edit(hf, path: Path, edit) -> None:
    record = json.loads(hf.to_str())
    edit(record)
    path.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")


def _unigram_byte_fallback(record) -> None:
    """Unigram with byte fallback: the 256 byte tokens appended to the vocabulary."""
    record["model"]["byte_fallback"] = True
    record["model"]["vocab"] += [[token, 0.0] for token in BYTE_TOKENS]
    record["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, record["decoder"]]}


def _precompiled_charsmap(tmp: Path) -> str:
    """SentencePiece's nmt_nfkc charsmap (base64), from a model trained here."""
    from polytok.formats.sentencepiece import read_model

    (tmp / "train.txt").write_text("\n".join(TRAIN[:400]), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp / "train.txt"), model_prefix=str(tmp / "nfkc"), vocab_size=300,
                                   normalization_rule_name="nmt_nfkc", minloglevel=2)
    spec = read_model((tmp / "nfkc.model").read_bytes(), "charsmap")
    return base64.b64encode(spec["precompiled_charsmap"]).decode("ascii")


def _precompiled(charsmap: str):
    def edit(record) -> None:
        record["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    return edit


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, tuple[object, polytok.Tokenizer]]:
    """name -> (HF tokenizer loaded from the file, polytok loading the same file)."""
    tmp = tmp_path_factory.mktemp("hf")
    charsmap = _precompiled_charsmap(tmp)
    builders = {
        "byte-level-bpe": lambda path: _bpe_byte_level().save(str(path)),
        "byte-level-prefix-nfc": lambda path: _with_added_tokens(
            _bpe_byte_level(add_prefix_space=True, normalizer=hf_normalizers.NFC())).save(str(path)),
        "byte-level-digits": lambda path: _bpe_byte_level(digits=True).save(str(path)),
        "llama3-style-bpe": lambda path: _edit(_bpe_byte_level(), path, _llama3_style),
        "llama2-bpe": lambda path: _llama2().save(str(path)),
        "metaspace-bpe": lambda path: _with_added_tokens(_metaspace_bpe()).save(str(path)),
        "wordpiece": lambda path: _with_added_tokens(_wordpiece()).save(str(path)),
        "wordpiece-punctuation": lambda path: _wordpiece_punctuation().save(str(path)),
        "unigram": lambda path: _unigram().save(str(path)),
        "unigram-byte-fallback": lambda path: _edit(_unigram(), path, _unigram_byte_fallback),
        "unigram-whitespace": lambda path: _unigram_whitespace().save(str(path)),
        "unigram-precompiled": lambda path: _edit(_unigram(), path, _precompiled(charsmap)),
    }
    out = {}
    for name, build in builders.items():
        path = tmp / f"{name}.json"
        build(path)
        out[name] = (tokenizers.Tokenizer.from_file(str(path)), polytok.load(path))
    return out


NAMES = ["byte-level-bpe", "byte-level-prefix-nfc", "byte-level-digits", "llama3-style-bpe", "llama2-bpe", "metaspace-bpe",
         "wordpiece", "wordpiece-punctuation", "unigram", "unigram-byte-fallback", "unigram-whitespace", "unigram-precompiled"]

HOSTILE = [
    "", " ", "  ", "\n\n", "Hello  World!!", "  leading and trailing  ", "<s>", "</s>x<s>", "<unk>", "<mask>", " <mask> x",
    "a [SEP]  b", "New York", "new york", "ÅÅ", "ＡＢＣ①ﬁ", "e\u0301", "中文字符", "🙂🙂 👩‍👩‍👧", "x" * 40, "1234567890",
    "don't stop", "\u00a0\u2003\t", "\x00\x01\x7f", "▁▁", "<0x41>", "ΑΣ ΌΣΟΣ", "İstanbul",
]


def _ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", NAMES)
def test_ids_and_text_equal_hf_on_held_out_text(pairs, name):
    hf, ours = pairs[name]
    texts = HELD_OUT[::3] + HOSTILE + ["\n".join(HELD_OUT[:200])]
    for text in texts:
        expected = _ids(hf, text)
        assert ours.encode(text, allowed_special="all") == expected, text
        assert ours.decode(expected) == hf.decode(expected, skip_special_tokens=False), text


def test_byte_level_bpe_takes_the_native_path(pairs, tmp_path):
    """A byte-level BPE file without normaliser runs polytok's own pre-tokeniser and merges
    segmenter, and writes back unchanged."""
    hf, ours = pairs["byte-level-bpe"]
    assert ours.segmenter == "merges" and ours.pattern is not None
    assert ours.info()["lossy"] == []
    ours.save_huggingface(tmp_path / "again.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    text = "\n".join(HELD_OUT[:100])
    assert _ids(again, text) == _ids(hf, text) == ours.encode(text, allowed_special="all")
    assert ours.encode_batch([text, "<|endoftext|>"], allowed_special="all") == [_ids(hf, text), _ids(hf, "<|endoftext|>")]


def test_wordpiece_keeps_its_unknown_words_and_says_so(pairs):
    hf, ours = pairs["wordpiece"]
    unk = ours.token_id("[UNK]")
    too_long = "a" * 31  # max_input_chars_per_word is 30
    assert ours.encode(too_long, allowed_special="all") == _ids(hf, too_long) == [unk]
    assert ours.encode("a" * 30, allowed_special="all") == _ids(hf, "a" * 30) != [unk]
    info = ours.info()
    assert info["loaded_from"] == "HF tokenizer.json"
    assert any("[UNK]" in line for line in info["lossy"]) and any("BertNormalizer" in line for line in info["lossy"])
    assert ours.continuation_marker == "##"


def _stable_across_unicode_versions(char: str) -> bool:
    """False for the characters where HF's Unicode tables (older than Python's) can disagree with
    Python's in BERT's steps: combining marks (canonical order, accent stripping), format
    characters, and punctuation and symbols outside Latin-1 and the General and CJK punctuation
    blocks (BERT's splits). The normal forms and Lowercase follow tokenizers' tables."""
    category = unicodedata.category(char)
    if category[0] == "M" or category == "Cf":
        return False
    code = ord(char)
    # (symbols too: a few were punctuation in older Unicode versions, e.g. U+166D)
    return category[0] not in "PS" or code < 0x100 or 0x2000 <= code <= 0x206F or 0x3000 <= code <= 0x303F


ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn", "Co")).filter(_stable_across_unicode_versions)


def _version_sensitive_texts() -> list[str]:
    """Every character whose normal form, lower case or BERT cleaning or accent stripping
    differs between tokenizers' Unicode tables and Python's, alone and among letters, accents,
    characters that compose and characters BERT cleans."""
    from polytok.formats.huggingface.unicode_tables import OVERRIDES

    texts = []
    for char in sorted({char for table in OVERRIDES.values() for char in table}):
        texts += [char, "a" + char + "B", "e\u0301" + char + "\u0301\u0323", char + "\u0301", "Ä" + char * 2 + "ﬁ",
                  "\u1100" + char + "\u1161", "\x00\t" + char + "中\u200b"]
    return texts


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "BertNormalizer", "BertNormalizer-cased"])
def test_normalisers_follow_tokenizers_unicode_tables(form):
    """Python's Unicode 14 tables and tokenizers' (older normal forms and categories, newer
    case) disagree on about 700 characters, e.g. U+10781 under NFKC and new combining marks
    under BERT's accent stripping; polytok's copies give tokenizers' forms."""
    from polytok.formats.huggingface import normalizers

    if form == "BertNormalizer":
        theirs, ours = hf_normalizers.BertNormalizer(), normalizers.bert(True, True, None, True)
    elif form == "BertNormalizer-cased":
        theirs = hf_normalizers.BertNormalizer(lowercase=False, strip_accents=True)
        ours = normalizers.bert(True, True, True, False)
    else:
        theirs = getattr(hf_normalizers, form)()
        ours = normalizers.lowercase if form == "Lowercase" else normalizers.unicode_form(form)
    texts = _version_sensitive_texts()
    assert len(texts) > 7 * 600
    for text in texts:
        assert ours(text) == theirs.normalize_str(text), ascii(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from(sorted(set("".join(_version_sensitive_texts())) | set("aÉ ΣﬁK"))), max_size=12),
       name=st.sampled_from(["metaspace-bpe", "unigram"]))
def test_ids_equal_hf_on_characters_the_unicode_versions_disagree_on(pairs, text, name):
    """The NFKC files whose pre-tokeniser (Metaspace) reads no character classes: with those,
    the normaliser is the only stage where the Unicode versions meet."""
    hf, ours = pairs[name]
    assert ours.encode(text, allowed_special="all") == _ids(hf, text)


@settings(max_examples=250, deadline=None)
@given(text=st.text(ALPHABET, max_size=40) | st.lists(st.sampled_from(HOSTILE + ["the", " of", ".", "\n"]), max_size=8).map("".join),
       name=st.sampled_from(NAMES))
def test_ids_and_text_equal_hf_on_arbitrary_text(pairs, text, name):
    hf, ours = pairs[name]
    expected = _ids(hf, text)
    assert ours.encode(text, allowed_special="all") == expected
    assert ours.decode(expected) == hf.decode(expected, skip_special_tokens=False)


# Batches mix str and UTF-8 bytes, empty texts, the files' added and special tokens (with their
# lstrip/rstrip), and lone surrogates (which `tokenizers` refuses, and so does a loaded file).
BATCH = st.lists(
    st.text(ALPHABET, max_size=30)
    | st.lists(st.sampled_from(HOSTILE + ["the", " of", "<|endoftext|>", "<pad>", "[SEP]"]), max_size=6).map("".join)
    | st.sampled_from(["", "\ud800", "a\udfff <mask>"]),
    max_size=8,
)


def _has_surrogates(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


@settings(max_examples=200, deadline=None)
@given(texts=BATCH, name=st.sampled_from(NAMES))
def test_encode_batch_equals_encode_and_hf_whatever_the_threads(pairs, texts, name):
    hf, ours = pairs[name]
    if any(_has_surrogates(text) for text in texts):
        # tokenizers cannot take a lone surrogate (Rust strings), and neither can its pipeline here.
        for threads in (1, 2):
            with pytest.raises(EncodeError, match="lone surrogate"):
                ours.encode_batch(texts, num_threads=threads, allowed_special="all")
        texts = [text for text in texts if not _has_surrogates(text)]
    given_texts = [text.encode("utf-8") if index % 2 else text for index, text in enumerate(texts)]
    expected = [ours.encode(text, allowed_special="all") for text in given_texts]
    for threads in (1, 2, None):
        assert ours.encode_batch(given_texts, num_threads=threads, allowed_special="all") == expected
    assert expected == [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize("name", ["byte-level-prefix-nfc", "wordpiece", "unigram-precompiled"])
def test_counts_and_histograms_of_a_loaded_file_follow_its_pipeline(pairs, name):
    """count_tokens, encode_ordinary_batch, token_histogram (and so `evaluate`) go through the
    file's normaliser and pre-tokeniser like encode: the core alone would count other ids."""
    import numpy as np

    hf, ours = pairs[name]
    texts = HELD_OUT[:60] + ["Ünïcödé ½ ＡＢＣ ﬁ", "  spaced   out  ", ""]
    expected = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    assert ours.encode_ordinary_batch(texts, num_threads=2) == expected
    assert ours.count_tokens(texts, num_threads=2, allowed_special="all").tolist() == [len(ids) for ids in expected]
    histogram = ours.token_histogram(texts, num_threads=2)
    assert histogram.tolist() == np.bincount([i for ids in expected for i in ids], minlength=ours.vocab_size).tolist()
    assert polytok.evaluate(ours, polytok.texts(texts), progress=False)["tokens"] == sum(map(len, expected))


@pytest.mark.parametrize("name", ["byte-level-prefix-nfc", "llama2-bpe", "wordpiece", "unigram-precompiled"])
def test_encode_batch_of_many_documents_equals_hf_batch(pairs, name):
    hf, ours = pairs[name]
    documents = ["\n".join(HELD_OUT[start : start + 20]) for start in range(0, len(HELD_OUT), 20)] + HOSTILE
    expected = [encoding.ids for encoding in hf.encode_batch(documents, add_special_tokens=False)]
    assert ours.encode_batch(documents, num_threads=2, allowed_special="all") == expected
    assert ours.encode_batch(documents, num_threads=1, allowed_special="all") == expected


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r.__setitem__("normalizer", {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}, {"type": "StripAccents"}]}),
     r"normalizer.normalizers\[2\] type 'StripAccents' is not supported"),
    (lambda r: r.__setitem__("pre_tokenizer", {"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}),
     r"pre_tokenizer.pretokenizers\[0\] type 'UnicodeScripts' is not supported"),
    (lambda r: r.__setitem__("decoder", {"type": "CTC"}), "decoder type 'CTC' is not supported"),
    (lambda r: r["model"].__setitem__("type", "WordLevel"), "model type 'WordLevel' is not supported"),
    (lambda r: r["model"].__setitem__("dropout", 0.1), "dropout"),
    (lambda r: r["model"].__setitem__("continuing_subword_prefix", "##"), "continuing_subword_prefix"),
    (lambda r: r["model"]["merges"].__setitem__(5, ["zzzq", "qq"]), r"model.merges\[5\]"),
    (lambda r: r["model"].__setitem__("vocab", [1, 2]), "model.vocab is not an object"),
    (lambda r: r["added_tokens"].append({"id": 5000, "content": "x", "single_word": True}), "single_word"),
    (lambda r: r.__setitem__("truncation", {"max_length": 5}), "truncation"),
    (lambda r: r["pre_tokenizer"].__setitem__("behavior", "Sideways"), "behaviour"),
])
def test_unsupported_and_corrupt_files_name_the_component(pairs, tmp_path, edit, message):
    hf, _ = pairs["llama2-bpe"]
    record = json.loads(hf.to_str())
    record["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False}
    edit(record)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(FormatError, match=message):
        polytok.load_huggingface(path)


def test_truncated_file_is_a_format_error(pairs, tmp_path):
    hf, _ = pairs["unigram"]
    path = tmp_path / "tokenizer.json"
    path.write_text(hf.to_str()[:5000], encoding="utf-8")
    with pytest.raises(FormatError, match="not valid JSON"):
        polytok.load(path)


def test_split_behaviours_match_hf(tmp_path):
    """Every Split behaviour, inverted or not, on a small hand-made BPE vocabulary of characters."""
    text = "a--b-c---d  e-"
    vocab = {char: index for index, char in enumerate([*sorted(set(text)), "--"])}
    for behavior in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
        for invert in [False, True]:
            hf = tokenizers.Tokenizer(models.BPE(vocab=dict(vocab), merges=[("-", "-")]))
            hf.pre_tokenizer = pre_tokenizers.Split("-", behavior=behavior, invert=invert)
            path = tmp_path / f"{behavior}-{invert}.json"
            hf.save(str(path))
            ours = polytok.load_huggingface(path)
            for sample in [text, "-", "--", "ab", "", "-a-"]:
                assert ours.encode(sample, allowed_special="all") == _ids(hf, sample), (behavior, invert, sample)


def test_unigram_ties_break_as_tokenizers_reads_the_scores(tmp_path):
    """Two paths with the same true score: `tokenizers` reads "-9.462819049094321" one unit in the
    last place off, which makes "▁shell" + "..." + "." the better path; polytok reads it the same way."""
    vocab = [("<unk>", 0.0), ("▁shell", -9.462819049094321), (".", -4.100368400388165), ("...", -8.995261328576337)]
    hf = tokenizers.Tokenizer(models.Unigram(vocab, 0, False))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    from_file = tokenizers.Tokenizer.from_file(str(path))
    assert from_file.encode("shell....").tokens == ["▁shell", "...", "."]
    assert polytok.load(path).encode("shell....", allowed_special="all") == from_file.encode("shell....").ids


def test_tokenizer_methods_on_a_loaded_file(pairs, tmp_path):
    """The Tokenizer API works the same on a loaded pipeline; what its format cannot hold is refused."""
    from polytok.errors import ConfigError, DecodeError, EncodeError

    hf, ours = pairs["llama2-bpe"]
    texts = HELD_OUT[:20] + ["<s>x</s>", ""]
    expected = [_ids(hf, text) for text in texts]
    assert ours.encode_batch(texts, allowed_special="all") == expected
    assert [list(ours.encode_to_numpy(text, allowed_special="all")) for text in texts] == expected
    assert list(ours.count_tokens(texts, allowed_special="all")) == [len(ids) for ids in expected]
    assert ours.encode(texts[0].encode("utf-8"), allowed_special="all") == expected[0]
    assert ours.decode_bytes(expected[0]) == b"".join(ours.vocab[token_id] for token_id in expected[0])
    with pytest.raises(EncodeError, match="not UTF-8"):
        ours.encode(b"\xff\xfe", allowed_special="all")
    with pytest.raises(DecodeError):
        ours.decode([ours.vocab_size + 5])
    with pytest.raises(ConfigError, match="HF tokenizer.json"):
        ours.save(tmp_path / "polytok.json")
