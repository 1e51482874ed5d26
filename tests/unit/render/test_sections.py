"""The plan's sections (envman/render/sections.py): frozen, typed records, no loose types."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from envman.render import sections as S
from envman.render.options import RenderOptions
from envman.render.plan import stack_plan
from envman.render.sections import DockerfilePlan
from tests.unit.render.test_dockerfile import make_stack


# --- the plan is data: frozen and typed --------------------------------------------------------


def _section_types() -> set[type]:
    seen: set[type] = set()
    todo: list[type] = [DockerfilePlan]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for hint in get_type_hints(cls).values():
            todo += [t for t in _leaf_types(hint) if dataclasses.is_dataclass(t)]
    return seen


def _leaf_types(hint: Any) -> list[Any]:
    args = get_args(hint)
    if get_origin(hint) in (Union, types.UnionType, tuple) and args:
        return [leaf for a in args if a is not Ellipsis for leaf in _leaf_types(a)]
    return [hint]


def test_every_section_is_a_frozen_dataclass_with_no_loose_types():
    sections = _section_types()
    assert {S.BaseImage, S.OsPackages, S.Python, S.Framework, S.UvInstaller, S.Nvidia, S.Project, S.Requirements,
            S.PipPackages, S.EnvmanFiles, S.Label, S.Wheelhouse, S.NetworkOptions, S.BuilderOptions} <= sections
    for cls in sections:
        assert cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        for name, hint in get_type_hints(cls).items():
            for leaf in _leaf_types(hint):
                assert leaf is not Any and get_origin(leaf) not in (dict, list) and leaf not in (dict, list, object), (cls, name)
    plan = stack_plan(make_stack(), RenderOptions(), [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.base = plan.base  # type: ignore[misc]


@pytest.mark.parametrize("kind, ca, env, buildkit, setup", [
    ("classic", None, (), False, False),
    ("buildkit", None, (), True, False),
    ("classic", "/ca", (), False, True),  # a CA bundle to merge is a setup step, on either builder
    ("buildkit", None, (("PIP_INDEX_URL", "x"),), True, True),  # variables alone are one too
])
def test_builder_options_say_which_dialect_and_whether_a_step_starts_with_setup(kind, ca, env, buildkit, setup):
    opts = S.BuilderOptions(kind=kind, pip_cache=(), ca_source=ca, step_env=env)
    assert (opts.buildkit, opts.step_setup) == (buildkit, setup)


def test_a_python_section_names_the_distributions_interpreter_and_defaults_to_the_shared_venv():
    from envman.render.imagepaths import BOOTSTRAP, UV_VERSION, VENV, VENV_PYTHON

    py = S.Python(version="3.11", strategy="apt", os="ubuntu22.04", mounts=(), pip_upgrade=None, pip_note="")
    assert py.exe == "python3.11"
    assert (py.venv, py.venv_python, py.bootstrap) == (VENV, VENV_PYTHON, BOOTSTRAP)
    assert py.bootstrap_python == f"{BOOTSTRAP}/bin/python" and py.uv_requirement == f"uv=={UV_VERSION}"
