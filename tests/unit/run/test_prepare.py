"""Tests of ``envman/run/prepare.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.project.settings import CliOverrides, UserConfig, merge_settings
from envman.project.file import load_project, project_identity
from envman.stack.resolve import resolve
from envman.run.prepare import PreflightError, prepare_run

from tests.support.fake_engine import FakeEngine

from tests.unit.run.test_plan import NOGPU, dirs, write_report  # noqa: F401 (shared with that file)


def prepared(tmp_path, mini, text, engine, *, cli=CliOverrides(), built=None, **kw):
    root = tmp_path / "p"
    root.mkdir(exist_ok=True)
    (root / "envman.toml").write_text(text)
    p = load_project(root)
    stack = resolve(mini, "torch-2.4-cuda12.4")
    settings = merge_settings(p, UserConfig(), cli, stack_is_cpu=lambda s: False)

    def build_image(proj, s, base_id):
        built.append(base_id)
        return "envman/project-x:built"

    return prepare_run(p, settings, stack, engine=engine, detect_host=lambda: NOGPU, suggest=lambda *a: None,
                       build_image=build_image, uid=1000, gid=1001, **kw)


def test_prepare_cpu_run_of_a_project_without_extras(tmp_path, mini):
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    built = []
    prep = prepared(tmp_path, mini, 'name = "p"\nstack = "torch-2.4-cuda12.4"\n', FakeEngine.with_images({stable: "sha256:stable"}),
                    cli=CliOverrides(gpus=None, gpus_set=True), built=built)
    assert prep.plan.image == "sha256:stable" and built == [] and prep.plan.gpus is None  # pinned by id
    assert (prep.plan.uid, prep.plan.gid) == (1000, 1001)
    assert prep.plan.root == str((tmp_path / "p").resolve())
    assert Path(prep.plan.home).is_dir() and prep.plan.home.endswith("/homes/p-" + project_identity("p", tmp_path / "p").rsplit("-", 1)[1])


def test_prepare_builds_the_project_image_once(tmp_path, mini):
    from envman.project.image import project_image_ref

    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    text = 'name = "p"\nstack = "torch-2.4-cuda12.4"\ngpus = "none"\nrequirements = ["einops"]\n'
    built = []
    prep = prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable"}), built=built)
    assert built == ["sha256:stable"] and prep.plan.image == "envman/project-x:built"
    ref = project_image_ref(load_project(tmp_path / "p"), "torch-2.4.1-cuda12.4-py3.10", "sha256:stable")
    from envman.images.provenance import record_built

    record_built("sha256:proj", ref, base="sha256:stable")  # this user's own earlier build
    built = []
    prep = prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable", ref: "sha256:proj"}), built=built)
    assert built == [] and prep.plan.image == "sha256:proj"


def test_prepare_refuses_a_gpu_run_without_gpus(tmp_path, mini):
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    with pytest.raises(PreflightError) as e:
        prepared(tmp_path, mini, 'name = "p"\nstack = "torch-2.4-cuda12.4"\n', FakeEngine.with_images({stable: "sha256:stable"}), built=[])
    assert e.value.exit_code == 1 and "--no-gpu" in e.value.line() and "(and 1 more: envman doctor)" in e.value.line()
    assert "\n" not in e.value.line()


@pytest.mark.parametrize(("line", "network"), [("", "project"), ('network = "project"\n', "project"),
                                                ('network = "none"\n', "none")])
def test_the_plan_joins_the_network_the_settings_say(tmp_path, mini, line, network):
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    prep = prepared(tmp_path, mini, 'name = "p"\nstack = "torch-2.4-cuda12.4"\n' + line,
                    FakeEngine.with_images({stable: "sha256:stable"}), cli=CliOverrides(gpus=None, gpus_set=True), built=[])
    assert prep.plan.network == network


@pytest.mark.parametrize("requirement, refused", [
    ("torch==1.13.1", True), ("torch<2", True), ("nvidia-cudnn-cu11==8.6.0.163", True),
    ("torch==2.4.1", False), ("torch>=2.0", False), ("einops", False),
])
def test_a_requirement_that_would_replace_the_stack_framework_is_refused_before_the_build(tmp_path, mini, requirement, refused):
    from envman.errors import UserError

    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    text = f'name = "p"\nstack = "torch-2.4-cuda12.4"\ngpus = "none"\nrequirements = ["einops", "{requirement}"]\n'
    built = []
    if refused:
        with pytest.raises(UserError) as e:
            prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable"}), built=built)
        assert built == [] and requirement in e.value.what and "would replace the stack's" in e.value.what
    else:
        prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable"}), built=built)
        assert built == ["sha256:stable"]
