"""Every import inside envman is one-way: no module reaches itself through the modules it imports.

The graph is read from the syntax tree of every module of the package, so it counts what the
import-linter layer contract does not: imports inside a function (lazy imports), imports under
``if TYPE_CHECKING:``, relative imports, and ``from package import module`` (an edge to the module,
and to the package's ``__init__``). An edge to the top-level ``envman`` package itself (its
``__version__``) is left out: ``envman/__init__.py`` imports nothing. Each strongly connected
component of more than one module (or a module importing itself) is a cycle, and the test names it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.imports import imported_from

PACKAGE = Path(__file__).resolve().parents[3] / "envman"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` (``__init__`` as the package)."""
    out = {}
    for f in sorted(package.rglob("*.py")):
        parts = list(f.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every dotted name an import statement anywhere in ``tree`` may load (relative imports
    resolved against ``module``; ``from a import b`` gives both ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = imported_from(node, module, is_package)
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
    return names


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (each name cut back to the longest
    prefix that is a module; the root package itself left out)."""
    files = module_files(package)
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        edges = set()
        for target in imported_names(tree, name, f.name == "__init__.py"):
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != package.name:
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components that are cycles (Tarjan's algorithm, iterative), each
    sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1 or v in graph.get(v, ()):
                        found.append(sorted(component))
    return sorted(found)


def test_envman_has_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE))
    assert not found, "import cycles (break each by moving code to the module it belongs to):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_graph_sees_the_imports_that_run_late() -> None:
    """The graph is not empty and holds a lazy (in-function) import the package is known to make."""
    graph = import_graph(PACKAGE)
    assert "envman.main" in graph and "envman.boundary" in graph["envman.main"]
    assert "envman.run.command" in graph["envman.main"]  # imported inside main()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


#: Each way one module can import another, closing a cycle a -> b -> a (b.py imports a as shown).
BACK_EDGES = {
    "top level": "import pkg.a\n",
    "from module": "from pkg.a import thing\n",
    "from package import module": "from pkg import a\n",
    "relative": "from .a import thing\n",
    "relative module": "from . import a\n",
    "inside a function": "def f():\n    from pkg.a import thing\n",
    "type checking": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import Thing\n",
    "inside a method": "class C:\n    def m(self):\n        import pkg.a\n",
}


@pytest.mark.parametrize("back", BACK_EDGES.values(), ids=list(BACK_EDGES))
def test_every_kind_of_import_closes_a_cycle(tmp_path: Path, back: str) -> None:
    root = _package(tmp_path, {"a.py": "from pkg.b import x\nthing = 1\n", "b.py": back + "x = 1\n"})
    assert cycles(import_graph(root)) == [["pkg.a", "pkg.b"]]


def test_a_cycle_through_a_subpackage_and_a_long_cycle_are_named(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "sub/__init__.py": "", "sub/m.py": "from ..c import y\n",  # pkg.sub.m -> pkg.c
        "c.py": "from pkg.sub import m\ny = 1\n",                    # pkg.c -> pkg.sub.m (and pkg.sub)
        "d.py": "import pkg.e\n", "e.py": "import pkg.f\n", "f.py": "def g():\n    import pkg.d\n",
    })
    assert cycles(import_graph(root)) == [["pkg.c", "pkg.sub.m"], ["pkg.d", "pkg.e", "pkg.f"]]


def test_one_way_imports_and_the_root_package_are_no_cycle(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "__version__ = '1'\n",
        "a.py": "from pkg import __version__\nfrom pkg.b import x\n",  # a -> b, a -> pkg (left out)
        "b.py": "import pkg\nfrom pkg import __version__\nx = 1\n",       # b -> pkg only
        "c.py": "from pkg.a import missing_name\nimport json\n",          # c -> a, json is not ours
    })
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == set() and graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == []
