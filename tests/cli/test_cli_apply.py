"""`polytok encode --offsets / --max-tokens` and `polytok export`: output, exit status, and no
file left behind when the format cannot hold the tokeniser."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import polytok
from polytok.cli import main
from apply_tokenizers import tokenizers


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tokenizers")
    paths = {}
    for name in ("bpe-cl100k", "viterbi"):
        paths[name] = folder / f"{name}.json"
        tokenizers()[name].save(paths[name])
    whole = polytok.Tokenizer([bytes([b]) for b in range(256)] + [b"th", b"the", "é".encode(), " é".encode()], segmenter="merges", pattern=None)
    paths["whole"] = folder / "whole.json"
    whole.save(paths["whole"])
    return paths


def run(capsysbinary, *args: str) -> tuple[int, bytes, bytes]:
    status = main(list(args))
    captured = capsysbinary.readouterr()
    return status, captured.out, captured.err


def test_encode_offsets(saved, tmp_path, capsysbinary):
    lines = ["héllo wörld 😀", "", "second line"]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = tokenizers()["bpe-cl100k"]
    for unit in ("bytes", "chars"):
        status, out, _ = run(capsysbinary, "encode", "-t", str(saved["bpe-cl100k"]), "--offsets", unit, str(source))
        assert status == 0
        records = [json.loads(line) for line in out.decode().splitlines()]
        assert len(records) == len(lines)
        for line, record in zip(lines, records):
            ids, offsets = tokenizer.encode_with_offsets(line, unit=unit)
            assert record == {"ids": ids, "offsets": offsets.tolist()}
    status, out, _ = run(capsysbinary, "encode", "-t", str(saved["bpe-cl100k"]), "--offsets", "--output", "tokens", str(source))
    record = json.loads(out.decode().splitlines()[2])
    assert "".join(record["tokens"]) == "second line" and record["offsets"][-1][1] == len("second line")


def test_encode_max_tokens(saved, tmp_path, capsysbinary):
    source = tmp_path / "in.txt"
    source.write_text("a long line of text that takes many tokens 😀😀\nshort\n", encoding="utf-8")
    tokenizer = tokenizers()["bpe-cl100k"]
    status, out, _ = run(capsysbinary, "encode", "-t", str(saved["bpe-cl100k"]), "--max-tokens", "4", str(source))
    assert status == 0
    first, second = [list(map(int, line.split())) for line in out.decode().splitlines()]
    assert first == tokenizer.encode("a long line of text that takes many tokens 😀😀")[:4] and second == tokenizer.encode("short")
    status, _, err = run(capsysbinary, "encode", "-t", str(saved["bpe-cl100k"]), "--max-tokens", "0", str(source))
    assert status == 2 and b"--max-tokens must be an integer of at least 1, got 0" in err


@pytest.mark.parametrize("file_format, suffix", [("huggingface", ".json"), ("tiktoken", ".tiktoken")])
def test_export_formats_load_back(saved, tmp_path, capsysbinary, file_format, suffix):
    output = tmp_path / f"out{suffix}"
    status, _, err = run(capsysbinary, "export", "-t", str(saved["bpe-cl100k"]), "--format", file_format, "-o", str(output))
    assert status == 0, err
    options = {"pattern": "cl100k"} if file_format == "tiktoken" else {}
    text = "Export me, héllo 😀"
    assert polytok.load(output, **options).encode(text) == tokenizers()["bpe-cl100k"].encode(text)


def test_export_sentencepiece(saved, tmp_path, capsysbinary):
    output = tmp_path / "whole.model"
    status, _, err = run(capsysbinary, "export", "-t", str(saved["whole"]), "--format", "sentencepiece", "-o", str(output))
    assert status == 0, err
    assert polytok.load(output).encode("the é theme") == polytok.load(saved["whole"]).encode("the é theme")
    refused = tmp_path / "refused.model"
    status, _, err = run(capsysbinary, "export", "-t", str(saved["viterbi"]), "--format", "sentencepiece", "-o", str(refused))
    assert status == 2 and b"no pre-tokenisation regex" in err and not refused.exists()


def test_every_command_reads_a_tiktoken_file_with_the_same_pattern_options(saved, tmp_path, capsysbinary):
    # "whole" has no pre-tokenisation pattern: its ranks load back only with --pattern none
    ranks = tmp_path / "whole.tiktoken"
    assert run(capsysbinary, "export", "-t", str(saved["whole"]), "--format", "tiktoken", "-o", str(ranks))[0] == 0
    source = tmp_path / "in.txt"
    source.write_text("the theme of the é\n", encoding="utf-8")
    expected = polytok.load(saved["whole"]).encode("the theme of the é")
    assert polytok.load(ranks, pattern=None).encode("the theme of the é") == expected
    status, out, err = run(capsysbinary, "encode", "-t", str(ranks), "--pattern", "none", str(source))
    assert status == 0, err
    assert list(map(int, out.split())) == expected
    status, out, err = run(capsysbinary, "eval", "-t", str(ranks), "--pattern", "none", "--json", str(source))
    assert status == 0, err
    assert json.loads(out)["whole"]["tokens"] == len(polytok.load(saved["whole"]).encode(source.read_text(encoding="utf-8")))
    for command in (["encode", "-t", str(ranks), str(source)], ["eval", "-t", str(ranks), str(source)]):
        status, _, err = run(capsysbinary, *command)
        assert status == 2 and b"does not record its pre-tokenisation pattern" in err
