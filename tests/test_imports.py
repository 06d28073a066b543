"""No module of polytok imports itself back through other modules, at import time or later.

Module-level imports (outside `if TYPE_CHECKING:`) must form no cycle. An import inside a function
would hide a cycle from that check, so every one of polytok's own modules is listed in
`LAZY_IMPORTS` with its reason, and the graph of all imports, lazy ones included, has no cycle
but through the few lazy imports listed as closing one.
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


def _function_level_imports(body: list[ast.stmt], in_function: bool = False):
    """Import statements that run only when a function of the module is called (outside
    `if TYPE_CHECKING:` blocks)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if in_function:
                yield node
            continue
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            yield from _function_level_imports(node.orelse, in_function)
            continue
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                yield from _function_level_imports([b for b in block if isinstance(b, ast.stmt)], inner)
                for handler in block:
                    if isinstance(handler, ast.ExceptHandler):
                        yield from _function_level_imports(handler.body, inner)
        if isinstance(node, ast.Match):
            for case in node.cases:
                yield from _function_level_imports(case.body, inner)


# Every import of a polytok module that runs inside a function, with why it is not at module level.
# "cycle": the import closes a cycle that cannot be cut (the graph test allows cycles only through
# these). "optional": the target imports an optional dependency (torch, matplotlib) at its own
# module level, so importing it eagerly would make polytok need that dependency.
FORMATS_BUILD_TOKENIZERS = ("cycle", "the tokenisers' save and export methods call formats, whose readers build tokenisers")
LAZY_IMPORTS: dict[tuple[str, str], tuple[str, str]] = {
    ("polytok.tokenizer", "polytok.formats.polytok"): FORMATS_BUILD_TOKENIZERS,
    ("polytok.tokenizer", "polytok.formats.tiktoken"): FORMATS_BUILD_TOKENIZERS,
    ("polytok.tokenizer", "polytok.formats.huggingface"): FORMATS_BUILD_TOKENIZERS,
    ("polytok.base_tokenizer", "polytok.formats.sentencepiece"): FORMATS_BUILD_TOKENIZERS,
    ("polytok.base_tokenizer", "polytok.formats.transformers"): FORMATS_BUILD_TOKENIZERS,
    ("polytok.lm", "polytok.lm.train"): ("optional", "lm.train imports torch"),
    ("polytok.lm", "polytok.lm.data"): ("optional", "lm.data imports torch"),
    ("polytok.cli.lm", "polytok.lm"): ("optional", "the lm commands need torch; the others must not"),
}


def _targets(name: str, path: Path, nodes, modules: dict[str, Path], compiled: set[str]) -> set[str]:
    """The polytok modules that the import statements `nodes` of module `name` import."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in nodes:
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
    return {target for target in targets if target in modules and target != name}


def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    """For every polytok module, the polytok modules it imports at module level (and, with
    `lazy`, inside its functions too)."""
    modules = module_files()
    compiled = extension_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        body = ast.parse(path.read_text(encoding="utf-8")).body
        graph[name] = _targets(name, path, _top_level_imports(body), modules, compiled)
        if lazy:
            graph[name] |= _targets(name, path, _function_level_imports(body), modules, compiled)
    return graph


def lazy_imports() -> set[tuple[str, str]]:
    """(module, polytok module it imports inside a function but not at module level)."""
    eager, every = import_graph(), import_graph(lazy=True)
    return {(name, target) for name in every for target in every[name] - eager[name]}


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


def test_every_lazy_import_is_listed_with_its_reason():
    found = lazy_imports()
    assert found - LAZY_IMPORTS.keys() == set(), "function-level imports not in LAZY_IMPORTS"
    assert LAZY_IMPORTS.keys() - found == set(), "LAZY_IMPORTS lists imports that no longer exist"


def test_the_lazy_import_finder_sees_imports_inside_functions_only():
    tree = ast.parse(
        "import a\nif TYPE_CHECKING:\n    import b\ndef f():\n    import c\n"
        "    if TYPE_CHECKING:\n        import d\n    try:\n        import e\n    except E:\n"
        "        import f\nclass K:\n    def m(self):\n        with x:\n            from g import h\n"
    )
    names = [alias.name if isinstance(node, ast.Import) else node.module
             for node in _function_level_imports(tree.body) for alias in node.names]
    assert names == ["c", "e", "f", "g"]


def test_no_import_cycle_counting_function_level_imports():
    graph = import_graph(lazy=True)
    for (name, target), (kind, _) in LAZY_IMPORTS.items():
        if kind == "cycle":
            graph[name].discard(target)
    found = cycles(graph)
    assert not found, "import cycles through function-level imports: " + "; ".join(" <-> ".join(c) for c in found)


def test_certify_uses_lp_and_never_a_trainer():
    tree = ast.parse(module_files()["polytok.certify"].read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "polytok.lp" in imported or any(name.startswith("polytok.lp.") for name in imported)
    assert not any(name.startswith("polytok.trainers") for name in imported)
