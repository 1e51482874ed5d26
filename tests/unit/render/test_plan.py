"""The typed Dockerfile plan: which sections each kind of image has, what they hold, that the
plan is frozen and typed; its layout as steps (envman.render.layout), and templates that decide
nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jinja2
import jinja2.nodes as jn
import pytest

from envman import labels as L
from envman.errors import RenderError
from envman.project.lock import REPORT_PATH
from envman.render import imagepaths as IP
from envman.render import sections as S
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.render.layerplan import layer_network, notebook_plan, project_plan
from envman.render.plan import stack_plan
from envman.render.sections import DockerfilePlan
from envman.render.quote import dockerfile_quote
from envman.render.layout import dockerfile_steps
from envman.render.steps import BindMount, CacheMount, FromStep, LabelStep, RunStep, SecretMount, Step
from envman.render.template import jinja_env, render_dockerfile
from tests.unit.render.test_dockerfile import PROBE, cpu_stack, make_stack

BASE_ID = "sha256:" + "c" * 64


def tf_stack():
    """TensorFlow 1.15 on a cudnn base: CUDA from the base image's system libraries, no pip index."""
    return make_stack(
        name="tensorflow-1.15.0-cuda10.0-py3.6", row="tensorflow-1.15.0-cuda10.0", framework="tensorflow",
        framework_version="1.15.0", variant="gpu", cuda="10.0", python="3.6", os="ubuntu18.04",
        base_image="nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04", min_driver="410.48", minor_compat=False,
        minor_compat_status=None, packages=("tensorflow-gpu==1.15.0",), index_url=None,
    )


def project(*, name: str = "demo", stack: str = "torch-2.4.1-cuda12.4-py3.10", base: str = BASE_ID,
            apt: tuple[str, ...] = (), requirements: bool = False, locked: bool = False) -> DockerfilePlan:
    return project_plan(name, stack, base, apt=apt, requirements=requirements, locked=locked,
                        report_path=REPORT_PATH, where="envman.toml")


# --- stack images ------------------------------------------------------------------------------


def test_torch_from_the_pytorch_index_has_every_stack_section():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    assert plan.template == "Dockerfile.j2" and plan.project is None
    assert plan.base == S.BaseImage("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-base-ubuntu22.04", None)
    assert plan.os_packages is not None and plan.os_packages.hide_nvidia_sources
    assert plan.os_packages.packages == ("ca-certificates", "python3.10", "python3.10-venv")
    assert plan.python is not None and (plan.python.strategy, plan.python.exe) == ("apt", "python3.10")
    assert plan.framework is not None and plan.framework.installer == "pip" and plan.framework.uv is None
    assert plan.framework.pip_args == ("--index-url", "https://download.pytorch.org/whl/cu124", "torch==2.4.1",
                                       "torchvision==0.19.1")
    assert plan.nvidia is not None and ("NVIDIA_REQUIRE_CUDA", "driver>=525.60.13") in plan.nvidia.env
    assert plan.wheelhouse is None and plan.envman_files is not None


def test_tensorflow_on_system_cuda_needs_the_driver_to_support_its_cuda():
    plan = stack_plan(tf_stack(), RenderOptions(), [])
    assert plan.nvidia is not None and ("NVIDIA_REQUIRE_CUDA", "cuda>=10.0") in plan.nvidia.env
    assert plan.framework is not None and plan.framework.pip_args == ("tensorflow-gpu==1.15.0",)  # PyPI, no index options
    assert plan.os_packages is not None and "python3-distutils" in plan.os_packages.packages  # Ubuntu 18.04
    assert plan.python is not None and plan.python.pip_upgrade == ("--upgrade", "pip<22")


def test_a_cpu_stack_has_no_nvidia_section_and_leaves_apt_sources_alone():
    plan = stack_plan(cpu_stack(), RenderOptions(), [])
    assert plan.nvidia is None
    assert plan.os_packages is not None and not plan.os_packages.hide_nvidia_sources
    assert plan.base.from_image == "ubuntu:24.04"


def test_buildkit_moves_caches_into_mounts_and_installs_with_uv_from_python_3_8():
    classic = stack_plan(make_stack(), RenderOptions(), [], "classic")
    bk = stack_plan(make_stack(), RenderOptions(), [], "buildkit")
    assert (classic.builder.kind, classic.builder.buildkit, bk.builder.buildkit) == ("classic", False, True)
    assert classic.builder.pip_cache == ("--no-cache-dir",) and bk.builder.pip_cache == ("--cache-dir", IP.PIP_CACHE)
    assert bk.os_packages is not None and not bk.os_packages.clean_lists
    assert [type(m) for m in bk.os_packages.mounts] == [CacheMount, CacheMount]
    assert classic.os_packages is not None and classic.os_packages.mounts == ()
    assert bk.framework is not None and bk.framework.installer == "uv" and bk.framework.uv is not None
    assert bk.framework.uv.args == ("--index-strategy", "unsafe-best-match", *classic.framework.pip_args)  # type: ignore[union-attr]
    old = stack_plan(tf_stack(), RenderOptions(), [], "buildkit")
    assert old.framework is not None and (old.framework.installer, old.framework.uv) == ("pip", None)


def test_network_options_land_in_their_sections(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    opts = RenderOptions(registry_mirror="mirror.example:5000", ca_bundle=ca, pip_index="https://pypi.example/simple",
                         apt_mirror="http://apt.example/ubuntu")
    plan = stack_plan(make_stack(), opts, [])
    assert plan.base.from_image == "mirror.example:5000/nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert plan.network is not None and plan.network.ca_copy_dest == IP.CA_DEST and len(plan.network.ca_env) == 4
    assert plan.network.pip_env == (("PIP_INDEX_URL", "https://pypi.example/simple"),)
    assert plan.os_packages is not None and plan.os_packages.mirror == "http://apt.example/ubuntu"
    assert plan.os_packages.update_ca_certificates
    bk = stack_plan(make_stack(), opts, [], "buildkit")
    assert bk.network is not None and bk.network.ca_copy_dest is None and bk.network.ca_env == ()  # bind-mounted per step instead
    assert bk.builder.ca_source == IP.CA_MOUNT and bk.builder.step_env == IP.CA_STEP_ENV and bk.builder.step_setup
    assert dict(IP.CA_STEP_ENV) == {k: IP.CA_MERGED for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")}


def test_the_labels_section_holds_exactly_the_stack_labels_of_envman_labels():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    names = tuple(label.name for label in plan.labels)
    assert names == IP.STACK_LABELS == (L.MANAGED, L.NAME, L.STACK, L.VERSION)
    module_names = {v for k, v in vars(L).items() if k.isupper() and isinstance(v, str) and v.startswith(L.PREFIX)}
    assert set(names) <= module_names
    assert dict((label.name, label.value) for label in plan.labels)[L.MANAGED] == L.TRUE
    body = render_stack(make_stack(), RenderOptions(), probe=PROBE).dockerfile
    assert body.rsplit("\n", 2)[-2].startswith(f"LABEL {L.RENDER_HASH}=")  # the render hash comes last, alone


def test_stack_dockerfile_is_the_rendered_plan_plus_the_render_hash_line():
    stack = make_stack()
    ctx = render_stack(stack, RenderOptions(), probe=PROBE)
    body = render_dockerfile(stack_plan(stack, RenderOptions(), []))
    assert ctx.dockerfile == body + f'LABEL {L.RENDER_HASH}="{ctx.render_hash}"\n'


# --- project images ----------------------------------------------------------------------------


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


# --- the layout: steps decided in Python, templates that only print them -----------------------

TEMPLATES = ("Dockerfile.j2", "project.Dockerfile.j2", "base.Dockerfile.j2")


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_decides_nothing_and_reads_only_the_steps(name):
    """No if, macro, import or expression: every branch is taken in envman/render/layout.py, every
    instruction written by envman/render/steps.py."""
    env = jinja_env()
    tree = env.parse(env.loader.get_source(env, name)[0])  # type: ignore[union-attr]
    for kind in (jn.If, jn.CondExpr, jn.Macro, jn.Import, jn.FromImport, jn.Include, jn.Extends, jn.Assign, jn.Filter,
                 jn.Call, jn.Compare, jn.Getitem):
        assert not list(tree.find_all(kind)), (name, kind.__name__)
    loops = list(tree.find_all(jn.For))
    assert len(loops) == 1 and isinstance(loops[0].iter, jn.Name) and loops[0].iter.name == "steps"
    assert {n.name for n in tree.find_all(jn.Name)} == {"steps", "step"}
    assert {g.attr for g in tree.find_all(jn.Getattr)} == {"text"}


def _plans() -> list[DockerfilePlan]:
    ca = Path(__file__).resolve().parents[3] / "examples" / "golden" / "_inputs" / "ca-bundle.pem"
    corp = RenderOptions(ca_bundle=ca, pip_index="https://u:p@pypi.example/simple")
    plans = [stack_plan(stack, opts, [], builder, secret=builder == "buildkit" and opts is corp)
             for stack in (make_stack(), tf_stack(), cpu_stack()) for opts in (RenderOptions(), corp)
             for builder in IP.BUILDER_KINDS]
    return [*plans, project(apt=("git",)), project(requirements=True), project(apt=("git",), requirements=True, locked=True),
            notebook_plan(BASE_ID, "jupyterlab")]


@pytest.mark.parametrize("plan", _plans(), ids=lambda p: f"{p.template}-{p.builder.kind}")
def test_every_plan_is_laid_out_as_steps_from_its_from_line(plan):
    steps = dockerfile_steps(plan)
    assert all(isinstance(s, Step.__args__) for s in steps)  # type: ignore[attr-defined]
    froms = [s for s in steps if isinstance(s, FromStep)]
    assert froms == [FromStep(plan.base.from_image, plan.base.platform)]
    assert render_dockerfile(plan).startswith("".join(f"{s.text}\n" for s in steps))
    runs = [s for s in steps if isinstance(s, RunStep)]
    assert runs and all(s.text.startswith("RUN ") for s in runs)
    if plan.template == "Dockerfile.j2":
        assert isinstance(steps[-1], LabelStep) and steps[-1].pairs == tuple(
            f"{label.name}={dockerfile_quote(label.value)}" for label in plan.labels)


@pytest.mark.parametrize("plan", _plans(), ids=lambda p: f"{p.template}-{p.builder.kind}")
def test_only_buildkit_runs_mount_and_every_pip_step_mounts_the_caches_and_what_it_reads(plan):
    runs = [s for s in dockerfile_steps(plan) if isinstance(s, RunStep)]
    if not plan.builder.buildkit:
        assert all(s.mounts == () for s in runs)
        return
    ca = plan.os_packages is not None and any(isinstance(m, BindMount) and m.target == IP.CA_MOUNT
                                              for m in plan.os_packages.mounts)
    for run in runs[1:]:  # after the apt step: pip and uv
        kinds = [type(m) for m in run.mounts]
        assert kinds[:3] == [CacheMount] * 3
        assert (BindMount(IP.CA_CONTEXT_FILE, IP.CA_MOUNT) in run.mounts) == ca
        assert (SecretMount(IP.NETRC_SECRET, IP.NETRC_TARGET) in run.mounts) == ca  # the corporate options carry both


def test_strict_rendering_refuses_what_the_plan_lacks():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    for source in ("{{ plan.no_such_section }}", "{% if plan.base.no_such_field %}x{% endif %}"):
        with pytest.raises(jinja2.UndefinedError):
            jinja_env().from_string(source).render(plan=plan)


def test_a_missing_template_is_one_error_line(tmp_path, monkeypatch):
    import shutil

    from envman.render import template as T
    from envman.paths import templates_dir

    copy = tmp_path / "dockerfiles"
    shutil.copytree(templates_dir(), copy)
    (copy / "project.Dockerfile.j2").unlink()
    monkeypatch.setattr("envman.paths.templates_dir", lambda: copy)
    T.jinja_env.cache_clear()
    try:
        with pytest.raises(RenderError) as err:
            render_dockerfile(project(apt=("git",)))
        assert "project.Dockerfile.j2 is missing" in err.value.what and "\n" not in str(err.value)
    finally:
        T.jinja_env.cache_clear()


def _words_of(value: Any) -> list[str]:
    """Every string a plan holds outside its comments (title, notes) and labels."""
    if dataclasses.is_dataclass(value):
        return [w for f in dataclasses.fields(value) if f.name not in ("title", "note", "pip_note", "labels")
                for w in _words_of(getattr(value, f.name))]
    if isinstance(value, (tuple, list)):
        return [w for v in value for w in _words_of(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("plan", _plans(), ids=lambda p: f"{p.template}-{p.builder.kind}")
def test_a_plan_holds_words_as_they_are_and_the_layout_quotes_them(plan):
    words = _words_of(plan)
    assert words and not [w for w in words if w[:1] in "'\"" or w.endswith(" ")]  # nothing quoted or pre-joined


def test_a_word_that_needs_quotes_gets_them_where_the_dockerfile_is_written():
    plan = stack_plan(make_stack(), RenderOptions(), [])
    fw = dataclasses.replace(plan.framework, pip_args=("--index-url", "https://x.example/a b", "torch==2.4.1"))
    text = render_dockerfile(dataclasses.replace(plan, framework=fw))
    assert "-m pip install --no-cache-dir --index-url 'https://x.example/a b' torch==2.4.1\n" in text
    env = dataclasses.replace(plan.nvidia, env=(("NVIDIA_REQUIRE_CUDA", 'cuda>=12.4 "$HOME"'),))
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.4 \\"\\$HOME\\""' in render_dockerfile(dataclasses.replace(plan, nvidia=env))


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
