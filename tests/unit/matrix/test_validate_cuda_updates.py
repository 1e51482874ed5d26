"""Each CUDA update has its own toolkit driver: a stack on an update's image needs that update's
figure (13.2 Update 1: 595.58.03, not the GA's 595.45.04). One negative test per rule of
``matrix validate`` for updates, and the stacks and the shipped data held to it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from envman.errors import MatrixError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.model import DriverVersion
from envman.matrix.validate import validate
from envman.stack.resolve import resolve

D = DriverVersion.parse
V = Version


def _release(m, key, **kw):
    return replace(m, cuda=tuple(replace(r, **kw) if r.key == key else r for r in m.cuda))


@pytest.fixture(scope="module")
def rel(mini):
    r = next(r for r in mini.cuda if r.key == "12.4")
    return replace(r, updates=((V("12.4.1"), D("550.54.15")),))


def test_the_driver_of_a_patch_is_its_update_else_the_latest_update_before_it_else_the_ga(rel):
    r = replace(rel, updates=((V("12.4.1"), D("550.54.15")), (V("12.4.3"), D("550.60.01"))))
    assert [str(r.toolkit_driver_for(p)) for p in (None, V("12.4"), V("12.4.0"), V("12.4.1"), V("12.4.2"), V("12.4.3"), V("12.4.9"))] == [
        "550.54.14", "550.54.14", "550.54.14", "550.54.15", "550.54.15", "550.60.01", "550.60.01"]
    assert r.min_driver_for(V("12.4.3")) == min(r.minor_compat_driver, D("550.60.01"))


@pytest.mark.parametrize("updates, what", [
    (((V("12.5.1"), D("555.42.06")),), "update 12.5.1 is not a release of CUDA 12.4"),
    (((V("12.4.2"), D("550.54.15")), (V("12.4.1"), D("550.54.15"))), "update 12.4.1 is listed after 12.4.2: list updates once each, in ascending order"),
    # listed twice: the second is not after the first either
    (((V("12.4.1"), D("550.54.15")), (V("12.4.1"), D("550.54.15"))), "update 12.4.1 is listed after 12.4.1: list updates once each, in ascending order"),
    (((V("12.4.1"), D("550.54.10")),), "update 12.4.1 needs driver 550.54.10, older than the 550.54.14 of the release before it"),
    (((V("12.4.1"), D("550.60.01")), (V("12.4.2"), D("550.54.15"))), "update 12.4.2 needs driver 550.54.15, older than the 550.60.01 of the release before it"),
])
def test_each_update_rule_reports_exactly_its_problem(mini, updates, what):
    problems = validate(_release(mini, "12.4", updates=updates))
    assert [(p.where, p.what) for p in problems] == [("cuda 12.4", what)]


def test_a_stack_on_an_update_image_carries_that_updates_driver(mini, rel):
    m = replace(mini, cuda=tuple(rel if r.key == "12.4" else r for r in mini.cuda))
    stack = resolve(m, "torch-2.4.1-cuda12.4")
    assert stack.base_image.endswith(":12.4.1-base-ubuntu22.04")
    assert stack.toolkit_driver == "550.54.15"  # not the GA's 550.54.14


def test_shipped_stack_on_13_2_update_1_needs_595_58_03():
    stack = resolve(load_matrix(), "torch-2.15-cuda13.2")
    assert stack.base_image.startswith("nvidia/cuda:13.2.1-") and stack.toolkit_driver == "595.58.03"


def test_every_shipped_update_has_a_driver_no_older_than_its_ga():
    for r in load_matrix().cuda:
        assert all(d >= r.toolkit_driver and (v.major, v.minor) == (r.version.major, r.version.minor) for v, d in r.updates), r.key


@pytest.mark.parametrize("entry", ['{ cuda = "12.4", toolkit_driver = "550.54.15" }', '{ cuda = "12.4.1" }',
                                   '{ cuda = "12.4.1", toolkit_driver = "new" }', '"12.4.1"',
                                   '{ cuda = "12.4.1", toolkit_driver = "550.54.15", label = "Update 1" }'])
def test_a_malformed_update_is_rejected_naming_the_key(tmp_path, entry):
    p = tmp_path / "c.toml"
    p.write_text('schema = 1\nkind = "cuda"\n[[release]]\nversion = "12.4"\ntoolkit_driver = "550.54.14"\n'
                 f'minor_compat_driver = "525.60.13"\nsm = ["8.0"]\nupdates = [{entry}]\nsource = ["s"]\nstatus = "confirmed"\n')
    with pytest.raises(MatrixError) as exc:
        load_files([p])
    assert "release[0].updates" in str(exc.value)
