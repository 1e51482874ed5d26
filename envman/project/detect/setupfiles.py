"""Readers of ``setup.py`` (with ``ast``, never run: ``setup()``'s literal arguments, names and
dict keys bound to literals, and a dependency table looked up by name) and ``setup.cfg``
(``[options]``), in the grammar of :mod:`envman.project.detect.sources`."""

from __future__ import annotations

import ast
import configparser
from dataclasses import replace
from itertools import islice
from typing import Callable, Iterator, Mapping

from envman.project.detect.facts import COMMAND, CUDA, FRAMEWORK, PYTHON, RANGE, Fact, Statement
from envman.project.detect.pins import requirement_facts
from envman.project.detect.repo import Repository
from envman.project.detect.sources import declared_python, line_numbers, python_spec, statements

#: At most this many strings are read from one ``setup()`` argument (``(a + a) + (a + a)`` nested
#: seven deep would otherwise yield its list 128 times).
MAX_LITERALS = 2000


def literal_strings(node: ast.AST, names: Mapping[str, ast.AST]) -> Iterator[ast.Constant]:
    """The string constants of a literal list/tuple (or a name bound to one at module level, a
    constant key of a dict literal bound to one, or ``a + b`` of such), without evaluating anything;
    at most :data:`MAX_LITERALS` of them."""

    return islice(_literal_strings(node, names, 0), MAX_LITERALS)


def _literal_strings(node: ast.AST, names: Mapping[str, ast.AST], depth: int) -> Iterator[ast.Constant]:
    if depth > 8:
        return
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                yield elt
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.Name) and node.id in names:
        yield from _literal_strings(names[node.id], names, depth + 1)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _literal_strings(node.left, names, depth + 1)
        yield from _literal_strings(node.right, names, depth + 1)
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        # ``requirements["install"]`` of a name bound to a dict literal at module level
        table = names.get(node.value.id) if isinstance(node.value, ast.Name) else node.value
        if isinstance(table, ast.Dict):
            for key, value in zip(table.keys, table.values):
                if isinstance(key, ast.Constant) and key.value == node.slice.value:
                    yield from _literal_strings(value, names, depth + 1)


def read_setup_py(repo: Repository, rel: str) -> list[Statement]:
    """``install_requires``, ``extras_require`` and ``python_requires`` of a ``setup(...)`` call,
    where they are literals (or names bound to literals at module level)."""
    text = repo.read(rel)
    if text is None:
        return []
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = stmt.value
    lines = text.splitlines()
    out: list[Statement] = []
    inside: set[int] = set()  # the nodes of ``setup(...)`` calls

    def shown(c: ast.AST) -> str:
        n = getattr(c, "lineno", 0)
        return lines[n - 1] if 0 < n <= len(lines) else ""

    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        fn = call.func
        if not ((isinstance(fn, ast.Name) and fn.id == "setup") or (isinstance(fn, ast.Attribute) and fn.attr == "setup")):
            continue
        for kw in call.keywords:
            if kw.arg in ("install_requires", "requires"):
                for c in literal_strings(kw.value, names):
                    out += statements(rel, c.lineno, shown(c), "setup.py", requirement_facts(str(c.value)))
            elif kw.arg == "extras_require":
                value = names.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
                if isinstance(value, ast.Dict):
                    for v in value.values:
                        for c in literal_strings(v, names):
                            out += statements(rel, c.lineno, shown(c), "setup.py", requirement_facts(str(c.value)), RANGE)
            elif kw.arg == "python_requires":
                for c in literal_strings(kw.value, names):
                    out += declared_python(rel, c.lineno, shown(c), "setup.py", python_spec(str(c.value)))
        inside.update(id(n) for n in ast.walk(call))
    if not any(st.fact.kind == FRAMEWORK and st.fact.spec for st in out):
        out += _table_pins(rel, tree, inside, shown)
    return out


#: Framework statements read from a setup.py's requirement tables: a table names a framework a
#: few times (its pin, an extra's), and a file of thousands costs no more than a real one.
MAX_TABLE_PINS = 16


def _table_pins(rel: str, tree: ast.AST, inside: set[int], shown: Callable[[ast.AST], str]) -> list[Statement]:
    """A framework's requirement in a list of requirement strings that ``setup(...)`` reaches only
    through code: a dependency table looked up by name (``_deps = ["torch==2.6.0", ...]``, then
    ``deps["torch"]``), a list built inside ``main()`` and added to ``install_requires``. Read when
    the ``setup(...)`` call's own literals pin no framework; never more than a command, and only
    from a list of strings alone (``keywords``, ``classifiers`` and other lists of ``setup(...)``
    are its own arguments, read above)."""
    out: list[Statement] = []
    for node in ast.walk(tree):
        if id(node) in inside or not isinstance(node, (ast.List, ast.Tuple, ast.Set)) or not node.elts:
            continue
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            continue
        for c in islice(node.elts, MAX_LITERALS):
            facts = [f for f in requirement_facts(str(getattr(c, "value", ""))) if f.kind in (FRAMEWORK, CUDA)]
            if any(f.kind == FRAMEWORK and f.spec for f in facts):
                out += [replace(st, strength=RANGE if st.strength == RANGE else COMMAND)
                        for st in statements(rel, getattr(c, "lineno", 0), shown(c), "setup.py", facts)]
                if len(out) >= MAX_TABLE_PINS:
                    return out
    return out


def read_setup_cfg(repo: Repository, rel: str) -> list[Statement]:

    text = repo.read(rel)
    if text is None:
        return []
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(text)
    except configparser.Error:
        return []
    number = line_numbers(text)
    out: list[Statement] = []
    if cfg.has_section("options"):
        for line in cfg.get("options", "install_requires", fallback="").splitlines():
            if line.strip() and not line.strip().startswith("#"):
                out += statements(rel, number(line), line, "setup.cfg", requirement_facts(line.split("#")[0]))
        py = cfg.get("options", "python_requires", fallback="").strip()
        if py:
            out += declared_python(rel, number("python_requires", key=True), f"python_requires = {py}", "setup.cfg", python_spec(py))
    if cfg.has_section("options.extras_require"):
        for _, value in cfg.items("options.extras_require"):
            for line in value.splitlines():
                if line.strip():
                    out += statements(rel, number(line), line, "setup.cfg", requirement_facts(line.split("#")[0]), RANGE)
    return out
