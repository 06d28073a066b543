"""The polytok JSON format: saving and loading round trips byte-identically, pickling goes
through the record, and an edited, truncated or half-written file names what is wrong."""
from __future__ import annotations

import json
import os
import pickle

import pytest

import polytok
from polytok.errors import FormatError
from polytok.formats.polytok import FIELDS, from_record

from conftest import TOKENIZER_NAMES


@pytest.fixture(params=TOKENIZER_NAMES)
def tokenizer(request, trained_tokenizers):
    return trained_tokenizers[request.param]


def test_save_load_round_trip(tokenizer, tmp_path, text_excerpts):
    tokenizer.training = {"corpus_bytes": 123, "options": {"min_frequency": 1}}
    path = tmp_path / "tok.json"
    tokenizer.save(path)
    loaded = polytok.load(path)
    assert loaded.to_dict() == tokenizer.to_dict()
    text = text_excerpts["kjv.txt"] + "<|endoftext|>"
    assert loaded.encode(text, allowed_special="all") == tokenizer.encode(text, allowed_special="all")
    # saving is deterministic and leaves no temporary files behind
    loaded.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.json", "tok.json"]
    tokenizer.training = None


def test_pickle_round_trip(trained_tokenizers, text_excerpts):
    tokenizer = trained_tokenizers["hf-o200k"]
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.to_dict() == tokenizer.to_dict()
    text = text_excerpts["handbook-es-ES.txt"]
    assert copy.encode(text) == tokenizer.encode(text)


def _saved_record(trained_tokenizers, tmp_path) -> tuple[dict, str]:
    path = tmp_path / "tok.json"
    trained_tokenizers["naive-cl100k"].save(path)
    return json.loads(path.read_text()), path.read_text()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["vocab"].__setitem__(12, "not base64!"), r"field 'vocab'\[12\] is not valid base64"),
        (lambda r: r["vocab"].__setitem__(3, ""), r"field 'vocab'\[3\]: token 3 is empty"),
        (lambda r: r.pop("merges"), r"field 'merges' is missing"),
        (lambda r: r.__setitem__("version", 2), r"field 'version' is 2 \(written by a newer polytok\)"),
        (lambda r: r.__setitem__("version", "1"), r"field 'version' is '1', expected an integer"),
        (lambda r: r.__setitem__("format", "tiktoken"), r"field 'format' is 'tiktoken'"),
        (lambda r: r["merges"].__setitem__(5, [1, 99999]), r"field 'merges'\[5\]"),
        (lambda r: r["merges"].__setitem__(5, [1]), r"field 'merges'\[5\]"),
        (lambda r: r.__setitem__("special_tokens", {"<s>": -1}), r"field 'special_tokens'\['<s>'\]"),
        (lambda r: r.__setitem__("segmenter", "magic"), r"field 'segmenter': unknown segmenter 'magic'"),
        (lambda r: r.__setitem__("scores", [1.0]), r"field 'scores': 1 scores for \d+ tokens"),
        (lambda r: r.__setitem__("training", []), r"field 'training' is list"),
        (lambda r: r.__setitem__("extra", 1), r"unknown field 'extra'"),
        (lambda r: r.__setitem__("vocab", r["vocab"][:100]), r"field 'merges'\[0\]: merge 0 \(\d+, \d+\) names an id outside 0..99"),
        (lambda r: r.__setitem__("pattern", "(unclosed"), r"invalid pre-tokenisation regex"),
    ],
)
def test_edited_file_names_the_field(trained_tokenizers, tmp_path, edit, message):
    record, _ = _saved_record(trained_tokenizers, tmp_path)
    edit(record)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record))
    with pytest.raises(FormatError, match=message):
        polytok.load(path)


def test_truncated_file_names_the_line(trained_tokenizers, tmp_path):
    _, text = _saved_record(trained_tokenizers, tmp_path)
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    line = text[: len(text) // 2].count("\n") + 1
    with pytest.raises(FormatError, match=rf"not valid JSON at line {line} column \d+.*truncated"):
        polytok.load(path)


def test_failed_save_keeps_the_old_file(trained_tokenizers, tmp_path, monkeypatch):
    """A save that fails at the last step leaves the previous file intact and no temporary file."""
    tokenizer = trained_tokenizers["naive-cl100k"]
    path = tmp_path / "tok.json"
    path.write_text("previous content")

    def fail(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        tokenizer.save(path)
    assert path.read_text() == "previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]


def test_record_keeps_the_field_order_and_rebuilds(trained_tokenizers):
    tokenizer = trained_tokenizers["naive-gpt2"]
    record = tokenizer.to_dict()
    assert tuple(record) == FIELDS
    assert polytok.Tokenizer.from_dict(record).to_dict() == record
    with pytest.raises(FormatError, match="^my record: expected a JSON object, found list"):
        from_record([], "my record")
