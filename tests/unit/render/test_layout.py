"""Plans laid out as Dockerfile steps (envman/render/layout.py): every plan from its FROM line, only
BuildKit's runs mount, and words quoted where the Dockerfile is written, never in the plan."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from envman.render import imagepaths as IP
from envman.render.options import RenderOptions
from envman.render.layerplan import notebook_plan
from envman.render.plan import stack_plan
from envman.render.sections import DockerfilePlan
from envman.render.quote import dockerfile_quote
from envman.render.layout import dockerfile_steps
from envman.render.steps import BindMount, CacheMount, FromStep, LabelStep, RunStep, SecretMount, Step
from envman.render.template import render_dockerfile
from tests.unit.render.test_dockerfile import cpu_stack, make_stack
from tests.unit.render.test_plan import BASE_ID, tf_stack
from tests.unit.render.test_layerplan import project


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
