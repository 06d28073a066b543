"""The command line as a user meets it: the entry points, help, a full train/encode/decode cycle,
convex training and certify, and bad input."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from polytok.cli import COMMANDS, main

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data"


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "polytok.cli", *args], input=stdin, capture_output=True, timeout=300
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "mix.txt"
    path.write_bytes(b"".join((DATA / name).read_bytes() for name in ["kjv.txt", "handbook-en-US.txt", "handbook-es-ES.txt"]))
    return path


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("tok") / "tok.json"
    assert main(["-q", "train", str(corpus), "-v", "600", "--special", "<|endoftext|>", "-o", str(output)]) == 0
    return output


def test_the_script_entry_point_is_main():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, function = scripts["polytok"].partition(":")
    assert getattr(importlib.import_module(module), function) is main


def test_python_m_polytok_cli_lists_every_command():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    assert all(name.encode() in result.stdout for name in COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: polytok {command}")
    assert "examples:" in out


def test_train_writes_a_loadable_tokenizer(trained):
    document = json.loads(trained.read_text())
    assert document["algorithm"] == "bpe"
    assert len(document["vocab"]) + len(document["special_tokens"]) == 600


def test_encode_then_decode_reproduces_every_line(trained, tmp_path):
    text = "In the beginning God created the heaven and the earth.\nÑandú ☃ \t tabs\n\ndef f(x): return x\n"
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    encoded = run_cli("encode", "-t", str(trained), str(source))
    assert encoded.returncode == 0, encoded.stderr
    assert len(encoded.stdout.splitlines()) == text.count("\n")
    decoded = run_cli("decode", "-t", str(trained), stdin=encoded.stdout)
    assert decoded.returncode == 0, decoded.stderr
    assert decoded.stdout.decode("utf-8") == text


def test_encode_counts_and_token_strings(trained):
    counts = run_cli("encode", "-t", str(trained), "--output", "count", stdin=b"hello world\n\n")
    first, second = counts.stdout.split()
    assert int(first) >= 2 and int(second) == 0
    tokens = run_cli("encode", "-t", str(trained), "--output", "tokens", stdin=b"hello world\n")
    assert "".join(json.loads(tokens.stdout)) == "hello world"


def test_special_token_text_is_refused_unless_allowed(trained):
    refused = run_cli("encode", "-t", str(trained), stdin=b"a <|endoftext|> b\n")
    assert refused.returncode != 0
    assert b"<|endoftext|>" in refused.stderr
    allowed = run_cli("encode", "-t", str(trained), "--allow-special", "all", stdin=b"a <|endoftext|> b\n")
    assert allowed.returncode == 0
    assert b"599" in allowed.stdout.split()


def test_info_names_algorithm_and_size(trained, capsys):
    assert main(["info", "-t", str(trained), "--json"]) == 0
    description = json.loads(capsys.readouterr().out)
    assert description["algorithm"] == "bpe"
    assert description["vocab_size"] == 600


def test_missing_corpus_is_a_clear_error_and_leaves_no_file(tmp_path):
    output = tmp_path / "tok.json"
    result = run_cli("-q", "train", str(tmp_path / "nope.txt"), "-o", str(output))
    assert result.returncode != 0
    assert b"nope.txt" in result.stderr
    assert not output.exists()
    assert os.listdir(tmp_path) == []


def test_vocab_size_below_the_byte_floor_is_refused(corpus, tmp_path):
    output = tmp_path / "tok.json"
    result = run_cli("-q", "train", str(corpus), "-v", "256", "--special", "<|x|>", "-o", str(output))
    assert result.returncode != 0
    assert b"257" in result.stderr
    assert not output.exists()


def test_garbage_tokenizer_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "polytok", "version": 1, "vocab": [')
    result = run_cli("encode", "-t", str(broken), stdin=b"x\n")
    assert result.returncode != 0
    assert b"broken.json" in result.stderr


def test_decode_rejects_non_integer_ids(trained):
    result = run_cli("decode", "-t", str(trained), stdin=b"1 2 three\n")
    assert result.returncode != 0
    assert b"line 1" in result.stderr


def test_convex_train_and_certify_from_the_command_line(corpus, tmp_path, capsys):
    small = tmp_path / "small.txt"
    small.write_bytes(corpus.read_bytes()[:20000])
    output = tmp_path / "convex.json"
    assert main(["-q", "train", str(small), "-a", "convex", "-v", "300", "--solver", "highs", "-o", str(output)]) == 0
    record = json.loads(output.read_text())
    assert record["segmenter"] == "shortest_path"
    certificate = record["certificate"]
    assert certificate["tokens"] >= certificate["bound"] > 0
    capsys.readouterr()
    assert main(["-q", "certify", "-t", str(output), str(small), "--solver", "highs", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["budget"] == 300 - 256
    assert again["tokens"] == certificate["tokens"]
    assert abs(again["bound"] - certificate["bound"]) <= 1e-6 * certificate["bound"]
