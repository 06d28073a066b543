"""Progress bars show only for steps that take a while, and an error leaves only its message."""
from __future__ import annotations

import subprocess
import sys

import pytest

import polytok
import polytok.progress
from polytok.progress import progress_bar


def test_a_bar_shows_once_its_step_has_run_for_the_delay(capsys, monkeypatch):
    with progress_bar(True, total=3, desc="quick") as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""  # done before the delay: nothing printed
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)
    with progress_bar(True, total=3, desc="shown") as bar:
        bar.update(3)
    assert "shown" in capsys.readouterr().err
    with progress_bar(False, total=3, desc="disabled") as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""


def test_an_error_clears_the_bar_it_ends(monkeypatch):
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)
    with pytest.raises(polytok.Error):
        with progress_bar(True, total=3, desc="failing", leave=True) as bar:
            raise polytok.Error("stop")
    assert bar.leave is False


@pytest.mark.parametrize("arguments", [
    ["count", "bad.txt", "-o", "counts.ptc"],
    ["train", "bad.txt", "-v", "300", "-o", "tok.json"],
    ["train", "good.txt", "-a", "convex", "-v", "300", "--rounding", "bogus", "-o", "tok.json"],
    ["train", "good.txt", "-a", "bpe", "-v", "100", "-o", "tok.json"],
    ["train", "good.txt", "-a", "convex", "-v", "400", "--solver", "nope", "-o", "tok.json"],
    ["train", "good.txt", "-a", "unigram", "-v", "400", "--min-frequency", "2", "-o", "tok.json"],
])
def test_a_command_that_fails_prints_its_error_alone_and_no_file(tmp_path, arguments):
    (tmp_path / "bad.txt").write_bytes(b"fine text\n" * 1000 + b"caf\xe9\n")
    (tmp_path / "good.txt").write_text("some good text to count\n" * 1000)
    before = sorted(path.name for path in tmp_path.iterdir())
    # Progress bars on (no -q): none may print before the error.
    result = subprocess.run([sys.executable, "-m", "polytok.cli", *arguments], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"polytok {arguments[0]}: error: ")
    assert sorted(path.name for path in tmp_path.iterdir()) == before
