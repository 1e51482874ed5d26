"""scripts/mutation.py: every group names files that exist, and the configuration it writes is the
repository's pyproject.toml with only ``[tool.mutmut]`` replaced by that group's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MUT = _script()
GROUPS = MUT.groups()


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_every_group_names_existing_modules_and_tests(name):
    g = GROUPS[name]
    assert g["modules"] and g["tests"]
    for p in g["modules"] + g["tests"]:
        assert (ROOT / p).is_file(), f"{name}: {p} does not exist"
    assert all(p.startswith("envman/") and p.endswith(".py") for p in g["modules"])


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_the_written_pyproject_differs_only_in_tool_mutmut(name):
    g = GROUPS[name]
    written = tomllib.loads(MUT._pyproject(MUT._section(g, ["envman", "templates", "tests"])))
    original = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    cfg = written["tool"].pop("mutmut")
    base = original["tool"].pop("mutmut")
    assert written == original
    assert cfg["only_mutate"] == g["modules"]
    assert cfg["pytest_add_cli_args_test_selection"] == g["tests"]
    assert cfg["also_copy"] == ["templates", "tests"]
    assert cfg["pytest_add_cli_args"] == base["pytest_add_cli_args"] + g.get("pytest_args", [])


def test_an_unknown_group_is_refused_with_the_list(capsys):
    assert MUT.main(["no-such-group"]) == 2
    err = capsys.readouterr().err
    assert "no-such-group" in err and "security" in err and "pure" in err


def test_open_lists_the_survivors_not_recorded_as_equivalent():
    results = "\n".join([
        "    envman.a.x_f__mutmut_1: survived", "    envman.a.x_f__mutmut_2: killed", "    envman.a.x_f__mutmut_3: timeout",
        "    envman.a.x_f__mutmut_4: no tests", "    envman.a.x_f__mutmut_5: survived", "    envman.a.x_f__mutmut_6: not checked",
        "    envman.a.xǁCǁm__mutmut_7: suspicious",
    ])
    assert MUT.open_mutants(results, {"envman.a.x_f__mutmut_5": "why"}) == [
        "envman.a.x_f__mutmut_1", "envman.a.x_f__mutmut_4", "envman.a.xǁCǁm__mutmut_7"]


def test_every_recorded_equivalent_names_a_module_of_a_group_and_gives_its_reason():
    modules = {p[:-3].replace("/", ".") for g in GROUPS.values() for p in g["modules"]}
    recorded = MUT.equivalents()
    assert recorded
    for name, why in recorded.items():
        assert name.rsplit(".", 1)[0] in modules and "__mutmut_" in name, name
        assert len(why) > 10, name
