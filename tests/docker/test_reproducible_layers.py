"""The CUDA-library layer and the Python layer under it are byte-reproducible on both builders:
built twice without any cache, they have the same layer digests (diff IDs), so stacks with the
same pins share them wherever they are built. On BuildKit (Docker 20.10's is 0.8) that needs the
layer of the steps' mount points (``envman.render.mountpoints``) before the first RUN, which is
reproducible too: without it BuildKit leaves the folders of the stubs it made for a step's mount
points with the time it removed them.

The stack is a stand-in (Debian's Python on a stand-in base); its CUDA libraries are two small
real NVIDIA wheels from the index (``nvidia-nvtx-cu12`` and ``nvidia-cuda-runtime-cu12``, about
1 MB together), installed by the rendered step exactly as a real stack's are. The Dockerfile is the
rendered one, cut after the CUDA-library step (what follows is the framework, which is not
claimed reproducible).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from envman.engine.builder import BuildKitCli, find_buildkit_cli
from envman.matrix.load import load_matrix
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.stack.resolve import resolve

from ..conftest import in_ci
from .conftest import STANDIN_MATRIX, host_ca_bundle

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.pypi]

PINS = ("nvidia-cuda-runtime-cu12==12.4.127", "nvidia-nvtx-cu12==12.4.127")
#: Their wheels' sha256 on PyPI (each has one Linux x86_64 wheel): the step checks them.
HASHES = ("64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5",
          "781e950d9b9f60d8241ccea575b32f5105a5baf4c2351cab5256a24869f12a1a")
HASHED = tuple(f"{p} --hash=sha256:{h}" for p, h in zip(PINS, HASHES))
MARK = "# The CUDA libraries that"


def _context(tmp: Path, builder: str, stack, pins: tuple[str, ...] = HASHED) -> Path:
    ctx = render_stack(dataclasses.replace(stack, cuda_libs=pins), RenderOptions(ca_bundle=host_ca_bundle()),
                       builder=builder)
    out = ctx.write(tmp / builder)
    lines = ctx.dockerfile.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARK))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())  # the blank line after the step
    (out / "Dockerfile").write_text("\n".join(lines[:end]) + "\n")
    return out


def _layers(ref: str) -> list[str]:
    p = subprocess.run(["docker", "image", "inspect", "-f", "{{json .RootFS.Layers}}", ref],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def stack(standin):
    s = resolve(load_matrix([STANDIN_MATRIX]), "torch-2.13.0-cpu")
    standin(s.base_image)
    return s


def buildkit_cli() -> BuildKitCli:
    """The docker CLI that builds with BuildKit; the test is skipped without one (failed in CI)."""
    cli = find_buildkit_cli()
    if cli is None:
        reason = "no docker CLI that builds with BuildKit (buildx, or a CLI of 18.09-22.x)"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    return cli


def _build_argv(builder: str) -> tuple[list[str], dict[str, str]]:
    if builder == "classic":
        return ["docker", "build", "--no-cache"], {**os.environ, "DOCKER_BUILDKIT": "0"}
    return [*buildkit_cli().argv(), "--no-cache"], {**os.environ, "DOCKER_BUILDKIT": "1"}


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_python_and_cuda_library_layers_have_the_same_digest_when_built_twice_without_cache(
        builder, stack, tmp_path, docker_engine):
    argv, env = _build_argv(builder)
    ctx = _context(tmp_path, builder, stack)
    refs = [f"envman-test/repro-{builder}-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b")]
    try:
        for ref in refs:
            p = subprocess.run([*argv, "-t", ref, str(ctx)], capture_output=True, text=True, env=env, timeout=1200)
            assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        a, b = (_layers(ref) for ref in refs)
        assert len(a) == len(b)
        # The last two layers: the Python step's and the CUDA libraries' (ENV adds no layer).
        assert a[-2:] == b[-2:], f"layer digests differ:\n{a}\n{b}"
        if builder == "buildkit":
            # base..., the mount points (ADD), OS packages, Python, CUDA libraries: the mount
            # points' layer is the tar's bytes, the same too.
            assert a[-4] == b[-4], f"the mount points' layers differ:\n{a}\n{b}"
        # And the image holds the pinned wheels, with no bytecode and one time on their files.
        res = docker_engine.run(refs[0], ["sh", "-c",
                                          "/opt/venv/bin/python -m pip list --format=freeze 2>/dev/null | grep -i nvidia;"
                                          " find /opt/venv/lib -path '*nvidia*' -name '*.pyc' | wc -l;"
                                          " find /opt/venv/lib -path '*nvidia*' ! -newermt @315532801 | wc -l;"
                                          " find /opt/venv/lib -path '*nvidia*' | wc -l"],
                                network="none", timeout=120)
        assert res.ok, res.stderr
        out = res.stdout.split()
        assert sorted(x.lower() for x in out[:2]) == sorted(PINS), out
        assert out[2] == "0" and out[3] == out[4] and int(out[4]) > 2, out
    finally:
        for ref in refs:
            subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)


def test_a_wheel_whose_hash_is_not_the_pinned_one_fails_the_step(stack, tmp_path):
    wrong = (HASHED[0], f"{PINS[1]} --hash=sha256:{'0' * 64}")
    ctx = _context(tmp_path, "classic", stack, wrong)
    ref = f"envman-test/repro-badhash-{uuid.uuid4().hex[:8]}:latest"
    try:
        p = subprocess.run(["docker", "build", "--force-rm", "-t", ref, str(ctx)], capture_output=True, text=True,
                           env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=1200)
        out = p.stdout + p.stderr
        assert p.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in out, out[-3000:]
    finally:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)
        # A failed classic build leaves the images of its finished steps untagged: remove this
        # build's (the first id is the base's, which stays).
        made = re.findall(r"^ ---> ([0-9a-f]{12})$", p.stdout if "p" in locals() else "", re.M)[1:]
        for image in reversed(made):
            subprocess.run(["docker", "image", "rm", image], capture_output=True)
