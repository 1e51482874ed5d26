"""Download once on BuildKit: a CUDA-library wheel fetched for one stack is not fetched again
when the CUDA-library step runs for another stack with the same pins on the same engine: the step
reads and fills pip's cache mount (``id=envman-pip``), which every build on the engine shares, and
pip checks each cached wheel against the pinned hash (``--require-hashes``) before installing it.

Two stacks with the stand-in base, the two small hashed NVIDIA pins and two different stand-ins
for frameworks. The second must run its CUDA-library step rather than take the first's layer
(which is what stacks with the same pins on different OS or Python layers, or after the engine's
build cache was pruned, do): an ``ARG`` with a value per build just before that step changes its
cache key. ``--no-cache`` would not do: BuildKit 0.8 then starts the cache mounts empty too. Their
cache mount gets an id of this test's own (the rendered ``id=envman-pip`` replaced), so the first
build starts from an empty cache whatever the engine's holds, and the test can fail.

pip keeps a download in its cache only when the index's answer allows it (``Cache-Control``,
``ETag``); an index or proxy that sends neither leaves the cache empty. The test first asks the
host's pip whether it caches a download of the first pin from the index, and is skipped when it
does not: then no build keeps one either.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions

from ..conftest import in_ci
from .conftest import host_ca_bundle
from .test_reproducible_layers import HASHED, PINS, buildkit_cli, stack  # noqa: F401  (stack: the module's fixture)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.pypi]

#: pip's lines for a wheel of the index and for one of its cache, in BuildKit's plain progress.
_FETCHED = re.compile(r"Downloading (nvidia_[a-z0-9_]+)-\S+\.whl")
_CACHED = re.compile(r"Using cached (nvidia_[a-z0-9_]+)-\S+\.whl")


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
    """(the NVIDIA wheels pip downloaded, those it took from its cache) in a build's log."""
    return set(_FETCHED.findall(log)), set(_CACHED.findall(log))


def pip_caches_downloads(tmp: Path) -> bool:
    """Whether pip on this host keeps a wheel it downloads from the index in its HTTP cache."""
    cache = tmp / "pip-cache"
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--cache-dir",
                        str(cache), "-d", str(tmp / "pip-dl"), "--isolated", PINS[1]],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return any(f.is_file() for f in (cache / "http-v2").rglob("*")) if (cache / "http-v2").is_dir() else False


def test_a_second_stack_with_the_same_pins_takes_the_wheels_from_the_shared_cache_mount(stack, tmp_path):
    if not pip_caches_downloads(tmp_path):
        reason = "the index answers without Cache-Control or ETag, so pip caches no download (on the host either)"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    cache_id = f"envman-pip-test-{uuid.uuid4().hex[:8]}"
    tags = [f"envman-test/bk-pipcache-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b")]
    names = {p.split("==")[0].replace("-", "_") for p in PINS}
    try:
        first, _ = build_with_cache_id(stack, ("six==1.17.0",), tmp_path / "a", cache_id, tags[0])
        second, _ = build_with_cache_id(stack, ("idna==3.10",), tmp_path / "b", cache_id, tags[1])
        assert cuda_wheels(first)[0] == names, first[-3000:]     # an empty cache: both from the index
        fetched, cached = cuda_wheels(second)
        assert fetched == set() and cached == names, second[-3000:]
    finally:
        for tag in tags:
            subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
