"""`polytok eval`, `stability`, `compare` and `report`: what each prints or writes (JSON, CSV,
text, HTML), with test-double tokenisers, and `eval` on a real tokeniser file."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import polytok
import polytok.cli.evaluate
import polytok.stability
from polytok.cli import main
from test_metrics import COMMON_WORDS, GreedyTokenizer
from test_stability import word_trainer

DATA = Path(__file__).parents[1] / "data"
EN = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")
ES = (DATA / "handbook-es-ES.txt").read_text(encoding="utf-8")


def use_tokenizers(monkeypatch, by_stem: dict, calls: list | None = None) -> None:
    """Make the commands load `by_stem[file stem]` for each tokeniser file they are given."""

    def load_tokenizers(paths, **options):
        if calls is not None:
            calls.append(options)
        return {Path(path).stem: by_stem[Path(path).stem] for path in paths}

    monkeypatch.setattr(polytok.cli.options, "load_files", load_tokenizers)


def test_cli_eval_prints_json_table_and_csv(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abc ab\nab", encoding="utf-8")
    calls: list = []
    use_tokenizers(monkeypatch, {"tok": GreedyTokenizer([b"ab", b"abc"])}, calls)
    arguments = ["-q", "eval", "-t", str(tmp_path / "tok.json"), str(corpus)]
    assert main([*arguments, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tok"]["tokens"] == 5 and printed["tok"]["tokens_per_word"] == pytest.approx(5 / 3)
    assert calls[0] == {}  # no --pattern or --special: the files say
    assert main([*arguments, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tokenizer,metric,value" and "tok,tokens,5" in lines
    assert main(arguments) == 0
    table = capsys.readouterr().out
    assert "bytes_per_token" in table and "1.8" in table


def test_cli_eval_on_a_saved_tokenizer(tmp_path, capsys):
    saved = tmp_path / "bpe.json"
    tokenizer = polytok.train(polytok.texts([EN]), vocab_size=300, progress=False)
    tokenizer.save(saved)
    assert main(["-q", "eval", "-t", str(saved), str(DATA / "handbook-es-ES.txt"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["bpe"]["tokens"] == len(tokenizer.encode_ordinary(ES))


def test_cli_stability_passes_its_options_to_train(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(polytok.stability, "train", word_trainer(calls))
    assert main(["-q", "stability", str(DATA / "kjv.txt"), "-a", "bpe", "-v", "300", "-k", "2", "-f", "0.5",
                 "--pattern", "none", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["samples"] == 2 and len(printed["jaccard"]) == 2
    assert calls[0][3] == {"pattern": None, "special_tokens": [], "progress": False}
    assert main(["-q", "stability", str(DATA / "kjv.txt"), "-v", "300", "-k", "2"]) == 0
    assert "pairwise Jaccard similarity" in capsys.readouterr().out


def test_cli_compare(tmp_path, monkeypatch, capsys):
    use_tokenizers(monkeypatch, {"words": GreedyTokenizer([w.encode() for w in COMMON_WORDS]), "bytes": GreedyTokenizer()})
    arguments = ["-q", "compare", str(tmp_path / "words.json"), str(tmp_path / "bytes.json"),
                 "--text", str(DATA / "handbook-en-US.txt"), str(DATA / "handbook-es-ES.txt"),
                 "--reference", "handbook-es-ES", "--sample", "El niño", "--html", str(tmp_path / "cuts.html")]
    assert main([*arguments, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["reference"] == "handbook-es-ES" and printed["tokenizers"] == ["words", "bytes"]
    bytes_rows = [row for row in printed["rows"] if row["tokenizer"] == "bytes"]
    assert [row["tokens"] for row in bytes_rows] == [len(EN.encode()), len(ES.encode())]
    assert "<span" in (tmp_path / "cuts.html").read_text(encoding="utf-8")
    assert main([*arguments, "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "Gini" in out
    assert re.search(r"^bytes +8 tokens  E\|l\| \|n\|i\|\\xc3\|\\xb1\|o$", out, re.M)
    assert main([*arguments, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tokenizer,text,bytes,characters,words,lines,tokens") and len(lines) == 5


def test_cli_report(tmp_path, monkeypatch, capsys):
    use_tokenizers(monkeypatch, {"words": GreedyTokenizer([w.encode() for w in COMMON_WORDS]), "bytes": GreedyTokenizer()})
    assert main([
        "report", str(tmp_path / "words.json"), str(tmp_path / "bytes.json"),
        "--text", str(DATA / "handbook-en-US.txt"), str(DATA / "handbook-es-ES.txt"),
        "--corpus", str(DATA / "kjv.txt"), "-o", str(tmp_path / "out.html"),
    ]) == 0
    assert capsys.readouterr().err == f"wrote {tmp_path / 'out.html'}, {tmp_path / 'out.json'}, {tmp_path / 'out.csv'}\n"
    numbers = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    kjv = (DATA / "kjv.txt").read_text(encoding="utf-8")
    assert numbers["evaluation"]["bytes"]["tokens"] == len(kjv.encode("utf-8"))
    assert numbers["corpus_stats"]["words"] == len(kjv.split())
    assert numbers["comparison"]["reference"] == "handbook-en-US"
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<img src="data:image/png;base64,', page)) == 4
