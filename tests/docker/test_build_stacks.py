"""Build real stacks through the real templates on stand-in bases; smoke; promote or refuse.

The bases are stand-ins (no registry here), everything after FROM is real: apt installs the
Python, pip installs torch 2.13.0 (CPU) from a wheelhouse and its dependencies from the index
through the custom-CA feature, and the probe multiplies matrices inside the image.
"""

import json
import os
import subprocess
import sys

import pytest

from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve

from .conftest import STANDIN_MATRIX as MATRIX

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CPU, BROKEN = "torch-2.13.0-cpu", "torch-2.13.0-cuda12.8"


def stable(name: str) -> str:
    """The stable tag envman gives a stack of the stand-in matrix: its rows are a user's, named by
    their content (``latest-<key>``), never a shipped stack's ``latest``."""
    from envman.state import stable_ref

    return stable_ref(resolve(load_matrix([MATRIX]), name))


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    return tmp_path_factory.mktemp("state")


def envman(state, *args, check=None, timeout=1800):
    env = {**os.environ, "ENVMAN_STATE_DIR": str(state), "ENVMAN_CONFIG_DIR": str(state / "config")}
    p = subprocess.run([sys.executable, "-m", "envman", "--matrix", str(MATRIX), *args],
                       capture_output=True, text=True, env=env, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def bases(docker_engine, standin):
    """Stand-ins for exactly the bases the two stacks resolve to (whatever patch release of CUDA
    the matrix picks), so the build never reaches for a registry.

    The module starts and ends without images of its two stacks: it asserts a first build is not
    cached. Only images built FROM a stand-in go (they inherit ``envman.test-fixture=true``), so
    a real image of the same stack is never touched."""
    m = load_matrix([MATRIX])
    names = [resolve(m, n).name for n in (CPU, BROKEN)]
    for n in (CPU, BROKEN):
        standin(resolve(m, n).base_image)

    def remove_built():
        for img in docker_engine.list_images({"envman.managed": "true", "envman.test-fixture": "true"}):
            if img.labels.get("envman.name") in names:
                for ref in img.tags or (img.id,):
                    docker_engine.remove_image(ref, force=True)

    remove_built()
    yield
    remove_built()


def test_cpu_torch_from_wheelhouse_builds_smokes_and_promotes(bases, docker_engine, wheelhouse, ca_bundle, state):
    args = ["build", CPU, "--wheelhouse", str(wheelhouse), "--ca-bundle", ca_bundle, "--json"]
    # A CPU stack whose CPU checks pass is a pass: promoted without --accept-cpu-only, no GPU advice.
    first = json.loads(envman(state, *args, check=0).stdout)[0]
    assert first["smoke"] == "pass" and first["promoted"] and not first["cached"], first
    assert "--gpus" not in first["reason"] and "CPU stack" in first["reason"], first["reason"]
    assert first["name"] == "torch-2.13.0-cpu-py3.11"
    report = json.loads((state / "reports" / (first["image_id"].split(":")[-1] + ".json")).read_text())
    probe = report["probe"]
    assert probe["overall"] == "pass"  # a CPU stack needs no GPU to pass
    assert not any("--gpus" in c.get("reason", "") for c in probe["checks"]), probe["checks"]
    assert probe["python"].startswith("3.11")  # not Ubuntu 22.04's default 3.10: provisioned by envman
    fw = next(c for c in probe["checks"] if c["name"] == "framework")
    assert fw["status"] == "pass", fw
    # the stable tag points at the image that carries the verdict of the smoke-tested candidate
    stable_cpu = stable(CPU)
    assert ":latest-" in stable_cpu
    labels = docker_engine.inspect_image(stable_cpu).labels
    assert labels["envman.smoke.image"] == first["image_id"] and labels["envman.smoke.status"] == "pass"
    promoted_id = docker_engine.inspect_image(stable_cpu).id

    second = json.loads(envman(state, *args, check=0).stdout)[0]
    # the candidate tag now names the image that carries the verdict: a no-op build finds that one
    assert second["cached"] and second["image_id"] == promoted_id
    # The second was a no-op, so the third is that result again (envman.run.fastpath), ...
    third = json.loads(envman(state, *args, check=0).stdout)[0]
    assert {k: v for k, v in third.items() if k != "build_seconds"} == {
        k: v for k, v in second.items() if k != "build_seconds"}
    # ... until something it stood on changes: without the stable tag, the full path promotes again.
    docker_engine.remove_image(stable_cpu)
    fourth = json.loads(envman(state, *args, check=0).stdout)[0]
    assert fourth["cached"] and fourth["promoted"]
    assert docker_engine.inspect_image(stable_cpu).labels["envman.smoke.image"] == first["image_id"]
    assert promoted_id


def test_broken_stack_fails_smoke_and_is_not_promoted(bases, docker_engine, wheelhouse, ca_bundle, state):
    p = envman(state, "build", BROKEN, "--wheelhouse", str(wheelhouse),
               "--ca-bundle", ca_bundle, "--accept-cpu-only", "--json")
    assert p.returncode == 1, p.stderr
    row = json.loads(p.stdout)[0]
    assert row.get("smoke") == "fail" and not row["promoted"], row
    assert docker_engine.inspect_image(stable(BROKEN)) is None
    report = json.loads((state / "reports" / (row["image_id"].split(":")[-1] + ".json")).read_text())
    failing = [c for c in report["probe"]["checks"] if c["status"] == "fail"]
    assert failing, report["probe"]


def test_images_and_prune(bases, docker_engine, state):
    rows = json.loads(envman(state, "images", "--json", check=0).stdout)
    cpu = [r for r in rows if r["stack"] == "torch-2.13.0-cpu-py3.11" and r["stable"]]
    assert cpu and cpu[0]["smoke"] == "pass"
    assert any(r["stack"] == "torch-2.13.0-cuda12.8-py3.11" and r["smoke"] == "fail" for r in rows)
    gone = json.loads(envman(state, "prune", "--json", check=0).stdout)
    assert "torch-2.13.0-cuda12.8-py3.11" in {g["stack"] for g in gone}
    assert "torch-2.13.0-cpu-py3.11" not in {g["stack"] for g in gone if stable(CPU) in g["tags"]}
    assert docker_engine.inspect_image(stable(CPU)) is not None
    assert docker_engine.image_exists("ubuntu:22.04")  # a stand-in, not envman's: untouched
