"""The unit tests mirror the package: each module of envman has its own test file, and every test
file says which module it tests by its place and name.

* ``envman/<package>/<module>.py`` is tested by ``tests/unit/<package>/test_<module>.py`` (and
  ``test_<module>_<aspect>.py`` for a second file on it); a top-level ``envman/<module>.py`` by
  ``tests/unit/test_<module>.py``. How a file's name is read is
  :func:`tests.unit.rules.test_private_names.module_under_test`, the same reading that decides
  whose private names a test may import.
* A test file at the top of ``tests/unit/`` tests a top-level module: nothing else is left there.
* :data:`EXEMPT` lists the modules with nothing of their own to test: ``__main__`` files and pure
  re-exports. A package's ``__init__.py`` is tested through its package folder's files.
* :data:`PENDING` would list a module that has no test file of its own yet (none does now). An
  entry that gains one fails the rule until it is removed, so the list only shrinks.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.rules.test_private_names import RULES, envman_modules, module_under_test

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "tests" / "unit"

#: module -> why it has no test file of its own
EXEMPT = {
    "envman/__main__.py": "python -m envman: calls envman.main.main",
    "envman/probe/app/__main__.py": "python -m envman.probe.app: calls the probe's cli.entry",
    "envman/cli/complete.py": "re-exports envman.run.complete's completers for the typer declarations",
}

#: modules without a test file of their own yet (see the module docstring)
PENDING: frozenset[str] = frozenset()


def _path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def modules_with_tests(unit: Path = UNIT) -> dict[str, list[str]]:
    """Each envman module (as a path) -> the unit test files that test it."""
    modules = envman_modules()
    out: dict[str, list[str]] = {}
    for f in sorted(unit.rglob("test_*.py")):
        if RULES in f.relative_to(unit).parts[:1]:
            continue
        tested = module_under_test(f, modules)
        if tested is not None:
            out.setdefault(_path(tested), []).append(str(f.relative_to(ROOT)))
    return out


def _modules() -> list[str]:
    return sorted(str(f.relative_to(ROOT)) for f in (ROOT / "envman").rglob("*.py")
                  if "__pycache__" not in f.parts and f.name != "__init__.py")


def test_every_module_has_a_test_file_of_its_own():
    tested = modules_with_tests()
    missing = [m for m in _modules() if m not in tested and m not in EXEMPT and m not in PENDING]
    assert not missing, ("modules with no tests/unit/<package>/test_<module>.py (write one that tests what the "
                         "module does): " + ", ".join(missing))


def test_the_pending_list_only_shrinks():
    tested = modules_with_tests()
    modules = set(_modules())
    done = sorted(m for m in PENDING if m in tested)
    gone = sorted(m for m in PENDING | set(EXEMPT) if m not in modules)
    assert not done, "modules that have a test file now: remove them from PENDING: " + ", ".join(done)
    assert not gone, "no such module: remove it from the list: " + ", ".join(gone)
    assert not PENDING & set(EXEMPT)


def test_no_test_file_at_the_top_of_the_unit_tests_but_those_of_top_level_modules():
    modules = envman_modules()
    stray = [f.name for f in sorted(UNIT.glob("test_*.py"))
             if (m := module_under_test(f, modules)) is None or m.count(".") != 1]
    assert not stray, ("test files at the top of tests/unit/ that test no top-level envman module (move them to "
                       "tests/unit/<package>/, named after the module they test): " + ", ".join(stray))


def test_the_mirror_is_read_from_the_place_and_the_name():
    got = modules_with_tests()
    assert {"tests/unit/render/test_plan.py", "tests/unit/render/test_plan_cuda_libs.py"} <= set(got["envman/render/plan.py"])
    assert got["envman/labels.py"] == ["tests/unit/test_labels.py"]
    assert "tests/unit/run/test_plan.py" in got["envman/run/plan.py"]  # the same name in another package
    assert not any("/rules/" in f for files in got.values() for f in files)  # a rule tests no one module
    assert all(m.startswith("envman/") and m.endswith(".py") for m in got)
