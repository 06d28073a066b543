"""Files polytok writes appear whole, and with the mode a plain open() would give them."""
from __future__ import annotations

import os
import stat

import pytest

import polytok


@pytest.fixture(scope="module")
def tokenizer() -> polytok.Tokenizer:
    return polytok.train(polytok.texts(["a few words, a few more words"] * 20), vocab_size=270, progress=False)


@pytest.fixture
def umask():
    """Sets the process umask for one test and restores it."""
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_new_files_get_the_umask_mode(tokenizer, tmp_path, umask, mask):
    umask(mask)
    expected = 0o666 & ~mask
    writers = {
        "tok.json": tokenizer.save,
        "tok.tiktoken": tokenizer.save_tiktoken,
        "tokenizer.json": tokenizer.save_huggingface,
        "counts.ptc": polytok.count(polytok.texts(["some text"]), progress=False).save,
    }
    for name, write in writers.items():
        write(tmp_path / name)
        assert mode(tmp_path / name) == expected, name
    assert sorted(os.listdir(tmp_path)) == sorted(writers)  # no temporary file left beside them


def test_an_existing_file_keeps_its_mode(tokenizer, tmp_path, umask):
    umask(0o022)
    path = tmp_path / "tok.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    tokenizer.save(path)
    assert mode(path) == 0o640
    assert polytok.load(path).vocab == tokenizer.vocab
