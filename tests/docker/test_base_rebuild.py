"""A base NVIDIA deleted, rebuilt from its recipe on a real engine, once, and shared.

Here no registry is reachable, so the pieces NVIDIA would serve are stand-ins: the plain
``ubuntu:18.04`` image (a debootstrapped Debian, see tests/support/standin.py) and NVIDIA's apt
repository (tests/support/aptrepo.py: dummy packages under the recipe's names and versions, a
signed index, a throw-away key). A test-only overlay points the shipped recipe of
``10.0-base-ubuntu18.04`` at that repository, its key's fingerprint and a dummy download's sha256;
everything else is envman's real path: ``envman build`` renders the base from the recipe, builds
it as ``envman/base:10.0-base-ubuntu18.04`` (the RUN steps on the host network, ``[build]
network = "host"``, to reach the repository on 127.0.0.1), builds the stack on it, smoke-tests
and promotes it; a second stack on the same base reuses it; a tampered download or package stops
the base build with one line that says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envman.matrix.load import load_matrix
from tests.support.aptrepo import make_repo
from tests.support.rows import cpu_torch_matrix

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TAG = "10.0-base-ubuntu18.04"
BASE = f"envman/base:{TAG}"
STACK = "torch-2.13.0-cpu-py3.11"
PACKAGES = {"cuda-cudart-10-0": "10.0.130-1", "cuda-compat-10-0": "10.0.130-1"}
DIRECT = {"libnccl2": "2.6.4-1+cuda10.0"}


def _toml_pairs(pairs) -> str:
    return "[" + ", ".join(f"[{json.dumps(a)}, {json.dumps(b)}]" for a, b in pairs) + "]"


def recipe_overlay(repo, *, sha256: str | None = None, extra_env: tuple = ()) -> str:
    """The shipped recipe of TAG, pointed at the local repository (its URL, key and the dummy
    download's checksum): the only test-only change."""
    shipped = load_matrix().recipe(TAG)
    (name, (url, real)), = repo.downloads.items()
    return f"""schema = 1
kind = "recipes"

[[recipe]]
tag = "{TAG}"
from = "{shipped.from_image}"
platform = "linux/amd64"
path = "{shipped.path}"
commit = "{shipped.commit}"
source = ["test overlay of the shipped recipe: local repository, throw-away key"]
status = "confirmed"
repositories = ["{repo.url}"]
setup_packages = {json.dumps(list(shipped.setup_packages))}
key_url = "{repo.key_url}"
key_fingerprint = "{repo.fingerprint}"
env = {_toml_pairs(shipped.env + tuple(extra_env))}
labels = {_toml_pairs(shipped.labels)}
packages = {json.dumps(list(shipped.packages) + ["libnccl2=" + DIRECT["libnccl2"]])}
downloads = [{{ url = "{url}", sha256 = "{sha256 or real}" }}]
symlinks = {_toml_pairs(shipped.symlinks)}
ld_so_conf = {json.dumps(list(shipped.ld_so_conf))}
"""


# The stand-in ubuntu:18.04 is Debian: its apt Python is 3.11, and the one framework a build can
# install here is the CPU wheel of torch 2.13.0, on the deleted base by the row's own pin.
STANDIN_OS = """schema = 1
kind = "os"

[[os]]
name = "ubuntu18.04"
python_default = "3.11"
python_apt = ["3.11"]
source = ["test: the stand-in for ubuntu:18.04 is Debian bookworm (tests/support/standin.py)"]
status = "confirmed"
"""


@pytest.fixture(scope="module")
def repo():
    r = make_repo(PACKAGES, DIRECT)
    yield r
    r.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory, docker_engine, standin, repo):
    """Matrix overlays, a state and config of its own, the stand-in Ubuntu; no base or stack image
    of this test before or after it."""
    d = tmp_path_factory.mktemp("rebuild")
    (d / "os.toml").write_text(STANDIN_OS)
    fw = cpu_torch_matrix("2.13.0", "test fixture: CPU wheel on the deleted 10.0 base")
    (d / "fw.toml").write_text(fw.replace('status = "confirmed"', 'status = "confirmed"\nbase_image = "nvidia/cuda:10.0-base-ubuntu18.04"'))
    (d / "recipes.toml").write_text(recipe_overlay(repo))
    (d / "config").mkdir()
    (d / "config" / "config.toml").write_text('[build]\nnetwork = "host"\n')
    standin("ubuntu:18.04")

    def clean():
        for img in docker_engine.list_images({"envman.managed": "true"}):
            if img.labels.get("envman.name") in (STACK, f"nvidia/cuda:{TAG}") or BASE in img.tags:
                for ref in img.tags or (img.id,):
                    docker_engine.remove_image(ref, force=True)

    clean()
    yield d
    clean()


