"""SentencePiece export: the written .model gives polytok's ids in the `sentencepiece` library
and in polytok's own reader, on the test excerpts and on hypothesis text, for BPE and Unigram;
the tokenisers the format cannot hold are refused with the reason, and nothing is written."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import ConfigError
from polytok.formats.sentencepiece import check_sentencepiece_exportable
from polytok.tokenizer import Tokenizer
from apply_tokenizers import tokenizers

DATA = Path(__file__).resolve().parents[2] / "data"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _lines() -> list[str]:
    return [line for path in sorted(DATA.glob("*.txt")) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _one_and_two_byte_text() -> list[str]:
    """Training lines without characters of three or more bytes, so that byte-level BPE learns
    whole characters only (a merge of a 3-byte character's first two bytes is half a character)."""
    return ["".join(c for c in line if ord(c) < 0x800) for line in _lines()[::3]]


@pytest.fixture(scope="module")
def exportable(tmp_path_factory) -> dict[str, tuple[Tokenizer, Path]]:
    bpe = polytok.train(polytok.texts(_one_and_two_byte_text()), algorithm="bpe", vocab_size=500, pattern=None,
                        special_tokens=["<|endoftext|>"], progress=False)
    # Scores in 1/64ths: exact in 32-bit floats, and so are their sums (SentencePiece adds in
    # float32, polytok in float64), so ties are real ties and both break them alike.
    scores = [-8.0 if i < 256 else round(-64 * math.log(2 + i) / len(token)) / 64 for i, token in enumerate(bpe.vocab)]
    unigram = Tokenizer(bpe.vocab, segmenter="viterbi", pattern=None, scores=scores, special_tokens=bpe.special_tokens)
    folder = tmp_path_factory.mktemp("sentencepiece")
    made = {}
    for name, tokenizer in (("bpe", bpe), ("unigram", unigram)):
        path = folder / f"{name}.model"
        tokenizer.save_sentencepiece(path)
        made[name] = (tokenizer, path)
    return made


@pytest.fixture(scope="module")
def processors(exportable):
    spm = pytest.importorskip("sentencepiece")
    return {name: spm.SentencePieceProcessor(model_file=str(path)) for name, (_, path) in exportable.items()}


@pytest.mark.parametrize("name", ["bpe", "unigram"])
def test_sentencepiece_gives_polytok_ids_on_the_excerpts(exportable, processors, name):
    tokenizer, _ = exportable[name]
    processor = processors[name]
    lines = _lines()
    assert processor.encode(lines) == [tokenizer.encode(line) for line in lines]
    assert processor.decode(tokenizer.encode(lines[0])) == lines[0]
    assert processor.encode("a<|endoftext|>b") == tokenizer.encode("a<|endoftext|>b", allowed_special="all")


@pytest.mark.parametrize("name", ["bpe", "unigram"])
@SETTINGS
@given(text=st.text(max_size=80))
def test_sentencepiece_gives_polytok_ids_on_any_text(exportable, processors, name, text):
    tokenizer, _ = exportable[name]
    assert processors[name].encode(text) == tokenizer.encode(text, allowed_special="all")


@pytest.mark.parametrize("name", ["bpe", "unigram"])
def test_polytok_reads_the_written_model_back(exportable, name):
    tokenizer, path = exportable[name]
    loaded = polytok.load(path)
    for line in _lines()[::7]:
        assert loaded.encode(line) == tokenizer.encode(line)
        assert loaded.decode(tokenizer.encode(line)) == line


def test_tokenisers_sentencepiece_cannot_hold_are_refused(tmp_path):
    made = tokenizers()
    cases = {
        "wordpiece": "no greedy longest-match",
        "shortest_path": "does not break ties",
        "bpe-cl100k": "no pre-tokenisation regex",
    }
    for name, reason in cases.items():
        path = tmp_path / f"{name}.model"
        with pytest.raises(ConfigError, match=reason):
            made[name].save_sentencepiece(path)
        assert not path.exists()
    # byte-level BPE on CJK text learns half characters
    with pytest.raises(ConfigError, match="holds part of a character"):
        check_sentencepiece_exportable(made["bpe-none"])
    vocab = [bytes([b]) for b in range(256)] + ["é".encode(), "xé".encode()]
    low = Tokenizer(vocab, segmenter="viterbi", pattern=None, scores=[-1.0] * 256 + [-5.0, -1.0])
    with pytest.raises(ConfigError, match="scores no more than its bytes"):
        check_sentencepiece_exportable(low)
    orphan = Tokenizer([bytes([b]) for b in range(256)] + ["xé".encode()], segmenter="viterbi", pattern=None,
                       scores=[-1.0] * 257)
    with pytest.raises(ConfigError, match="occurs in tokens but is no token itself"):
        check_sentencepiece_exportable(orphan)
    # a model read from a .model file is written back as it was read
    loaded = polytok.load(DATA / "readers" / "sp-unigram.model")
    loaded.save_sentencepiece(tmp_path / "again.model")
    assert (tmp_path / "again.model").read_bytes() == (DATA / "readers" / "sp-unigram.model").read_bytes()
    with pytest.raises(ConfigError, match="keep the original file"):
        check_sentencepiece_exportable(loaded)
