"""A name that starts with ``_`` is private to its module; a module that starts with ``_`` is
private to its package. No other module imports them.

The rule, checked on the syntax tree of every Python file of envman, its tests, scripts and
benchmarks (imports inside functions included, relative imports resolved):

* ``from M import _name`` is allowed only inside M itself, which never needs it: any other module
  that wants the name asks M to make it public (a docstring, no underscore), or moves the code to
  where it is used.
* In envman, ``M._name`` (an attribute of an imported module) is the same import and is refused
  too; a private module (``envman/cli/_out.py``) is imported only from its own package (a test may
  import one: it tests the helpers the package keeps to itself).
* A test may reach into the module it tests, and only that one: ``tests/unit/<pkg>/test_<module>.py``
  (and ``test_<module>_<aspect>.py``) tests ``envman/<pkg>/<module>.py``, and may import its private
  names to pin an internal table or a step the public API does not expose. The tested module is
  read from the file's name, so a test of one module cannot lean on another's internals; with
  no package folder (``tests/unit/test_<module>.py``) it is the envman module of that name.
  Reading or faking a private name through the module object (``monkeypatch.setattr(mod, "_x",
  ...)``) is how tests fake a seam and is left alone there.
* Test support modules share what they share through public names (``tests/support/``, fixtures).
* Only our own modules are checked (``envman``, ``tests``, ``scripts``, ``benchmarks``): what a
  test does with a third-party library's internals is that test's business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.imports import imported_from

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "envman"
TREES = ("envman", "tests", "scripts", "benchmarks")
#: ``tests/unit/rules/``: rules that hold over the whole package (imports, docs, security, the CLI
#: contract); its tests test no one module, so they may import no module's private names
RULES = "rules"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def envman_modules() -> set[str]:
    return {_dotted(f) for f in PACKAGE.rglob("*.py")}


def module_under_test(test_file: Path, modules: set[str]) -> str | None:
    """The envman module a test file tests (see the module docstring), else ``None``."""
    rel = test_file.relative_to(ROOT)
    if rel.parts[:2] != ("tests", "unit") or not rel.stem.startswith("test_") or rel.parts[2] == RULES:
        return None
    package = ".".join(("envman", *rel.parts[2:-1]))
    words = rel.stem[len("test_"):].split("_")
    for n in range(len(words), 0, -1):  # the longest leading words that name a module
        name = "_".join(words[:n])
        if len(rel.parts) > 3:
            for candidate in (f"{package}.{name}", f"{package}._{name}"):  # test_out.py tests _out.py
                if candidate in modules:
                    return candidate
        else:
            found = sorted(m for m in modules if m.rsplit(".", 1)[-1] in (name, f"_{name}"))
            if len(found) == 1:
                return found[0]
    return None


OURS = ("envman", "tests", "scripts", "benchmarks")


def _ours(module: str) -> bool:
    return module.split(".", 1)[0] in OURS


def violations(source: str, module: str, *, is_package: bool = False, tested: str | None = None,
               in_package: bool = True) -> list[str]:
    """Every import of another module's private name in one module's source."""
    tree = ast.parse(source)
    own = {module, tested}
    out = []
    modules: dict[str, str] = {}  # local name -> the envman module it is bound to

    def private_module(target: str) -> bool:
        if not in_package or not _ours(target):
            return False
        parts = target.split(".")
        for i, part in enumerate(parts):
            if _private(part):
                owner = ".".join(parts[:i])  # the package the private module belongs to
                return not (module == owner or module.startswith(owner + "."))
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if private_module(alias.name) and alias.name not in own:
                    out.append(f"line {node.lineno}: import {alias.name}")
                if alias.name.startswith("envman."):
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source_module = imported_from(node, module, is_package)
            if private_module(source_module) and source_module not in own:
                out.append(f"line {node.lineno}: from {source_module} import ...")
            for alias in node.names:
                if not _ours(source_module):
                    continue
                if _private(alias.name) and source_module not in own and f"{source_module}.{alias.name}" not in own:
                    out.append(f"line {node.lineno}: from {source_module} import {alias.name}")
                elif source_module.startswith("envman"):
                    modules[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    if in_package:
        known = envman_modules()
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and modules.get(node.value.id) in known and modules[node.value.id] not in own):
                out.append(f"line {node.lineno}: {modules[node.value.id]}.{node.attr}")
    return out


def _files() -> list[Path]:
    return sorted(f for tree in TREES for f in (ROOT / tree).rglob("*.py") if "__pycache__" not in f.parts)


def test_no_module_imports_another_modules_private_names() -> None:
    modules = envman_modules()
    found = []
    for f in _files():
        in_package = f.is_relative_to(PACKAGE)
        for v in violations(f.read_text(encoding="utf-8"), _dotted(f), is_package=f.name == "__init__.py",
                            tested=module_under_test(f, modules), in_package=in_package):
            found.append(f"{f.relative_to(ROOT)}: {v}")
    assert not found, "private names imported across modules (make them public, or move the code):\n" + "\n".join(found)


def test_every_test_file_under_a_package_folder_names_its_module() -> None:
    modules = envman_modules()
    nested = [f for f in (ROOT / "tests" / "unit").rglob("test_*.py")
              if len(f.relative_to(ROOT).parts) > 3 and f.relative_to(ROOT).parts[2] != RULES]
    stale = [str(f.relative_to(ROOT)) for f in sorted(nested) if module_under_test(f, modules) is None]
    assert not stale, "test files that name no module of their package (rename them after it): " + ", ".join(stale)


CASES = {
    # (source, importing module, tested module) -> the breaches found
    "from another module": ("from envman.a import _x\n", "envman.b", None, ["from envman.a import _x"]),
    "relative": ("from .a import _x\n", "envman.b", None, ["from envman.a import _x"]),
    "inside a function": ("def f():\n    from envman.a import _x, y\n", "envman.b", None, ["from envman.a import _x"]),
    "a private module from outside its package": ("from envman.cli._out import emit\n", "envman.run.x", None,
                                                  ["from envman.cli._out import ..."]),
    "an attribute of an imported module": ("from envman import paths\npaths._data('x')\n", "envman.b", None,
                                           ["envman.paths._data"]),
    "an attribute through import as": ("import envman.paths as P\nP._data\n", "envman.b", None, ["envman.paths._data"]),
    "the tested module, in a test": ("from envman.a import _x\n", "tests.unit.test_a", "envman.a", []),
    "a private module, in a test": ("from envman.cli._out import emit\n", "tests.unit.test_a", None, []),
    "a third-party private module": ("from typer._click import x\nfrom pip._internal import _y\n", "envman.b",
                                     None, []),
    "another module, in a test": ("from envman.b import _x\n", "tests.unit.test_a", "envman.a",
                                  ["from envman.b import _x"]),
    "a private module inside its package": ("from envman.cli._out import emit\n", "envman.cli.build", None, []),
    "dunder names": ("from envman import __version__\n", "envman.b", None, []),
    "public names": ("from envman.a import x\nimport envman.a\n", "envman.b", None, []),
}


@pytest.mark.parametrize("source, module, tested, expected", CASES.values(), ids=list(CASES))
def test_the_rule_on_each_kind_of_import(source: str, module: str, tested: str | None, expected: list[str]) -> None:
    got = [v.split(": ", 1)[1] for v in violations(source, module, tested=tested, in_package=module.startswith("envman"))]
    assert got == expected


def test_the_tested_module_is_read_from_the_test_files_name() -> None:
    modules = {"envman.run.plan", "envman.render.plan", "envman.matrix.validate", "envman.cluster.export",
               "envman.cli.export", "envman.labels"}
    unit = ROOT / "tests" / "unit"
    assert module_under_test(unit / "run" / "test_plan.py", modules) == "envman.run.plan"
    assert module_under_test(unit / "render" / "test_plan_golden.py", modules) == "envman.render.plan"
    assert module_under_test(unit / "test_plan.py", modules) is None  # two modules named plan: none
    assert module_under_test(unit / "test_labels.py", modules) == "envman.labels"
    assert module_under_test(unit / "test_validate_rules.py", modules) == "envman.matrix.validate"
    assert module_under_test(unit / "run" / "test_labels.py", modules) is None  # not in that package
    assert module_under_test(unit / "cli" / "test_out.py", modules | {"envman.cli._out"}) == "envman.cli._out"
    assert module_under_test(ROOT / "tests" / "docker" / "test_labels.py", modules) is None
    assert module_under_test(unit / "rules" / "test_labels.py", modules) is None  # a rule tests no one module
