"""Format detection, the one place that tells a tokeniser file's format (polytok.formats.load):
by name (.model, .tiktoken) and by first bytes (a rank line, a JSON object, binary data);
JSON files by their fields. Missing, empty and unknown files are named in the error."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import polytok
from polytok.errors import ConfigError, FormatError
from polytok.formats import detect_format, save
from polytok.formats.loaded import LoadedTokenizer
from polytok.tokenizer import Tokenizer

READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
RANKS = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))


def test_formats_are_told_by_name_and_first_bytes(tmp_path):
    files = {
        "ranks.tiktoken": RANKS.encode(),
        "cl100k_like": RANKS.encode(),  # no suffix: the first line is a rank line
        "tok.json": b'  {"format": "polytok"}',
        "spm.model": (READERS / "sp-unigram.model").read_bytes(),
        "spm.bin": (READERS / "sp-unigram.model").read_bytes(),  # a protobuf's start whatever its name
        "broken.model": b"\x0a\x05\x0f\x00",
    }
    expected = {"ranks.tiktoken": "tiktoken", "cl100k_like": "tiktoken", "tok.json": "json", "spm.model": "sentencepiece",
                "spm.bin": "sentencepiece", "broken.model": "sentencepiece"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert detect_format(tmp_path / name) == expected[name], name


def test_missing_empty_and_unknown_files_are_named(tmp_path):
    with pytest.raises(FormatError, match=r"cannot read tokeniser file .*missing.json: it does not exist"):
        polytok.load(tmp_path / "missing.json")
    with pytest.raises(FormatError, match="cannot read tokeniser file"):
        polytok.load(tmp_path)
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(FormatError, match="empty.json is empty"):
        polytok.load(tmp_path / "empty.json")
    (tmp_path / "notes.txt").write_text("just some notes\n\nand more\n")
    with pytest.raises(FormatError, match="notes.txt is not a tokeniser file polytok can read"):
        polytok.load(tmp_path / "notes.txt")
    (tmp_path / "long.txt").write_text("é" * 5000)  # a character cut by the head read is still text
    with pytest.raises(FormatError, match="not a tokeniser file"):
        polytok.load(tmp_path / "long.txt")
    (tmp_path / "random.bin").write_bytes(bytes(range(255, -1, -1)) * 4)  # binary, but no protobuf's start
    with pytest.raises(FormatError, match="random.bin is not a tokeniser file polytok can read"):
        polytok.load(tmp_path / "random.bin")
    (tmp_path / "broken.json").write_text('{"vocab": [')
    with pytest.raises(FormatError, match=r"broken.json is not valid JSON at line 1 column 12 .*truncated"):
        polytok.load(tmp_path / "broken.json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(FormatError, match="neither a polytok file .* nor a HF tokenizer.json"):
        polytok.load(tmp_path / "other.json")


def test_tiktoken_files_need_their_pattern(tmp_path):
    ranks = tmp_path / "ranks.tiktoken"
    ranks.write_text(base64.b64encode(b"a").decode() + " 0\n")
    with pytest.raises(ConfigError, match=r"ranks.tiktoken is a tiktoken rank file.*pattern=\.\.\..*--pattern"):
        polytok.load(ranks)
    ranks.write_text(RANKS)
    loaded = polytok.load(ranks, pattern="gpt2", special_tokens=["<|end|>"])
    assert loaded.special_tokens == {"<|end|>": 256}
    assert loaded.encode("a<|end|>", allowed_special="all") == [97, 256]


def test_the_pattern_completes_tiktoken_files_only(tmp_path):
    """`pattern` and `special_tokens` are for the one format without them; other files keep
    their own (so one --pattern serves a mix of files on the command line)."""
    tokenizer = Tokenizer([bytes([b]) for b in range(256)] + [b"ab"], segmenter="merges", pattern="cl100k", merges=[(97, 98)])
    tokenizer.save(tmp_path / "tok.json")
    assert polytok.load(tmp_path / "tok.json", pattern="gpt2", special_tokens=["<x>"]).to_dict() == tokenizer.to_dict()
    loaded = polytok.load(READERS / "sp-unigram.model", pattern="gpt2")
    assert isinstance(loaded, LoadedTokenizer) and loaded.info()["loaded_from"] == "SentencePiece model"


def test_save_writes_each_format(tmp_path):
    tokenizer = Tokenizer([bytes([b]) for b in range(256)] + [b"ab"], segmenter="merges", pattern="cl100k", merges=[(97, 98)],
                          special_tokens={"<|end|>": 257})
    save(tokenizer, tmp_path / "tok.json")
    save(tokenizer, tmp_path / "ranks.tiktoken", "tiktoken")
    save(tokenizer, tmp_path / "tokenizer.json", "huggingface")
    assert (tmp_path / "tok.json").read_bytes() == _saved(tokenizer.save, tmp_path / "again.json")
    assert detect_format(tmp_path / "ranks.tiktoken") == "tiktoken"
    assert json.loads((tmp_path / "tokenizer.json").read_text())["model"]["type"] == "BPE"
    for name in ("tok.json", "tokenizer.json"):
        again = polytok.load(tmp_path / name)
        assert isinstance(again, Tokenizer) and again.encode("abab<|end|>", allowed_special="all") == [256, 256, 257]
    with pytest.raises(ConfigError, match="unknown tokeniser file format 'csv'"):
        save(tokenizer, tmp_path / "tok.csv", "csv")


def _saved(write, path: Path) -> bytes:
    write(path)
    return path.read_bytes()
