"""No module of polytok imports itself back through other modules at import time.

Only module-level imports count (those that run when the module is first imported, outside
`if TYPE_CHECKING:`); an import inside a function runs once the modules have loaded, so it never
meets a half-initialised one.
`from package import name` depends on the submodule `package.name` when that is a module, else
on the package itself.
"""
from __future__ import annotations

import ast
import importlib.machinery
from pathlib import Path

import polytok

PACKAGE = Path(polytok.__file__).parent


def module_files() -> dict[str, Path]:
    """Every Python module of polytok by its dotted name."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["polytok", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def extension_modules() -> set[str]:
    """The compiled modules of polytok (the Rust core): they import nothing of polytok."""
    names = set()
    for path in PACKAGE.rglob("*"):
        # The suffixes run from the most specific ('.cpython-311-x86_64-linux-gnu.so') to '.so'.
        suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if path.name.endswith(s)), None)
        if suffix is not None:
            parts = path.relative_to(PACKAGE).parts
            names.add(".".join(["polytok", *parts[:-1], parts[-1][: -len(suffix)]]))
    return names


def _top_level_imports(body: list[ast.stmt]):
    """Import statements that run at import time: the module body and its if/try/with blocks."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            test = node.test
            if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"):
                yield from _top_level_imports(node.body)
            yield from _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                yield from _top_level_imports(block)
        elif isinstance(node, ast.With):
            yield from _top_level_imports(node.body)


def import_graph() -> dict[str, set[str]]:
    """For every polytok module, the polytok modules it imports at module level."""
    modules = module_files()
    compiled = extension_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in _top_level_imports(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules or submodule in compiled else source)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_checker_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_level_import_cycle_in_polytok():
    found = cycles(import_graph())
    assert not found, "module-level import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in found)


def test_certify_uses_lp_and_never_a_trainer():
    tree = ast.parse(module_files()["polytok.certify"].read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "polytok.lp" in imported or any(name.startswith("polytok.lp.") for name in imported)
    assert not any(name.startswith("polytok.trainers") for name in imported)
