"""`polytok count` and `polytok stats`: the reader's --errors modes on invalid UTF-8, the counts
file, the statistics and their plots."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import polytok
from polytok.cli import main
from polytok.checks import ERROR_MODES

DATA = Path(__file__).parents[1] / "data"
INVALID = b"hello w\xffrld\nmore text\n"  # 0xff at byte offset 7 is never UTF-8


@pytest.fixture
def invalid_utf8(tmp_path) -> Path:
    path = tmp_path / "latin.txt"
    path.write_bytes(INVALID)
    return path


def test_count_without_errors_names_the_file_and_offset_in_one_line(invalid_utf8, tmp_path, capsys):
    output = tmp_path / "counts.ptc"
    assert main(["-q", "count", str(invalid_utf8), "-o", str(output)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("polytok count: error: ")
    assert str(invalid_utf8) in error and "offset 7" in error
    assert not output.exists()


def test_count_with_errors_bytes_counts_the_raw_bytes(invalid_utf8, tmp_path):
    output = tmp_path / "counts.ptc"
    assert main(["-q", "count", str(invalid_utf8), "-o", str(output), "--errors", "bytes"]) == 0
    counts = polytok.PreTokenCounts.load(output)
    expected = polytok.count(invalid_utf8, errors="bytes", progress=False)
    assert (len(counts), counts.total) == (len(expected), expected.total)


def test_train_and_certify_read_raw_bytes_with_errors_bytes(invalid_utf8, tmp_path, capsys):
    tokenizer = tmp_path / "tok.json"
    assert main(["-q", "train", str(invalid_utf8), "-v", "260", "--errors", "bytes", "-o", str(tokenizer)]) == 0
    assert main(["-q", "certify", "-t", str(tokenizer), str(invalid_utf8), "--solver", "dual"]) == 2
    assert "offset 7" in capsys.readouterr().err
    assert main(["-q", "certify", "-t", str(tokenizer), str(invalid_utf8), "--solver", "dual",
                 "--errors", "bytes", "--json"]) == 0
    certificate = json.loads(capsys.readouterr().out)
    expected = polytok.certify(polytok.load(tokenizer), polytok.count(invalid_utf8, errors="bytes", progress=False),
                               solver="dual")
    assert certificate["tokens"] == expected.tokens and certificate["bound"] == expected.bound


def test_every_error_mode_is_a_choice(capsys):
    with pytest.raises(SystemExit):
        main(["count", "--help"])
    assert "{" + ",".join(ERROR_MODES) + "}" in capsys.readouterr().out


def test_cli_stats_and_plots(tmp_path, capsys):
    assert main(["-q", "stats", str(DATA / "kjv.txt"), "--json", "--plots", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["words"] == len((DATA / "kjv.txt").read_text(encoding="utf-8").split())
    for name in ("rank-frequency.png", "growth.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert main(["-q", "stats", str(DATA / "kjv.txt")]) == 0
    assert "zipf_alpha" in capsys.readouterr().out
