"""`import polytok`, every module of it and every command work with the core dependencies alone
(pyproject's `dependencies` and what they need): each other installed distribution is made
unimportable in a fresh interpreter, as it is after a bare `pip install polytok`."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def core_distributions() -> set[str]:
    """The core requirements and, transitively, what they require (extras left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [_name(requirement) for requirement in project["dependencies"]]
    found: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        wanted += [_name(r) for r in requirements if "extra ==" not in r.replace('"', "'").replace("'", "")
                   and "extra==" not in r.replace(" ", "")]
    return found


def blocked_modules() -> list[str]:
    """Top-level modules of installed distributions that are neither core nor polytok itself."""
    core = core_distributions() | {"polytok", "pip", "setuptools", "maturin", "wheel"}
    blocked = set()
    for module, distributions in metadata.packages_distributions().items():
        names = {d.lower().replace("_", "-") for d in distributions}
        if not names & core and not module.startswith("_") and module not in sys.stdlib_module_names:
            blocked.add(module)
    return sorted(blocked)


SCRIPT = r"""
import importlib, importlib.abc, json, pkgutil, sys
blocked = set(json.loads(sys.argv[1]))

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: not a core dependency)", name=name)
        return None

sys.meta_path.insert(0, Missing())
import polytok
modules = [info.name for info in pkgutil.walk_packages(polytok.__path__, "polytok.") if not info.name.endswith("__main__")]
for name in modules:
    importlib.import_module(name)
from polytok.cli import COMMANDS, main
for command in COMMANDS:
    try:
        main([command, "--help"])
    except SystemExit as exit:
        assert exit.code == 0, command
tokenizer = polytok.train(polytok.texts(["core dependencies only, please"] * 50), vocab_size=300, progress=False)
assert tokenizer.decode(tokenizer.encode("core only")) == "core only"
print(json.dumps({"modules": len(modules), "commands": len(COMMANDS)}))
"""


def test_polytok_needs_only_its_core_dependencies():
    blocked = blocked_modules()
    assert "pytest" in blocked and "numpy" not in blocked  # the split itself is what it should be
    result = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(blocked)], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    checked = json.loads(result.stdout.strip().splitlines()[-1])
    assert checked["modules"] > 20 and checked["commands"] >= 11