def envman(world: Path, *args, recipes: Path | None = None, timeout=1800):
    env = {**os.environ, "ENVMAN_STATE_DIR": str(world / "state"), "ENVMAN_CONFIG_DIR": str(world / "config")}
    matrices = [world / "os.toml", world / "fw.toml", recipes or world / "recipes.toml"]
    argv = [sys.executable, "-m", "envman", *(a for m in matrices for a in ("--matrix", str(m))), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


def _in(image: str, *cmd: str) -> str:
    return subprocess.run(["docker", "run", "--rm", "--entrypoint", "", image, *cmd], capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_a_deleted_base_is_rebuilt_once_from_its_recipe_and_shared(world, docker_engine, wheelhouse, ca_bundle):
    common = ["--wheelhouse", str(wheelhouse), "--ca-bundle", ca_bundle, "--json"]
    p = envman(world, "build", STACK, "--builder", "classic", *common)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (row,) = json.loads(p.stdout)
    assert row["smoke"] == "pass" and row["promoted"], row
    # said in one line, before anything else
    assert f"base nvidia/cuda:{TAG} is no longer served by NVIDIA: rebuilding it from NVIDIA's recipe as {BASE}" in p.stderr

    base = docker_engine.inspect_image(BASE)
    assert base is not None and base.labels["envman.role"] == "base"
    assert base.labels["envman.name"] == f"nvidia/cuda:{TAG}" and len(base.labels["envman.base.recipe"]) == 64
    assert "dist/end-of-life/10.0/ubuntu18/base/Dockerfile @" in base.labels["envman.base.source"]
    stack = docker_engine.inspect_image(row["image_id"])
    assert stack.labels["envman.base.recipe"] == base.labels["envman.base.recipe"]  # built on it
    # NVIDIA's image contents: its packages at the recipe's versions, its sources signed-by its key,
    # the direct download installed, its ENV, no apt lists left
    shown = _in(BASE, "sh", "-c", "dpkg-query -W -f='${Package}=${Version}\\n' cuda-cudart-10-0 cuda-compat-10-0 libnccl2; "
                "cat /etc/apt/sources.list.d/cuda.list; echo CUDA_VERSION=$CUDA_VERSION; ls /var/lib/apt/lists | wc -l; "
                "ls /usr/share/keyrings/cuda-archive-keyring.gpg; readlink /usr/local/cuda; cat /etc/ld.so.conf.d/nvidia.conf")
    for want in ("cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0=10.0.130-1", "libnccl2=2.6.4-1+cuda10.0",
                 f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {load_repo_url(world)} /",
                 "CUDA_VERSION=10.0.130", "cuda-10.0", "/usr/local/nvidia/lib64"):
        assert want in shown, (want, shown)
    assert "\n1\n" in "\n" + shown or "\n0\n" in "\n" + shown  # apt lists removed (only 'partial' may stay)

    # a second stack on the same base (the BuildKit dialect of the same row) reuses it: no rebuild
    p = envman(world, "build", STACK, "--builder", "buildkit", *common)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (second,) = json.loads(p.stdout)
    assert second["image_id"] != row["image_id"] and second["smoke"] == "pass"
    assert docker_engine.inspect_image(BASE).id == base.id


def load_repo_url(world: Path) -> str:
    text = (world / "recipes.toml").read_text()
    return text.split('repositories = ["', 1)[1].split('"', 1)[0]


def test_a_download_that_does_not_match_its_sha256_stops_the_build_with_one_line(world, repo, docker_engine,
                                                                                   wheelhouse, ca_bundle):
    before = docker_engine.inspect_image(BASE)
    bad = world / "bad-sum.toml"
    bad.write_text(recipe_overlay(repo, sha256="0" * 64))
    # BuildKit this time: the base is built by either builder, and its cause line read from either log
    p = envman(world, "build", STACK, "--builder", "buildkit", "--wheelhouse", str(wheelhouse), "--ca-bundle", ca_bundle,
               "--json", recipes=bad)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    (row,) = json.loads(p.stdout)
    first = row["error"].splitlines()[0]
    assert f"rebuilding nvidia/cuda:{TAG} from NVIDIA's recipe failed: envman: libnccl2_" in first, first
    assert "does not match the sha256 NVIDIA's recipe gives" in first
    assert "do not work around it" in row["error"] + (row.get("hint") or "")
    after = docker_engine.inspect_image(BASE)
    assert (before.id if before else None) == (after.id if after else None)  # the good base is untouched


def test_a_tampered_package_stops_the_build_with_one_line(world, repo, docker_engine, wheelhouse, ca_bundle):
    changed = world / "tampered.toml"
    changed.write_text(recipe_overlay(repo, extra_env=(("ENVMAN_TEST", "tampered"),)))  # a new recipe: rebuilt
    repo.tamper(f"cuda-compat-10-0_{PACKAGES['cuda-compat-10-0']}_all.deb")
    p = envman(world, "build", STACK, "--builder", "classic", "--wheelhouse", str(wheelhouse), "--ca-bundle", ca_bundle,
               "--json", recipes=changed)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    (row,) = json.loads(p.stdout)
    first = row["error"].splitlines()[0]
    assert f"rebuilding nvidia/cuda:{TAG} from NVIDIA's recipe failed: " in first, first
    assert "cuda-compat-10-0" in first and ("Hash Sum mismatch" in first or "unexpected size" in first), first
    assert "do not work around it" in first or "do not work around it" in (row.get("hint") or "")
