"""`polytok.extend(..., "unigram")`: EM over a Unigram base's fixed pieces and new candidates,
for a polytok Unigram and for SentencePiece Unigram models (checked against sentencepiece)."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent.parent))
from conftest import DATA  # noqa: E402

SPECIALS = {"<|endoftext|>": 580, "<|pad|>": 581}
ENGLISH = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")[:20_000]
# Training halves; the rest of each file is held out.
GERMAN = (DATA / "handbook-de-DE.txt").read_text(encoding="utf-8")[:18_000]
HELD_OUT = {name: (DATA / f"handbook-{name}.txt").read_text(encoding="utf-8")[start:]
            for name, start in (("de-DE", 18_000), ("fr-FR", 20_000))}

text_of_pieces = st.lists(
    st.one_of(st.sampled_from(["the", " package", " Debian", " file", "ing", " ", "\n", "é", "ß", "日本", "."]),
              st.sampled_from(list(SPECIALS)), st.text(max_size=5)),
    max_size=20,
).map("".join)


# ---- a polytok Unigram base -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def native():
    trained = polytok.train(polytok.texts([ENGLISH]), algorithm="unigram", vocab_size=580, progress=False)
    base = polytok.Tokenizer(trained.vocab, segmenter="viterbi", pattern=trained.pattern, special_tokens=SPECIALS,
                             scores=trained.scores, algorithm="unigram")
    return base, polytok.extend(base, polytok.texts([GERMAN]), 300, "unigram", progress=False)


def test_base_ids_scores_and_specials_stay_and_new_pieces_follow(native):
    base, extended = native
    assert len(base.vocab) == 580  # the specials follow the ordinary ids: new ids start at 582
    assert extended.vocab[: len(base.vocab)] == base.vocab
    assert extended.scores[: len(base.vocab)] == base.scores
    assert extended.special_tokens == SPECIALS and extended.pattern == base.pattern
    assert extended.vocab[580:582] == [b"", b""]  # the special ids: unused as ordinary ids
    new = extended.vocab[582:]
    assert len(new) == 300 == extended.training["extended"]["new_tokens"]
    assert not set(new) & set(base.vocab) and len(set(new)) == len(new)
    assert all(token in GERMAN.encode("utf-8") for token in new)
    assert extended.training["extended"]["first_new_id"] == 582


def test_the_extension_compresses_the_new_language(native):
    base, extended = native
    before, after = (len(tok.encode_ordinary(HELD_OUT["de-DE"])) for tok in native)
    assert after < 0.85 * before
    assert max(extended.encode_ordinary(HELD_OUT["de-DE"])) >= 582


@settings(max_examples=150, deadline=None)
@given(text=text_of_pieces)
def test_text_without_new_pieces_encodes_as_the_base(native, text):
    base, extended = native
    after = extended.encode(text, allowed_special="all")
    data = text.encode("utf-8", "surrogatepass")
    if not any(token in data for token in extended.vocab[582:]):
        assert after == base.encode(text, allowed_special="all")
    assert extended.decode(after) == text


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_bytes_round_trip(native, data):
    _, extended = native
    assert extended.decode_bytes(extended.encode(data, disallowed_special=())) == data


def test_saved_files_keep_the_ids(native, tmp_path):
    _, extended = native
    extended.save(tmp_path / "x.json")
    extended.save_huggingface(tmp_path / "x-hf.json")
    again = polytok.load(tmp_path / "x-hf.json")
    assert isinstance(again, polytok.Tokenizer) and again.special_tokens == SPECIALS
    for name, text in HELD_OUT.items():
        ids = extended.encode_ordinary(text)
        assert polytok.load(tmp_path / "x.json").encode_ordinary(text) == ids, name
        assert again.encode_ordinary(text) == ids, name


def test_huggingface_reads_the_extension_with_the_same_ids(native, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    _, extended = native
    extended.save_huggingface(tmp_path / "x-hf.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "x-hf.json"))
    for name, text in HELD_OUT.items():
        assert theirs.encode(text, add_special_tokens=False).ids == extended.encode_ordinary(text), name
    mixed = "Paket<|pad|>Datei<|endoftext|>"
    assert theirs.encode(mixed, add_special_tokens=False).ids == extended.encode(mixed, allowed_special="all")
    # an id that is neither a token nor a special has no place in HF's Unigram list
    gapped = polytok.Tokenizer(extended.vocab, segmenter="viterbi", pattern=extended.pattern,
                               special_tokens={"<|pad|>": 581}, scores=extended.scores)
    with pytest.raises(ConfigError, match="id 580 is no token"):
        gapped.save_huggingface(tmp_path / "gapped.json")


# ---- a SentencePiece Unigram base -------------------------------------------------------------------

def sentencepiece_base(tmp_path: Path, byte_fallback: bool) -> Path:
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(ENGLISH.splitlines()), model_writer=model, vocab_size=700,
                                   model_type="unigram", byte_fallback=byte_fallback, minloglevel=2, num_threads=1)
    path = tmp_path / f"base-{byte_fallback}.model"
    path.write_bytes(model.getvalue())
    return path


@pytest.fixture(scope="module", params=[True, False], ids=["byte-fallback", "no-fallback"])
def sentencepiece_pair(request, tmp_path_factory):
    spm = pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("sp")
    path = sentencepiece_base(folder, request.param)
    extended = polytok.extend(path, polytok.texts(GERMAN.splitlines()), 250, "unigram", progress=False,
                              add_missing_bytes=not request.param)
    extended.save_sentencepiece(folder / "extended.model")
    return (spm.SentencePieceProcessor(model_file=str(path)), spm.SentencePieceProcessor(model_file=str(folder / "extended.model")),
            extended, request.param)


def test_sentencepiece_keeps_every_piece_and_reads_the_new_ones(sentencepiece_pair):
    base, theirs, extended, byte_fallback = sentencepiece_pair
    size = base.get_piece_size()
    assert [theirs.id_to_piece(i) for i in range(size)] == [base.id_to_piece(i) for i in range(size)]
    assert [theirs.get_score(i) for i in range(size)] == [base.get_score(i) for i in range(size)]
    first = size if byte_fallback else size + 256
    if not byte_fallback:  # the byte pieces come first, and byte fallback is on
        assert [theirs.id_to_piece(i) for i in range(size, first)] == [f"<0x{b:02X}>" for b in range(256)]
        assert all(theirs.is_byte(i) for i in range(size, first))
    assert theirs.get_piece_size() == first + 250 == extended.n_vocab
    assert min(theirs.get_score(i) for i in range(first, first + 250)) >= min(
        base.get_score(i) for i in range(size) if not (base.is_control(i) or base.is_unknown(i) or base.is_byte(i)))


def test_sentencepiece_gives_polytoks_ids_and_compresses(sentencepiece_pair):
    base, theirs, extended, _ = sentencepiece_pair
    for name, text in HELD_OUT.items():
        lines = text.splitlines()
        assert theirs.encode(lines) == extended.encode_batch(lines), name
    german = HELD_OUT["de-DE"].splitlines()
    assert sum(map(len, theirs.encode(german))) < 0.85 * sum(map(len, base.encode(german)))


@settings(max_examples=80, deadline=None)
@given(text=text_of_pieces)
def test_sentencepiece_text_without_new_pieces_encodes_as_the_base(sentencepiece_pair, text):
    base, theirs, extended, byte_fallback = sentencepiece_pair
    ids = theirs.encode(text)
    assert extended.encode(text) == ids
    first = base.get_piece_size() + (0 if byte_fallback else 256)
    normalized = extended.pipeline.normalizer_core.normalize([text])[0]
    new = [theirs.id_to_piece(i).encode("utf-8") for i in range(first, theirs.get_piece_size())]
    if byte_fallback and not any(piece in normalized for piece in new):
        assert ids == base.encode(text)
    if not byte_fallback:  # every character is spelled now: nothing becomes <unk>
        assert theirs.unk_id() not in ids


def test_sentencepiece_refusals(tmp_path):
    path = sentencepiece_base(tmp_path, False)
    with pytest.raises(ConfigError, match="no byte fallback.*add_missing_bytes=True"):
        polytok.extend(path, polytok.texts([GERMAN]), 10, "unigram", progress=False)
    counts = polytok.count(polytok.texts([GERMAN]), progress=False)
    with pytest.raises(ConfigError, match="through its pipeline, counted with"):
        polytok.extend(path, counts, 10, "unigram", progress=False, add_missing_bytes=True)
    with pytest.raises(ConfigError, match="keeps its file's own pipeline"):
        polytok.extend(path, polytok.texts([GERMAN]), 10, "bpe", progress=False)


def test_cli_extends_a_sentencepiece_model(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    path = sentencepiece_base(tmp_path, True)
    (tmp_path / "de.txt").write_text(GERMAN, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "polytok.cli", "-q", "extend", "-t", str(path), str(tmp_path / "de.txt"),
                           "-k", "60", "-a", "unigram", "-o", str(tmp_path / "out.model")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert spm.SentencePieceProcessor(model_file=str(tmp_path / "out.model")).get_piece_size() == 760


# ---- bad input ----------------------------------------------------------------------------------------

def test_unigram_extension_needs_a_unigram_base(native):
    bpe = polytok.train(polytok.texts([ENGLISH]), vocab_size=400, progress=False)
    with pytest.raises(ConfigError, match="needs a Unigram base.*'merges'"):
        polytok.extend(bpe, polytok.texts([GERMAN]), 10, "unigram", progress=False)
    base, _ = native
    with pytest.raises(ConfigError, match="shrinking_factor"):
        polytok.extend(base, polytok.texts([GERMAN]), 10, "unigram", shrinking_factor=1.5, progress=False)
    other = PreTokenCounts.from_dict({b"abc": 3}, pattern="gpt2")
    with pytest.raises(ConfigError, match="counted with pattern"):
        polytok.extend(base, other, 10, "unigram", progress=False)
    with pytest.raises(ConfigError, match="needs a Unigram base.*'char_merges'"):
        polytok.extend(DATA / "readers" / "hf-bpe-llama.json", polytok.texts([GERMAN]), 10, "unigram", progress=False)
