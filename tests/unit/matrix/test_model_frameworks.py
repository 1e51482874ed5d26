"""A framework's knowledge sits in several places; each names exactly the frameworks envman builds.

docs/contributing.md ("Add a framework") walks through the places; this test fails on a framework
added to one place and forgotten in another, and names the place.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from envman.ci.report import FRAMEWORK_NAMES
from envman.matrix.model import FRAMEWORKS
from envman.matrix.update import DERIVERS, PROJECTS
from envman.project.detect.code import MODULES
from envman.project.detect.facts import BUILT
from envman.project.detect.pins import FRAMEWORK_DISTS
from envman.stack.names import ALIASES

ROOT = Path(__file__).resolve().parents[3]


def _module_table(path: str, name: str) -> ast.expr:
    """A module-level table of the probe, which runs on Python 3.6 in images and is read, not imported."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    raise AssertionError(f"{path}: {name} is not assigned at module level")


def _probe_contract() -> set[str]:
    return set(ast.literal_eval(_module_table("envman/probe/app/contract.py", "FRAMEWORKS")))


def _probe_adapters() -> set[str]:
    table = _module_table("envman/probe/app/frameworks/__init__.py", "ADAPTERS")
    assert isinstance(table, ast.Dict)
    return {ast.literal_eval(k) for k in table.keys if k is not None}


PLACES: dict[str, Callable[[], set[str]]] = {
    "envman/matrix/update.py PROJECTS": lambda: set(PROJECTS),
    "envman/matrix/update.py DERIVERS": lambda: set(DERIVERS),
    "envman/stack/names.py ALIASES": lambda: set(ALIASES.values()),
    "envman/ci/report.py FRAMEWORK_NAMES": lambda: set(FRAMEWORK_NAMES),
    "envman/project/detect/facts.py BUILT": lambda: set(BUILT),
    "envman/project/detect/pins.py FRAMEWORK_DISTS": lambda: {fw for fw, _gpu in FRAMEWORK_DISTS.values()},
    "envman/project/detect/code.py MODULES": lambda: {MODULES[m] for m in FRAMEWORKS if MODULES.get(m) == m},
    "envman/probe/app/contract.py FRAMEWORKS": _probe_contract,
    "envman/probe/app/frameworks/__init__.py ADAPTERS": _probe_adapters,
    "matrices/<framework>.toml": lambda: {fw for fw in FRAMEWORKS if (ROOT / "matrices" / f"{fw}.toml").is_file()},
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_every_place_names_every_framework(place: str) -> None:
    assert PLACES[place]() == set(FRAMEWORKS), f"{place} disagrees with envman/matrix/model.py FRAMEWORKS"

