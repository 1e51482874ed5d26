"""Download once on the classic builder: the wheel store (envman.images.wheelstore).

Two stacks with the same CUDA-library pins (two small real NVIDIA wheels, about 1 MB) are built
on the classic builder (the CUDA-library step not in the layer cache), through the same code path ``envman build``
takes (``served`` around the classic builder). Their index is a local PEP 503 index on this host
that counts every file it serves; the build containers cannot reach it (it listens on the host's
loopback), so the step can only install what the store served. The first build downloads each
wheel once (on the host, hash-checked, into the store); the second downloads nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import pytest

from envman.engine.builder import ClassicBuilder
from envman.images.wheelstore import WheelStore, served
from envman.matrix.load import load_matrix
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.stack.resolve import resolve

from tests.support.index_server import IndexServer

from .conftest import STANDIN_MATRIX

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.pypi]

PINS = ("nvidia-cuda-runtime-cu12==12.4.127", "nvidia-nvtx-cu12==12.4.127")
MARK = "# The CUDA libraries that"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """The two pins' Linux x86_64 wheels from the index (pip download, as a user would)."""
    import sys

    d = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "--isolated", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "-d", str(d), "-q", *PINS],
                   check=True, timeout=600)
    found = {p.name: p for p in d.glob("*.whl")}
    assert len(found) == 2, found
    return found


@pytest.fixture
def index(wheels):
    """A PEP 503 index of the two wheels at /simple/ and at /mirror/simple/ (one server)."""
    with IndexServer() as srv:
        for prefix in ("/simple", "/mirror/simple"):
            for name, path in wheels.items():
                project = name.split("-")[0].replace("_", "-")
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                srv.add(f"{prefix}/{project}/", f'<a href="/files/{name}#sha256={sha}">{name}</a>', "text/html")
        for name, path in wheels.items():
            srv.add(f"/files/{name}", path.read_bytes())
        yield srv


def _downloads(index: IndexServer) -> dict[str, int]:
    return dict(Counter(path.rpartition("/")[2] for path, _ in index.requests if path.startswith("/files/")))


@pytest.fixture(scope="module")
def stack(standin):
    s = resolve(load_matrix([STANDIN_MATRIX]), "torch-2.13.0-cpu")
    standin(s.base_image)
    return s


def _hashed(wheels: dict[str, Path]) -> tuple[str, ...]:
    out = []
    for pin in PINS:
        name = pin.split("==")[0].replace("-", "_")
        path = next(p for n, p in wheels.items() if n.startswith(name + "-"))
        out.append(f"{pin} --hash=sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}")
    return tuple(out)


def _cut(ctx):
    """The context with its Dockerfile cut after the CUDA-library step (the framework follows)."""
    lines = ctx.dockerfile.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARK))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return dataclasses.replace(ctx, files={**ctx.files, "Dockerfile": ("\n".join(lines[:end]) + "\n").encode()})


def _build(engine, stack, options, store, ref):
    ctx = _cut(render_stack(stack, options, builder="classic"))
    with served(ClassicBuilder(engine), stack, options, store=store) as (run, info):
        assert run.network and run.network.startswith("envman-build-"), info.notes
        events = list(run.build(ctx.tar(), ref, labels={}))
        network = run.network
    gone = subprocess.run(["docker", "network", "inspect", network], capture_output=True)
    assert gone.returncode != 0, "the build network outlived the build"
    return info, "\n".join(e.text for e in events)


def _installed(ref: str) -> list[str]:
    p = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/python", ref,
                        "-m", "pip", "list", "--format=json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return sorted(f"{d['name'].lower()}=={d['version']}" for d in json.loads(p.stdout) if "nvidia" in d["name"].lower())


def test_a_second_stack_with_the_same_cuda_pins_downloads_none_of_them(stack, wheels, index, docker_engine, tmp_path):
    url = index.url + "/simple"
    first = dataclasses.replace(stack, cuda_libs=_hashed(wheels), index_url=url)
    # another stack (another framework release) with the same pins, through a mirror of the index:
    # its CUDA-library step differs from the first's (the index URL), so the layer cache cannot
    # serve it and its pip runs (the port of this test's index keeps the first from being cached)
    second = dataclasses.replace(first, name="torch-2.13.1-cpu-py3.11", framework_version="2.13.1",
                                 packages=("torch==2.13.1",),
                                 index_url=index.url + "/mirror/simple")
    options = RenderOptions()
    store = WheelStore(tmp_path / "store")
    refs = [f"envman-test/wheelstore-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b")]
    try:
        info, log = _build(docker_engine, first, options, store, refs[0])
        assert _downloads(index) == {n: 1 for n in wheels}, _downloads(index)  # each wheel once, on the host
        assert sorted(info.server.served) == sorted(wheels), log[-3000:]  # the build took both from the store
        assert "envman-wheels" in log and _installed(refs[0]) == sorted(PINS)

        info, log = _build(docker_engine, second, options, store, refs[1])
        assert _downloads(index) == {n: 1 for n in wheels}, _downloads(index)  # nothing downloaded again
        assert info.fetched == [] and sorted(info.server.served) == sorted(wheels), log[-3000:]
        assert _installed(refs[1]) == sorted(PINS)
        # the store holds each wheel once, under its sha256
        stored = sorted(p.relative_to(store.root / "sha256").parts for p in (store.root / "sha256").rglob("*.whl"))
        assert [name for _, name in stored] == sorted(wheels)
    finally:
        for ref in refs:
            subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)


def test_a_stored_wheel_with_other_bytes_is_not_served_and_is_fetched_again(stack, wheels, index, docker_engine, tmp_path):
    url = index.url + "/simple"
    s = dataclasses.replace(stack, cuda_libs=_hashed(wheels), index_url=url)
    store = WheelStore(tmp_path / "store")
    # another user of the engine cannot write here (0700), but a file changed behind envman's back
    # (or a broken disk) must not reach a build: plant other bytes under a pinned hash
    pin_hash = s.cuda_libs[1].rpartition(":")[2]
    name = next(n for n in wheels if n.startswith("nvidia_nvtx"))
    planted = store.root / "sha256" / pin_hash / name
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    ref = f"envman-test/wheelstore-{uuid.uuid4().hex[:8]}:planted"
    try:
        info, log = _build(docker_engine, s, RenderOptions(), store, ref)
        assert _downloads(index)[name] == 1  # fetched again: the planted file failed its hash
        assert hashlib.sha256(planted.read_bytes()).hexdigest() == pin_hash
        assert _installed(ref) == sorted(PINS), log[-3000:]
    finally:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)
