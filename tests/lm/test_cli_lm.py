"""`polytok lm-eval` and `polytok report --lm`: sizes on the command line, errors as one line and
exit status 2, a tiny run's table and files (with PyTorch), and the report's BpB-vs-vocabulary
section from an LM results file."""
from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import re
from pathlib import Path

import pytest

import polytok
import polytok.lm
from polytok.cli import main
from polytok.cli.lm import byte_count

DATA = Path(__file__).parents[1] / "data"
KJV = (DATA / "kjv.txt").read_text(encoding="utf-8")


@pytest.fixture
def files(tmp_path):
    """A byte-level tokeniser file and training and validation text files."""
    tokenizer = polytok.Tokenizer([bytes([b]) for b in range(256)], segmenter="merges", pattern=None, merges=[])
    tokenizer.save(tmp_path / "bytes.json")
    (tmp_path / "train.txt").write_text(KJV[:24_000], encoding="utf-8")
    (tmp_path / "valid.txt").write_text(KJV[24_000:], encoding="utf-8")
    return tmp_path


def lm_arguments(directory: Path, *extra: str) -> list[str]:
    return ["-q", "lm-eval", "-t", str(directory / "bytes.json"), "--train", str(directory / "train.txt"),
            "--valid", str(directory / "valid.txt"), *extra]


def test_byte_counts_read_like_people_write_them():
    assert [byte_count(text) for text in ["4000000", "4M", "4e6", "500k", "1.5G", "2MB", "64kb"]] == [
        4_000_000, 4_000_000, 4_000_000, 500_000, 1_500_000_000, 2_000_000, 64_000]
    with pytest.raises(argparse.ArgumentTypeError, match="not a number of bytes"):
        byte_count("lots")


def test_a_budget_below_one_step_exits_2_with_one_line(files, capsys):
    assert main(lm_arguments(files, "--budget", "1k")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "polytok lm-eval: error: budget=1,000 training bytes is less than one step" in error


def test_a_tiny_run_prints_its_table_and_writes_json_and_csv(files, capsys):
    pytest.importorskip("torch", reason="polytok lm-eval needs PyTorch: pip install '.[lm]'")
    output = files / "lm.json"
    arguments = lm_arguments(files, "--budget", "40k", "--depth", "1", "--width", "32", "--context-bytes", "128",
                             "--batch-size", "4", "--device", "cpu", "--torch-threads", "1", "--seeds", "0", "1", "-o", str(output))
    assert main([argument for argument in arguments if argument != "-q"]) == 0
    captured = capsys.readouterr()
    assert re.search(r"^valid_bpb\s+\d\.\d+$", captured.out, re.MULTILINE)
    assert f"wrote {output}" in captured.err
    report = json.loads(output.read_text())
    assert report["settings"]["seeds"] == [0, 1] and report["settings"]["device"] == "cpu"
    rows = list(csv.DictReader(io.StringIO(output.with_suffix(".csv").read_text())))
    assert [row["tokenizer"] for row in rows] == ["bytes"]
    assert float(rows[0]["valid_bpb"]) == report["results"]["bytes"]["valid_bpb"] < 8


def lm_results(tmp_path: Path) -> Path:
    """An LM results file as lm-eval writes it, with two families at two vocabulary sizes."""
    results = {
        f"{family}-{size}": {"family": family, "vocab_size": size, "valid_bpb": bpb, "valid_bpb_stderr": 0.01,
                             "seeds": 3, "uniform_bpb": 5.0, "train_bytes": 10**6, "runs": []}
        for family, size, bpb in [("bpe", 4096, 2.1), ("bpe", 16384, 2.0), ("convex-det", 4096, 2.05),
                                  ("convex-det", 16384, 1.95)]
    }
    path = tmp_path / "lm.json"
    path.write_text(json.dumps({"settings": {"depth": 2, "budget_bytes": 10**6}, "results": results}))
    return path


def test_report_with_lm_results_adds_the_bpb_plot_and_rows(files):
    text = files / "en.txt"
    text.write_text((DATA / "handbook-en-US.txt").read_text(encoding="utf-8")[:5000], encoding="utf-8")
    page = files / "report.html"
    arguments = ["-q", "report", str(files / "bytes.json"), "--text", str(text), "-o", str(page)]
    assert main([*arguments, "--lm", str(lm_results(files))]) == 0
    html = page.read_text()
    assert "Language models: validation bits per byte" in html
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', html)
    assert any(alt.startswith("validation bits per byte") and base64.b64decode(data).startswith(b"\x89PNG")
               for data, alt in images)
    rows = [row for row in csv.DictReader(io.StringIO(page.with_suffix(".csv").read_text())) if row["section"] == "lm"]
    assert {(row["tokenizer"], row["metric"], row["value"]) for row in rows} >= {("bpe-4096", "valid_bpb", "2.1")}
    assert main(arguments) == 0 and "Language models" not in page.read_text()


def test_report_refuses_a_file_that_is_not_lm_results(files, capsys):
    text = files / "en.txt"
    text.write_text("Debian is a free operating system.\n", encoding="utf-8")
    wrong = files / "wrong.json"
    wrong.write_text(json.dumps({"results": {"bpe": {"valid_bpb": 2.0}}}))
    page = files / "report.html"
    assert main(["-q", "report", str(files / "bytes.json"), "--text", str(text), "--lm", str(wrong), "-o", str(page)]) == 2
    assert "LM results need a non-empty 'results' mapping" in capsys.readouterr().err
    assert not page.exists()


@pytest.mark.parametrize("finished", [True, False])
def test_ctrl_c_says_whether_finished_results_were_kept(files, monkeypatch, capsys, finished):
    output = files / "lm.json"

    def interrupted(tokenizers, train, valid, *, output, **options):
        if finished:
            output.write_text('{"settings": {}, "results": {"bytes": {}}}')
        raise KeyboardInterrupt

    monkeypatch.setattr(polytok.lm, "evaluate", interrupted)
    assert main(lm_arguments(files, "--budget", "1M", "-o", str(output))) == 130
    error = capsys.readouterr().err
    assert error == (f"interrupted: {output} holds the tokenisers that finished\n" if finished
                     else "interrupted before any tokeniser finished: nothing written\n")
