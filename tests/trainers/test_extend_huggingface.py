"""`polytok.extend` of HF tokenizer.json files that turn unknown characters into an unknown
token: a T5/ALBERT-style Unigram (NFKC or Precompiled normaliser, Metaspace, added tokens after
model.vocab) extended by "unigram", and a BPE with an unknown token extended by "bpe", both
given the 256 byte pieces by add_missing_bytes; each read back by `tokenizers` with polytok's ids."""
from __future__ import annotations

import json
import subprocess
import sys
from itertools import chain
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent.parent))
from conftest import DATA  # noqa: E402
from excerpts import extension_texts  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")

# Training parts of three excerpts, and held-out rests.
ENGLISH, GERMAN, CHINESE, HELD_OUT = extension_texts("fr-FR", "es-ES")
BYTE_PIECES = [f"<0x{byte:02X}>" for byte in range(256)]
EXTRA_IDS = ["<extra_id_0>", "<extra_id_1>"]
NEW = 300

# Characters the English bases lack (they become the unknown token there) among ones they know.
mixed_text = st.lists(
    st.one_of(st.sampled_from([" the", " package", " Paket", "ung", " ", "  ", "\t", "\n", "ö", "ß", "软件", "包",
                               "😀", "\u0301", "ﬁ"]),
              st.text(max_size=5)),
    max_size=20,
).map("".join)


def t5_style(path: Path) -> Path:
    """T5's layout, trained on English: NFKC, Metaspace, <pad> </s> <unk> first, no byte
    fallback, and added tokens after model.vocab (T5's <extra_id_*>)."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.Unigram())
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(ENGLISH, trainers.UnigramTrainer(vocab_size=600, special_tokens=["<pad>", "</s>", "<unk>"],
                                                            unk_token="<unk>", show_progress=False))
    hf.add_special_tokens(EXTRA_IDS)
    hf.save(str(path))
    return path


def bpe_with_unknown(path: Path) -> Path:
    """A character-level BPE with an unknown token (one per unknown character) and no byte fallback."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(ENGLISH, trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>", "</s>"],
                                                        show_progress=False))
    hf.save(str(path))
    return path


def extended_pair(folder: Path, base_file: Path, algorithm: str):
    extended = polytok.extend(base_file, polytok.texts(GERMAN + CHINESE), NEW, algorithm, progress=False,
                              add_missing_bytes=True)
    extended.save_huggingface(folder / "extended.json")
    return (tokenizers.Tokenizer.from_file(str(base_file)), tokenizers.Tokenizer.from_file(str(folder / "extended.json")),
            extended)


