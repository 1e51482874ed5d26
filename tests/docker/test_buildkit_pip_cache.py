"""Download once on BuildKit: a CUDA-library wheel fetched for one stack is not fetched again
when the CUDA-library step runs for another stack with the same pins on the same engine: the step
keeps the pinned wheels in pip's cache mount (``id=envman-pip``, which every build on the engine
shares), whatever the index's cache headers say, and pip checks each kept wheel against the pinned
hash (``--require-hashes``) before installing it; a kept wheel whose bytes are not the pinned ones
is downloaded again.

Two stacks with the stand-in base, the two small hashed NVIDIA pins and two different stand-ins
for frameworks. The second must run its CUDA-library step rather than take the first's layer
(which is what stacks with the same pins on different OS or Python layers, or after the engine's
build cache was pruned, do): an ``ARG`` with a value per build just before that step changes its
cache key. ``--no-cache`` would not do: BuildKit 0.8 then starts the cache mounts empty too. Their
cache mount gets an id of this test's own (the rendered ``id=envman-pip`` replaced), so the first
build starts from an empty cache whatever the engine's holds, and the test can fail.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions

from ..conftest import in_ci
from .conftest import host_ca_bundle
from .test_reproducible_layers import HASHED, PINS, buildkit_cli, stack  # noqa: F401  (stack: the module's fixture)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.pypi]

#: pip's lines for a wheel of the index and for one of the kept ones, in BuildKit's plain progress.
_FETCHED = re.compile(r"Downloading (nvidia_[a-z0-9_]+)-\S+\.whl")
_KEPT = re.compile(r"Processing \S*/envman-cuda-wheels/(nvidia_[a-z0-9_]+)-\S+\.whl")


#: The first line of the CUDA-library step's comment.
MARK = "# The CUDA libraries that"


def build_with_cache_id(stack, packages: tuple[str, ...], tmp: Path, cache_id: str, tag: str) -> tuple[str, float]:
    """Build ``stack`` with ``packages`` as its framework and pip's cache mount renamed ``cache_id``
    with BuildKit, its CUDA-library step run whatever the build cache holds; (the log, seconds)."""
    import time

    cli = buildkit_cli()
    ctx = render_stack(dataclasses.replace(stack, packages=packages, cuda_libs=HASHED),
                       RenderOptions(ca_bundle=host_ca_bundle()), builder="buildkit")
    path = ctx.write(tmp)
    dockerfile = path / "Dockerfile"
    text = dockerfile.read_text()
    assert "id=envman-pip," in text
    assert MARK in text
    text = text.replace(MARK, f"ARG ENVMAN_TEST_RUN={uuid.uuid4().hex}\n{MARK}", 1)
    dockerfile.write_text(text.replace("id=envman-pip,", f"id={cache_id},"))
    t = time.perf_counter()
    p = subprocess.run([*cli.argv(), "--progress=plain", "-t", tag, str(path)], capture_output=True,
                       text=True, env={**os.environ, "DOCKER_BUILDKIT": "1"}, timeout=1200)
    seconds = time.perf_counter() - t
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-3000:]
    return log, seconds


def cuda_wheels(log: str) -> tuple[set[str], set[str]]:
    """(the NVIDIA wheels pip downloaded, those it installed from the kept ones) in a build's log."""
    return set(_FETCHED.findall(log)), set(_KEPT.findall(log))


def _spoil_kept_wheel(base: str, cache_id: str, tmp: Path) -> None:
    """Append a byte to the kept nvtx wheel, through a build on the same cache mount."""
    tmp.mkdir()
    (tmp / "Dockerfile").write_text(
        f"FROM {base}\nARG ENVMAN_TEST_RUN={uuid.uuid4().hex}\n"
        f"RUN --mount=type=cache,id={cache_id},target=/c set -e; for f in /c/envman-cuda-wheels/nvidia_nvtx*.whl;"
        " do printf x >> \"$f\"; done\n")
    tag = f"envman-test/bk-pipcache-spoil-{uuid.uuid4().hex[:8]}:x"
    p = subprocess.run([*buildkit_cli().argv(), "-t", tag, str(tmp)], capture_output=True, text=True,
                       env={**os.environ, "DOCKER_BUILDKIT": "1"}, timeout=600)
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]


def test_a_second_stack_with_the_same_pins_takes_the_wheels_kept_in_the_shared_cache_mount(stack, tmp_path):
    cache_id = f"envman-pip-test-{uuid.uuid4().hex[:8]}"
    tags = [f"envman-test/bk-pipcache-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b", "c")]
    names = {p.split("==")[0].replace("-", "_") for p in PINS}
    try:
        first, _ = build_with_cache_id(stack, ("six==1.17.0",), tmp_path / "a", cache_id, tags[0])
        second, _ = build_with_cache_id(stack, ("idna==3.10",), tmp_path / "b", cache_id, tags[1])
        assert cuda_wheels(first)[0] == names, first[-3000:]     # an empty cache: both from the index
        fetched, kept = cuda_wheels(second)
        assert fetched == set() and kept == names, second[-3000:]
        # A kept wheel whose bytes changed fails pip's hash check: the step downloads the pins again.
        _spoil_kept_wheel(stack.base_image, cache_id, tmp_path / "spoil")
        third, _ = build_with_cache_id(stack, ("six==1.17.0",), tmp_path / "c", cache_id, tags[2])
        assert "THESE PACKAGES DO NOT MATCH THE HASHES" in third and cuda_wheels(third)[0] == names, third[-3000:]
    finally:
        for tag in tags:
            subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
