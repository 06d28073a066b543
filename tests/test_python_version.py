"""The Python version polytok claims: pyproject.toml's requires-python, the README and the
Makefile's check name the same oldest version, this interpreter meets it, and no source file
uses syntax newer than it (what the oldest supported interpreter would refuse to import)."""
from __future__ import annotations

import ast
import re
import sys
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def claimed() -> tuple[int, int]:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    match = re.fullmatch(r">=\s*3\.(\d+)", requires)
    assert match, f"requires-python {requires!r} is not of the form '>=3.N'"
    return 3, int(match.group(1))


def test_the_readme_the_makefile_and_pyproject_claim_one_version():
    major, minor = claimed()
    assert f"Python {major}.{minor}+" in (ROOT / "README.md").read_text()
    assert re.search(rf"^MIN_PYTHON := {major}\.{minor}$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert sys.version_info[:2] >= (major, minor)


def test_no_source_uses_syntax_newer_than_the_claimed_version():
    version = claimed()
    files = [path for folder in ("python", "tests", "benchmarks", "tools") for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an invalid escape: a SyntaxWarning from Python 3.12 on
        for path in files:
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=version)


def test_the_version_module_gives_the_packages_version():
    from polytok import __version__
    from polytok.version import __version__ as own

    assert __version__ == own == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
