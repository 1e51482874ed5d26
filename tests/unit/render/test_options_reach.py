"""Every network option reaches every build envman makes: a stack image, a rebuilt base, a
project image and the notebook layer. One table of distinctive values, one per field of
RenderOptions; each build either shows each value in its Dockerfile or context, or names the
option among those it has no use for (with the reason, next to that list in the code)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from envman.render.base import BASE_UNUSED_OPTIONS, rebuilt_base
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.render.layerplan import LAYER_UNUSED_OPTIONS
from envman.render.imagepaths import CA_CONTEXT_FILE
from tests.support.index_server import make_wheel
from tests.unit.render.test_dockerfile import PROBE, make_stack

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBreachtest\n-----END CERTIFICATE-----\n"
WHEEL = "pip-24.0-py3-none-any.whl"


@pytest.fixture
def options(tmp_path: Path) -> RenderOptions:
    ca = tmp_path / "corp.pem"
    ca.write_bytes(PEM)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / WHEEL).write_bytes(make_wheel(WHEEL, [])[0])
    return RenderOptions(registry_mirror="mirror.reach.test:5000", ca_bundle=ca,
                         pip_index="https://pip.reach.test/simple", pip_extra_index="https://extra.reach.test/simple",
                         framework_index="https://fw.reach.test/whl", wheelhouse=wheels,
                         apt_mirror="http://apt.reach.test/ubuntu",
                         python_install_mirror="https://pbs.reach.test/releases")


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def demo_project(tmp_path: Path):
    from envman.project.file import load_project

    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-2.4"\nname = "demo"\napt = ["curl"]\n'
                                      'requirements = ["requests==2.32.3"]\n')
    return load_project(root)


def fields() -> set[str]:
    return {f.name for f in dataclasses.fields(RenderOptions)}


def marks(options: RenderOptions) -> dict[str, bytes]:
    """What each option leaves in a build that went through it (``offline``: a flag, checked on its own)."""
    out = {}
    for name in fields() - {"offline"}:
        value = getattr(options, name)
        assert value is not None, f"the table gives no value for {name}: add one"
        out[name] = PEM if name == "ca_bundle" else WHEEL.encode() if name == "wheelhouse" else str(value).encode()
    return out


def missing(build: dict[str, bytes], options: RenderOptions, unused: frozenset[str]) -> list[str]:
    blob = b"\n".join(name.encode() + b"\n" + data for name, data in build.items())
    return sorted(k for k, mark in marks(options).items() if k not in unused and mark not in blob)


def test_the_table_names_every_option(options):
    assert set(marks(options)) | {"offline"} == fields()
    assert BASE_UNUSED_OPTIONS < fields() and LAYER_UNUSED_OPTIONS < fields()


def test_a_stack_image_goes_through_every_option(options):
    stack = make_stack(python="3.13", python_strategy="standalone", os="ubuntu24.04")
    for builder in ("classic", "buildkit"):
        ctx = render_stack(stack, options, probe=PROBE, builder=builder)
        assert missing(ctx.files, options, frozenset()) == [], builder
    # offline: a flag, not a value; what it does to a stack image is test_dockerfile.py's offline tests


def test_a_rebuilt_base_goes_through_every_option_it_can_use(options):
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    matrix = load_matrix()
    stack = resolve(matrix, "torch-1.0-cuda10")
    given = {k: getattr(options, k) for k in fields() - BASE_UNUSED_OPTIONS}
    base = rebuilt_base(matrix, stack, "rebuild", **given)  # an option it neither takes nor declares unused: TypeError
    assert base is not None
    assert missing(base.context(), options, BASE_UNUSED_OPTIONS) == []


def test_a_project_image_goes_through_every_option_it_can_use(options, tmp_path):
    from envman.project.image import project_context
    project = demo_project(tmp_path)
    files = project_context(project, "torch-2.4.1-cpu-py3.12", "sha256:" + "a" * 64, network=options)
    assert missing(files, options, LAYER_UNUSED_OPTIONS) == []
    assert files[CA_CONTEXT_FILE] == PEM


def test_the_notebook_layer_goes_through_every_option_it_can_use(options):
    from envman.run.notebook import notebook_context

    files = notebook_context("sha256:" + "b" * 64, options)
    # no apt step in the notebook layer: the apt mirror has nothing to rewrite
    assert missing(files, options, LAYER_UNUSED_OPTIONS | {"apt_mirror"}) == []


def test_network_options_change_how_a_layer_is_fetched_not_its_tag(options, tmp_path):
    from envman.project.image import project_context, project_image_hash, project_image_ref
    from envman.run.notebook import notebook_context, notebook_image_ref
    project = demo_project(tmp_path)
    base = "sha256:" + "c" * 64
    plain = project_context(project, "cpu-py3.12", base)
    assert project_image_hash(plain).startswith(project_image_ref(project, "cpu-py3.12", base).rsplit(":", 1)[1])
    assert project_context(project, "cpu-py3.12", base, network=options) != plain
    # no option: the bytes every existing project image's tag was computed from
    assert project_context(project, "cpu-py3.12", base, network=RenderOptions()) == plain
    assert notebook_context(base, RenderOptions()) == notebook_context(base)
    assert notebook_image_ref("p", base) == notebook_image_ref("p", base)


def test_an_index_with_credentials_never_enters_a_layer(tmp_path):
    from envman.run.notebook import notebook_context

    opts = RenderOptions(pip_index="https://alice:s3cret@pip.reach.test/simple")
    files = notebook_context("sha256:" + "d" * 64, opts)
    assert b"s3cret" not in b"".join(files.values()) and b"alice" not in b"".join(files.values())
