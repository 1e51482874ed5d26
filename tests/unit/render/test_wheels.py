"""A shared wheelhouse: each row's render gets only the wheels its pins select (and what those
require, transitively, that the wheelhouse holds), on both builders; markers, Python tags and
platforms are honoured; the render hash depends on the selected wheels only."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.errors import RenderError
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from tests.support.index_server import make_wheel

from tests.unit.render.test_dockerfile import make_stack

TORCH = "torch-2.4.1+cu124-cp310-cp310-linux_x86_64.whl"
ORT = "onnxruntime_gpu-1.19.2-cp310-cp310-manylinux_2_27_x86_64.whl"
HOUSE = {
    TORCH: ["filelock", "typing-extensions>=4.8.0", "sympy", "triton==3.0.0; platform_machine == 'x86_64' and python_version < '3.13'",
            "opt-einsum>=3.3; extra == 'opt-einsum'"],
    "torchvision-0.19.1+cu124-cp310-cp310-linux_x86_64.whl": ["numpy", "torch==2.4.1", "pillow!=8.3.*,>=5.3.0"],
    ORT: ["coloredlogs", "Numpy>=1.21.6", "protobuf", "packaging; python_version >= '3.99'"],
    "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": [],
    "numpy-2.1.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": [],
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": [],
    "coloredlogs-15.0.1-py2.py3-none-any.whl": ["humanfriendly>=9.1"],
    "humanfriendly-10.0-py2.py3-none-any.whl": [],
    "Typing_Extensions-4.12.2-py3-none-any.whl": [],
    "triton-3.0.0-1-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": ["filelock"],
    "packaging-24.1-py3-none-any.whl": [],
    "opt_einsum-3.3.0-py3-none-any.whl": [],
    "pip-24.2-py3-none-any.whl": [],
}


@pytest.fixture
def house(tmp_path) -> Path:
    d = tmp_path / "house"
    d.mkdir()
    for name, requires in HOUSE.items():
        (d / name).write_bytes(make_wheel(name, requires)[0])
    return d


def ort_stack(**kw):
    base = dict(name="onnxruntime-1.19.2-cuda12.4-py3.10", row="onnxruntime-1.19.2-cuda12.4", framework="onnxruntime",
                framework_version="1.19.2", packages=("onnxruntime-gpu==1.19.2",), index_url=None)
    base.update(kw)
    return make_stack(**base)


def wheels_of(ctx) -> set[str]:
    return {n.split("/", 1)[1] for n in ctx.files if n.startswith("wheels/")}


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_each_row_gets_only_its_framework_and_its_dependencies(house, builder):
    o = RenderOptions(wheelhouse=house)
    ort = render_stack(ort_stack(), o, builder=builder)
    assert wheels_of(ort) == {ORT, "numpy-2.1.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                              "coloredlogs-15.0.1-py2.py3-none-any.whl", "humanfriendly-10.0-py2.py3-none-any.whl",
                              "pip-24.2-py3-none-any.whl"}
    assert "wheels/torch" not in ort.dockerfile and "wheels/triton" not in ort.dockerfile
    torch = render_stack(make_stack(), o, builder=builder)
    assert wheels_of(torch) == {TORCH, "torchvision-0.19.1+cu124-cp310-cp310-linux_x86_64.whl",
                                "numpy-2.1.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                                "Typing_Extensions-4.12.2-py3-none-any.whl", "pip-24.2-py3-none-any.whl",
                                "triton-3.0.0-1-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"}
    assert "wheels/onnxruntime" not in torch.dockerfile and "wheels/opt_einsum" not in torch.dockerfile
    for ctx in (ort, torch):  # what the Dockerfile installs is what the context carries
        for name in wheels_of(ctx) - {"pip-24.2-py3-none-any.whl"}:
            assert f"/opt/envman/wheels/{name}" in ctx.dockerfile


def test_markers_python_tags_and_platform_decide(house):
    o = RenderOptions(wheelhouse=house)
    # Python 3.11: only the cp311 numpy fits, and no torch wheel (cp310) fits at all.
    py311 = wheels_of(render_stack(ort_stack(python="3.11", name="onnxruntime-1.19.2-cuda12.4-py3.11"), o))
    assert py311 == {"pip-24.2-py3-none-any.whl"}
    # arm64: triton's marker asks for x86_64, and no x86_64 wheel fits.
    arm = render_stack(make_stack(name="torch-2.4.1-cuda12.4-py3.10-arm64", platform="linux/arm64"), o)
    assert wheels_of(arm) == {"pip-24.2-py3-none-any.whl"}
    # A row's own pin narrows what a dependency admits: the older numpy is taken.
    pinned = wheels_of(render_stack(ort_stack(packages=("onnxruntime-gpu==1.19.2", "numpy==1.26.4")), o))
    assert "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" in pinned
    assert not any(n.startswith("numpy-2") for n in pinned)
    # An extra asked for in the pin brings in what the extra requires.
    extra = wheels_of(render_stack(make_stack(packages=("torch[opt-einsum]==2.4.1",)), o))
    assert "opt_einsum-3.3.0-py3-none-any.whl" in extra


def test_the_render_hash_depends_on_the_selected_wheels_only(house):
    before = render_stack(ort_stack(), RenderOptions(wheelhouse=house)).render_hash
    (house / "torch-2.5.0-cp310-cp310-linux_x86_64.whl").write_bytes(make_wheel("torch-2.5.0-cp310-cp310-linux_x86_64.whl", [])[0])
    (house / TORCH).write_bytes(make_wheel(TORCH, ["sympy"])[0])
    assert render_stack(ort_stack(), RenderOptions(wheelhouse=house)).render_hash == before
    (house / "humanfriendly-10.0-py2.py3-none-any.whl").write_bytes(make_wheel("humanfriendly-10.0-py2.py3-none-any.whl", ["x"])[0])
    assert render_stack(ort_stack(), RenderOptions(wheelhouse=house)).render_hash != before


def test_a_row_with_nothing_in_the_wheelhouse_renders_without_one(house):
    ctx = render_stack(ort_stack(python="3.12", name="onnxruntime-1.19.2-cuda12.4-py3.12", packages=("onnxruntime-gpu==1.20.0",)),
                       RenderOptions(wheelhouse=house), builder="buildkit")
    assert wheels_of(ctx) == {"pip-24.2-py3-none-any.whl"}
    assert "--no-deps /opt/envman/wheels/" not in ctx.dockerfile


def test_offline_names_the_pin_the_wheelhouse_lacks_and_a_broken_wheel_is_one_line(house):
    with pytest.raises(RenderError) as info:
        render_stack(ort_stack(python="3.11", name="onnxruntime-1.19.2-cuda12.4-py3.11"), RenderOptions(wheelhouse=house, offline=True))
    assert "onnxruntime-gpu==1.19.2" in info.value.line() and "Python 3.11" in info.value.line()
    (house / ORT).write_bytes(b"not a zip")
    with pytest.raises(RenderError, match="not a readable zip") as info:
        render_stack(ort_stack(), RenderOptions(wheelhouse=house))
    assert "\n" not in info.value.line()
    # A broken wheel of a project the row does not use is never opened.
    assert wheels_of(render_stack(make_stack(), RenderOptions(wheelhouse=house)))
