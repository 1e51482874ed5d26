"""A layer on an envman image (envman/render/layerplan.py): a project's apt packages, requirements
and lock, the notebook layer, and a layer's own indexes and CA bundle, each checked before it can
reach a Dockerfile."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from envman.errors import RenderError
from envman.project.lock import REPORT_PATH
from envman.render import imagepaths as IP
from envman.render import sections as S
from envman.render.options import RenderOptions
from envman.render.layerplan import layer_network, notebook_plan, project_plan
from envman.render.sections import DockerfilePlan
from envman.render.template import render_dockerfile
from tests.unit.render.test_plan import BASE_ID


def project(*, name: str = "demo", stack: str = "torch-2.4.1-cuda12.4-py3.10", base: str = BASE_ID,
            apt: tuple[str, ...] = (), requirements: bool = False, locked: bool = False) -> DockerfilePlan:
    return project_plan(name, stack, base, apt=apt, requirements=requirements, locked=locked,
                        report_path=REPORT_PATH, where="envman.toml")


def test_project_with_apt_only_has_os_packages_and_no_requirements():
    plan = project(apt=("ffmpeg", "zlib1g-dev"))
    assert plan.template == "project.Dockerfile.j2"
    assert plan.base == S.BaseImage(BASE_ID, BASE_ID, None)
    assert plan.os_packages is not None and plan.os_packages.packages == ("ffmpeg", "zlib1g-dev")
    assert plan.project is not None and plan.project.requirements is None
    assert (plan.network, plan.python, plan.framework, plan.nvidia, plan.envman_files, plan.labels, plan.wheelhouse) == (
        None, None, None, None, None, (), None)


def test_project_requirements_without_a_lock_resolve_and_leave_a_report():
    plan = project(requirements=True)
    assert plan.os_packages is None
    req = plan.project.requirements  # type: ignore[union-attr]
    assert req is not None and req.copy == ("requirements.txt",) and req.check is None
    assert req.install == ("--report", REPORT_PATH, "-r", f"{IP.PROJECT_DIR}/requirements.txt")


def test_project_requirements_with_a_lock_install_hashes_and_check_the_closure():
    plan = project(apt=("git",), requirements=True, locked=True)
    req = plan.project.requirements  # type: ignore[union-attr]
    assert req is not None and req.copy == ("requirements.txt", "envman.lock.txt", "lockcheck.py")
    assert req.install == ("--require-hashes", "-r", f"{IP.PROJECT_DIR}/envman.lock.txt")
    assert req.check == (IP.VENV_PYTHON, f"{IP.PROJECT_DIR}/lockcheck.py", f"{IP.PROJECT_DIR}/requirements.txt",
                         f"{IP.PROJECT_DIR}/envman.lock.txt")
    assert plan.os_packages is not None and plan.os_packages.packages == ("git",)


@pytest.mark.parametrize("field, value", [
    ("name", "demo\n"), ("name", "Demo"), ("apt", ("curl\n",)), ("apt", ("curl; rm -rf /",)), ("apt", ("-o",)),
    ("stack", "s\nRUN x"), ("base", "sha256:x y"), ("base", ""),
])
def test_project_values_that_cannot_go_into_a_dockerfile_are_refused(field, value):
    kw: dict[str, Any] = {"apt": ("git",), field: value}
    with pytest.raises(RenderError) as err:
        project(**kw)
    assert "\n" not in str(err.value.what)


def test_a_locked_plan_without_requirements_has_no_requirements_layer():
    assert project(apt=("git",), locked=True).project == S.Project("demo", "torch-2.4.1-cuda12.4-py3.10", None)


def test_the_notebook_layer_is_one_pip_install_on_the_image_a_project_runs_on():
    plan = notebook_plan(BASE_ID, "jupyterlab>=4.2,<5")
    assert plan.template == "project.Dockerfile.j2" and plan.base == S.BaseImage(BASE_ID, BASE_ID, None)
    assert plan.pip_packages == S.PipPackages(IP.VENV_PYTHON, ("--no-cache-dir", "--disable-pip-version-check"),
                                              ("jupyterlab>=4.2,<5",))
    assert (plan.os_packages, plan.project, plan.python, plan.framework, plan.labels) == (None, None, None, None, ())
    for base, requirement in (("sha256:x y", "jupyterlab"), (BASE_ID, 'jupyterlab"; rm -rf /; "'), (BASE_ID, "a$(id)"),
                              (BASE_ID, "jupyterlab\n")):
        with pytest.raises(RenderError):
            notebook_plan(base, requirement)


def test_the_notebook_requirement_is_double_quoted_and_what_sh_reads_inside_is_refused():
    plan = notebook_plan(BASE_ID, "jupyterlab>=4,<5")
    assert plan.pip_packages is not None and plan.pip_packages.requirements == ("jupyterlab>=4,<5",)
    assert '--disable-pip-version-check "jupyterlab>=4,<5"' in render_dockerfile(plan)
    for bad in ('a"b', "a$b", "a`b", "a\\b", "a\nb"):
        pp = dataclasses.replace(plan.pip_packages, requirements=(bad,))
        with pytest.raises(RenderError):
            render_dockerfile(dataclasses.replace(plan, pip_packages=pp))


def test_a_layer_exports_its_indexes_and_merges_its_ca_bundle_per_step():
    ca = Path(__file__).resolve().parents[3] / "examples" / "golden" / "_inputs" / "ca-bundle.pem"
    net = layer_network(RenderOptions(ca_bundle=ca, pip_index="https://pypi.example/simple",
                                        pip_extra_index="https://u:p@x.example/simple"))
    assert net.builder.ca_source == IP.CA_MOUNT and net.builder.pip_cache == ("--no-cache-dir",)
    assert net.builder.step_env == (*IP.CA_STEP_ENV, ("PIP_INDEX_URL", "https://pypi.example/simple"))  # no credentials
    assert net.apt_get == ("apt-get", "-o", f"Acquire::https::CAInfo={IP.CA_MERGED}")
    plain = layer_network(RenderOptions(pip_index="https://pypi.example/simple"))
    assert plain.builder.ca_source is None and plain.builder.step_setup and plain.network is None
    assert not layer_network(None).builder.step_setup
