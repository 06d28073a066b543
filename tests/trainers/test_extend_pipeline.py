"""`polytok.extend(..., "bpe")` of a BPE that keeps its file's pipeline: a Llama-style HF
tokenizer.json (normaliser, byte fallback), a byte-level one behind a normaliser, and
SentencePiece BPE models; each extension read back by its own library with polytok's ids."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError
from polytok.formats.huggingface.pre_tokenizers import to_byte_level
from polytok.formats.loaded import LoadedTokenizer

sys.path.insert(0, str(Path(__file__).parent.parent))
from conftest import DATA  # noqa: E402
from excerpts import extension_texts  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")

# Training parts of three excerpts, and held-out rests.
ENGLISH, GERMAN, CHINESE, HELD_OUT = extension_texts("fr-FR")
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]

mixed_text = st.lists(
    st.one_of(st.sampled_from([" the", " package", " Paket", "ung", " ", "  ", "\n", "é", "ß", "软件", "包", "。"]),
              st.text(max_size=5)),
    max_size=20,
).map("".join)


def llama_style(path: Path) -> Path:
    """Llama 2's layout, trained on English: "▁" for spaces by normalisers, byte fallback."""
    from tokenizers import decoders, models, normalizers, trainers

    hf = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    hf.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.train_from_iterator(ENGLISH, trainers.BpeTrainer(vocab_size=1200, special_tokens=["<unk>", "<s>", "</s>", *BYTE_TOKENS],
                                                        show_progress=False))
    record = json.loads(hf.to_str())
    record["added_tokens"] = record["added_tokens"][:3]  # the byte tokens are vocabulary, as in Llama's file
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    base_file = llama_style(folder / "base.json")
    extended = polytok.extend(base_file, polytok.texts(GERMAN + CHINESE), 400, progress=False)
    extended.save_huggingface(folder / "extended.json")
    return (tokenizers.Tokenizer.from_file(str(base_file)), tokenizers.Tokenizer.from_file(str(folder / "extended.json")),
            extended, folder)


def ids(hf, lines: list[str]) -> list[list[int]]:
    return [encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)]


def test_llama_style_keeps_every_id_and_adds_characters_then_merges(llama):
    base, theirs, extended, _ = llama
    base_vocab, vocab = base.get_vocab(), theirs.get_vocab()
    assert all(vocab[text] == token_id for text, token_id in base_vocab.items())
    new = sorted((token_id, text) for text, token_id in vocab.items() if text not in base_vocab)
    assert [token_id for token_id, _ in new] == list(range(1200, 1600)) and extended.n_vocab == 1600
    # the characters the base spelled in bytes come first (Chinese ones among them), then merges
    characters = [text for _, text in new if len(text) == 1]
    assert "的" in characters and [text for _, text in new[:len(characters)]] == characters
    assert len(characters) == 200 and all(len(text) > 1 for _, text in new[len(characters):])  # at most half


def test_tokenizers_gives_polytoks_ids_and_the_extension_compresses(llama):
    base, theirs, extended, _ = llama
    for name, lines in HELD_OUT.items():
        assert ids(theirs, lines) == extended.encode_batch(lines), name
    for name, most in (("de-DE", 0.95), ("zh-CN", 0.9)):
        before, after = (sum(map(len, ids(hf, HELD_OUT[name]))) for hf in (base, theirs))
        assert after < most * before, name


@settings(max_examples=120, deadline=None)
@given(text=mixed_text)
def test_text_without_new_tokens_encodes_as_the_base(llama, text):
    base, theirs, extended, _ = llama
    after = theirs.encode(text, add_special_tokens=False).ids
    assert extended.encode(text) == after
    if all(token_id < 1200 for token_id in after):
        assert after == base.encode(text, add_special_tokens=False).ids


