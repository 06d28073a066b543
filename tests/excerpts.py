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



def handbook(name: str, start: int = 0, end: int | None = None) -> list[str]:
    """Lines of characters start..end of the handbook excerpt `name` (e.g. "de-DE")."""
    return (DATA / f"handbook-{name}.txt").read_text(encoding="utf-8")[start:end].splitlines()


def extension_texts(*more_held_out: str) -> tuple[list[str], list[str], list[str], dict[str, list[str]]]:
    """The extension tests' training parts of the English, German and Chinese excerpts, and the
    held-out rest of German and Chinese, with `more_held_out` excerpts from character 20,000."""
    parts = {"en-US": 20_000, "de-DE": 18_000, "zh-CN": 11_000}
    held_out = {name: handbook(name, parts.get(name, 20_000)) for name in ("de-DE", "zh-CN", *more_held_out)}
    return (*(handbook(name, 0, part) for name, part in parts.items()), held_out)  # type: ignore[return-value]
