"""`polytok stats`: the statistics of a corpus and their plots."""
from __future__ import annotations

import json
from pathlib import Path

from polytok.cli import main

DATA = Path(__file__).parents[1] / "data"


def test_cli_stats_and_plots(tmp_path, capsys):
    assert main(["-q", "stats", str(DATA / "kjv.txt"), "--json", "--plots", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["words"] == len((DATA / "kjv.txt").read_text(encoding="utf-8").split())
    for name in ("rank-frequency.png", "growth.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert main(["-q", "stats", str(DATA / "kjv.txt")]) == 0
    assert "zipf_alpha" in capsys.readouterr().out
