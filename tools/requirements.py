"""Prints pyproject.toml's core requirements, or those of the extras named, one per line: the one
list of dependencies the Makefile installs from."""
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
extras = sys.argv[1:]
unknown = [name for name in extras if name not in project["optional-dependencies"]]
if unknown:
    sys.exit(f"requirements.py: no extra {unknown[0]!r} in pyproject.toml")
requirements = project["dependencies"] if not extras else [r for name in extras for r in project["optional-dependencies"][name]]
print("\n".join(requirements))