def test_byte_level_file_behind_a_normaliser(tmp_path):
    base_file = DATA / "readers" / "hf-bpe-byte-level-nfc.json"
    base = polytok.load(base_file)
    assert isinstance(base, LoadedTokenizer)
    extended = polytok.extend(base, polytok.texts(GERMAN), 150, progress=False)
    extended.save_huggingface(tmp_path / "x.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "x.json"))
    assert theirs.get_vocab_size() == base.n_vocab + 150
    for name, lines in HELD_OUT.items():
        assert ids(theirs, lines) == extended.encode_batch(lines), name


def test_byte_level_file_with_an_unknown_token_needs_no_byte_pieces(tmp_path):
    # Every byte is a token of a byte-level vocabulary, so its unknown token is never used: no refusal,
    # and no byte pieces added.
    record = json.loads((DATA / "readers" / "hf-bpe-byte-level-nfc.json").read_text(encoding="utf-8"))
    record["model"]["unk_token"] = record["model"].get("unk_token") or next(iter(record["model"]["vocab"]))
    (tmp_path / "base.json").write_text(json.dumps(record), encoding="utf-8")
    base = polytok.load(tmp_path / "base.json")
    extended = polytok.extend(base, polytok.texts(GERMAN), 150, progress=False)
    assert extended.n_vocab == base.n_vocab + 150
    extended.save_huggingface(tmp_path / "x.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "x.json"))
    for name, lines in HELD_OUT.items():
        assert ids(theirs, lines) == extended.encode_batch(lines), name
    # Without every byte in the vocabulary, the unknown token is reachable and the base is refused.
    vocab = record["model"]["vocab"]
    vocab["<unused>"] = vocab.pop(to_byte_level(b"\xff"))
    (tmp_path / "short.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ConfigError, match="no byte fallback"):
        polytok.extend(polytok.load(tmp_path / "short.json"), polytok.texts(GERMAN), 10, progress=False)


# ---- SentencePiece BPE --------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=[True, False], ids=["byte-fallback", "no-fallback"])
def sentencepiece_bpe(request, tmp_path_factory):
    spm = pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("spbpe")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(ENGLISH), model_writer=model, vocab_size=900, model_type="bpe",
                                   byte_fallback=request.param, minloglevel=2, num_threads=1)
    (folder / "base.model").write_bytes(model.getvalue())
    extended = polytok.extend(folder / "base.model", polytok.texts(CHINESE + GERMAN), 300, progress=False,
                              add_missing_bytes=not request.param)
    extended.save_sentencepiece(folder / "extended.model")
    return (spm.SentencePieceProcessor(model_file=str(folder / "base.model")),
            spm.SentencePieceProcessor(model_file=str(folder / "extended.model")), extended, request.param)


def test_sentencepiece_bpe_keeps_every_piece_and_gives_polytoks_ids(sentencepiece_bpe):
    base, theirs, extended, byte_fallback = sentencepiece_bpe
    size = base.get_piece_size()
    assert [theirs.id_to_piece(i) for i in range(size)] == [base.id_to_piece(i) for i in range(size)]
    first = size + (0 if byte_fallback else 256)
    assert theirs.get_piece_size() == first + 300 == extended.n_vocab
    lowest = min(base.get_score(i) for i in range(size) if not (base.is_control(i) or base.is_unknown(i) or base.is_byte(i)))
    scores = [theirs.get_score(i) for i in range(first, first + 300)]
    assert all(score < lowest for score in scores) and scores == sorted(scores, reverse=True)
    for name, lines in HELD_OUT.items():
        assert theirs.encode(lines) == extended.encode_batch(lines), name
    if byte_fallback:
        chinese = HELD_OUT["zh-CN"]
        assert sum(map(len, theirs.encode(chinese))) < 0.9 * sum(map(len, base.encode(chinese)))


@settings(max_examples=80, deadline=None)
@given(text=mixed_text)
def test_sentencepiece_bpe_text_without_new_pieces_encodes_as_the_base(sentencepiece_bpe, text):
    base, theirs, extended, byte_fallback = sentencepiece_bpe
    after = theirs.encode(text)
    assert extended.encode(text) == after
    if byte_fallback and all(i < base.get_piece_size() for i in after):
        assert after == base.encode(text)
    if not byte_fallback:
        assert theirs.unk_id() not in after


# ---- bad input and the command line -------------------------------------------------------------------

def test_refusals(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(ENGLISH), model_writer=model, vocab_size=600, model_type="bpe",
                                   minloglevel=2, num_threads=1)
    (tmp_path / "base.model").write_bytes(model.getvalue())
    with pytest.raises(ConfigError, match="no byte fallback.*add_missing_bytes=True"):
        polytok.extend(tmp_path / "base.model", polytok.texts(GERMAN), 10, progress=False)
    counts = polytok.count(polytok.texts(GERMAN), progress=False)
    with pytest.raises(ConfigError, match="counted with pattern"):
        polytok.extend(tmp_path / "base.model", counts, 10, progress=False, add_missing_bytes=True)
    with pytest.raises(ConfigError, match="character_coverage"):
        polytok.extend(tmp_path / "base.model", polytok.texts(GERMAN), 10, character_coverage=0.0, progress=False)
    with pytest.raises(ConfigError, match="'convex' cannot extend"):
        polytok.extend(tmp_path / "base.model", polytok.texts(GERMAN), 10, "convex", progress=False)


def test_cli_extends_a_huggingface_file_in_its_own_format(tmp_path):
    base_file = llama_style(tmp_path / "base.json")
    (tmp_path / "de.txt").write_text("\n".join(GERMAN), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "polytok.cli", "-q", "extend", "-t", str(base_file), str(tmp_path / "de.txt"),
                           "-k", "50", "-o", str(tmp_path / "out.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "out.json")).get_vocab_size() == 1250
    refused = subprocess.run([sys.executable, "-m", "polytok.cli", "-q", "extend", "-t", str(base_file),
                              str(tmp_path / "de.txt"), "-k", "50", "-o", str(tmp_path / "bad.json"), "--format", "polytok"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "saves as --format huggingface only" in refused.stderr
    assert not (tmp_path / "bad.json").exists()
