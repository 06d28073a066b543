"""The text excerpts of tests/data split for training and held-out checks, shared by the tests
that train a peer library's model and compare polytok's loaded copy with it."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"


def train_and_held_out_lines() -> tuple[list[str], list[str]]:
    """Training lines (every other line of each excerpt) and held-out lines (the rest)."""
    train, held = [], []
    for path in sorted(DATA.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        train += lines[::2]
        held += lines[1::2]
    return train, held
