"""Many stacks at once (envman/images/stacks.py): the stacks named or every row of a platform,
exactly one of the two; each stack with the base it stands on; contexts rendered once per stack
name, two different stacks of one name refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.errors import UserError
from envman.images.stacks import StackPlan, plan_stacks, render_stacks, select_stacks
from envman.matrix.source import MatrixSource
from envman.render.options import RenderOptions
from envman.stack.resolve import resolve
from tests.unit.conftest import MINI


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_MATRIX", ":".join(str(p) for p in MINI))
    return MatrixSource.of(MINI)


@pytest.mark.parametrize("names, all_", [([], False), (["torch-2.4-cpu"], True)])
def test_names_or_all_exactly_one_of_them(source, names, all_):
    with pytest.raises(UserError, match="not both and not neither"):
        select_stacks(source, names, all_)


def test_all_is_every_row_of_the_platform(source, mini):
    stacks = select_stacks(source, [], True)
    assert [s.row for s in stacks] == [b.name for b in source.matrix.builds if "linux/amd64" in b.platforms]
    arm = select_stacks(source, [], True, "linux/arm64")
    assert all(s.platform == "linux/arm64" for s in arm)


def test_named_stacks_resolve_and_an_unknown_one_is_refused(source):
    (one,) = select_stacks(source, ["torch-2.4-cpu"], False)
    assert one == resolve(source.matrix, "torch-2.4-cpu")
    with pytest.raises(UserError):
        select_stacks(source, ["no-such-stack-9"], False)


def test_a_pulled_base_has_no_rebuild_and_the_matrix_is_loaded_only_when_asked(mini):
    stack = resolve(mini, "torch-2.4-cpu")
    loads = []

    def matrix():
        loads.append(1)
        return mini

    (plan,) = plan_stacks([stack], matrix, "pull", RenderOptions())
    assert plan.stack == stack and plan.base is None and loads == []


def test_one_stack_is_rendered_once_and_two_stacks_of_one_name_are_refused(mini, tmp_path):
    stack = resolve(mini, "torch-2.4-cpu")
    plan = StackPlan(stack, None, None)
    assert render_stacks([plan, plan], RenderOptions(), "classic", tmp_path / "out") == 1
    assert (tmp_path / "out" / stack.name / "Dockerfile").is_file()
    other = replace(stack, row=stack.row + "-other", python="3.99")
    with pytest.raises(UserError, match="both resolve to the stack name"):
        render_stacks([plan, StackPlan(other, None, None)], RenderOptions(), "classic", tmp_path / "again")