@pytest.fixture(scope="module")
def unigram(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5")
    return extended_pair(folder, t5_style(folder / "base.json"), "unigram")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe-unk")
    return extended_pair(folder, bpe_with_unknown(folder / "base.json"), "bpe")


@pytest.fixture(scope="module", params=["unigram", "bpe"])
def pair(request):
    return request.getfixturevalue(request.param)


def ids(hf, lines: list[str]) -> list[list[int]]:
    return [encoding.ids for encoding in hf.encode_batch(lines, add_special_tokens=False)]


def byte_ids(theirs) -> dict[int, int]:
    """id -> byte of the extension's byte pieces."""
    return {theirs.token_to_id(text): byte for byte, text in enumerate(BYTE_PIECES)}


def as_unknown(encoded: list[int], theirs, unk: int, fused: bool) -> list[int]:
    """`encoded` with each run of byte pieces back as the base's unknown token: one for the run
    (`fused`), or one per character the run spells."""
    bytes_of = byte_ids(theirs)
    out: list[int] = []
    run = bytearray()
    for token_id in [*encoded, None]:
        if token_id in bytes_of:
            run.append(bytes_of[token_id])
            continue
        if run:
            out += [unk] if fused else [unk] * len(run.decode("utf-8"))
            run.clear()
        if token_id is not None:
            out.append(token_id)
    return out


def test_every_id_stays_and_the_new_ones_follow_bytes_first(pair):
    base, theirs, extended = pair
    base_vocab, vocab = base.get_vocab(), theirs.get_vocab()
    assert all(vocab[text] == token_id for text, token_id in base_vocab.items())
    first = base.get_vocab_size()  # one past every id, the added tokens' included
    assert first == max(base_vocab.values()) + 1
    new = sorted((token_id, text) for text, token_id in vocab.items() if text not in base_vocab)
    assert [token_id for token_id, _ in new] == list(range(first, first + 256 + NEW))
    assert extended.n_vocab == theirs.get_vocab_size() == first + 256 + NEW
    assert [text for _, text in new[:256]] == BYTE_PIECES
    assert {text for _, text in new[256:]} & set(BYTE_PIECES) == set()
    record = json.loads(theirs.to_str())
    assert record["model"]["byte_fallback"] is True
    assert [step["type"] for step in record["decoder"]["decoders"]] == ["ByteFallback", "Metaspace"]


def test_unigram_keeps_its_scores_and_the_added_tokens_hold_their_places(unigram):
    base, theirs, _ = unigram
    before, after = (json.loads(hf.to_str())["model"]["vocab"] for hf in (base, theirs))
    assert after[: len(before)] == before
    assert [text for text, _ in after[600:602]] == EXTRA_IDS  # T5's added tokens, after model.vocab
    assert [theirs.token_to_id(text) for text in EXTRA_IDS] == [600, 601]
    # no piece scores below the base's lowest, so the score of an unknown character stays
    assert min(score for _, score in after) == min(score for _, score in before)
    corpus = base.normalizer.normalize_str(" " + " ".join(GERMAN + CHINESE)).replace(" ", "▁")
    assert all(text in corpus for text, _ in after[602 + 256:])


def test_tokenizers_gives_polytoks_ids_and_the_extension_compresses(pair):
    base, theirs, extended = pair
    for name, lines in HELD_OUT.items():
        assert ids(theirs, lines) == extended.encode_batch(lines), name
        unk = base.token_to_id("<unk>")
        assert unk in chain(*ids(base, lines)) and unk not in chain(*ids(theirs, lines)), name
    german = HELD_OUT["de-DE"]
    assert sum(map(len, ids(theirs, german))) < 0.9 * sum(map(len, ids(base, german)))
    mixed = "Paket<extra_id_1> 软件包</s>"
    assert theirs.encode(mixed, add_special_tokens=False).ids == extended.encode(mixed, allowed_special="all")


@settings(max_examples=120, deadline=None)
@given(text=mixed_text)
def test_unigram_text_without_new_pieces_encodes_as_the_base_with_bytes_for_unk(unigram, text):
    base, theirs, extended = unigram
    after = theirs.encode(text, add_special_tokens=False).ids
    assert extended.encode(text) == after
    words = [word for word, _ in theirs.pre_tokenizer.pre_tokenize_str(theirs.normalizer.normalize_str(text))]
    new = [piece for piece, token_id in theirs.get_vocab().items() if token_id >= base.get_vocab_size()]
    if not any(piece in word for word in words for piece in new):
        assert as_unknown(after, theirs, base.token_to_id("<unk>"), fused=True) == \
            base.encode(text, add_special_tokens=False).ids


@settings(max_examples=120, deadline=None)
@given(text=mixed_text)
def test_bpe_text_without_new_tokens_encodes_as_the_base_with_bytes_for_unk(bpe, text):
    base, theirs, extended = bpe
    after = theirs.encode(text, add_special_tokens=False).ids
    assert extended.encode(text) == after
    bytes_of = byte_ids(theirs)
    if all(token_id < base.get_vocab_size() or token_id in bytes_of for token_id in after):
        assert as_unknown(after, theirs, base.token_to_id("<unk>"), fused=False) == \
            base.encode(text, add_special_tokens=False).ids


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=30))
def test_any_text_decodes_back_to_its_normalised_form(pair, text):
    base, theirs, extended = pair
    text = "a" + text  # (Metaspace's decoder drops a leading space)
    encoded = extended.encode(text)
    assert theirs.encode(text, add_special_tokens=False).ids == encoded
    assert base.token_to_id("<unk>") not in encoded
    normalized = theirs.normalizer.normalize_str(text).replace("▁", " ")
    assert extended.decode(encoded) == theirs.decode(encoded) == normalized


def test_a_precompiled_unigram(tmp_path):
    base_file = DATA / "readers" / "hf-unigram.json"
    extended = polytok.extend(base_file, polytok.texts(GERMAN), 100, "unigram", progress=False, add_missing_bytes=True)
    extended.save_huggingface(tmp_path / "x.json")
    base, theirs = (tokenizers.Tokenizer.from_file(str(path)) for path in (base_file, tmp_path / "x.json"))
    assert theirs.get_vocab_size() == base.get_vocab_size() + 256 + 100
    assert json.loads(theirs.to_str())["normalizer"] == json.loads(base.to_str())["normalizer"]
    for name, lines in HELD_OUT.items():
        assert ids(theirs, lines) == extended.encode_batch(lines), name


# ---- refusals and the command line ----------------------------------------------------------------

def test_refused_without_add_missing_bytes(tmp_path):
    for base_file, algorithm in ((t5_style(tmp_path / "t5.json"), "unigram"), (bpe_with_unknown(tmp_path / "bpe.json"), "bpe"),
                                 (DATA / "readers" / "hf-unigram.json", "unigram")):
        with pytest.raises(ConfigError, match="no byte fallback.*add_missing_bytes=True"):
            polytok.extend(base_file, polytok.texts(GERMAN), 10, algorithm, progress=False)
    record = json.loads((tmp_path / "bpe.json").read_text(encoding="utf-8"))
    record["decoder"] = None
    (tmp_path / "no-decoder.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ConfigError, match="no decoder"):
        polytok.extend(tmp_path / "no-decoder.json", polytok.texts(GERMAN), 10, progress=False, add_missing_bytes=True)
    counts = polytok.count(polytok.texts(GERMAN), progress=False)
    with pytest.raises(ConfigError, match="through its pipeline, counted with"):
        polytok.extend(tmp_path / "t5.json", counts, 10, "unigram", progress=False, add_missing_bytes=True)


def test_cli_extends_a_unigram_file_in_its_own_format(tmp_path):
    base_file = t5_style(tmp_path / "base.json")
    (tmp_path / "de.txt").write_text("\n".join(GERMAN), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "polytok.cli", "-q", "extend", "-t", str(base_file), str(tmp_path / "de.txt"),
                           "-k", "50", "-a", "unigram", "--add-missing-bytes", "-o", str(tmp_path / "out.json")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "out.json")).get_vocab_size() == 602 + 256 + 50
