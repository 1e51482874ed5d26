"""``envman submit`` / ``jobs`` / ``logs`` against a real Slurm cluster, running a real envman image.

Real: the one-node Slurm 22.05 cluster (slurmctld, slurmd, munged; fake GPUs as character
devices), ``sbatch``/``squeue``/``sacct -c``/``scancel``, the batch scripts envman writes, the
``envman run`` they start on the node (preflight and ``docker run``), the Docker engine, and
Charliecloud (``ch-convert`` + ``ch-run``, unprivileged, no daemon).

Fixtures: the stack image ``envman/torch-0.0.1-cuda11.8-py3.11:latest`` built FROM a stand-in
CUDA base with its smoke report written by the test (see ``tests/docker/test_projects.py``), and
the small user matrix that names it. The node has no NVIDIA driver: a GPU job must fail its
preflight on the node naming exactly the devices Slurm allocated, never run on "all".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from envman.images.build import SmokeReport, save_report
from tests.docker.test_projects import MATRIX_FRAMEWORK, MATRIX_IMAGES, MATRIX_OS, STACKS, fixture_stack_image, stable_tag

pytestmark = [pytest.mark.slurm, pytest.mark.docker, pytest.mark.slow]

QUERY = "torch-0.0.1-cuda11.8"
STACK, BASE, SUITE, CUDA, _PY = STACKS[QUERY]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


@pytest.fixture(scope="module")
def site(docker_engine, standin, slurm_cluster):
    """Matrix, state, config and a project on the stack, all in one folder the jobs can reach."""
    d = Path(tempfile.mkdtemp(prefix="envman-submit-"))
    d.chmod(0o755)
    try:
        (d / "matrix").mkdir()
        matrix = []
        for name, text in (("os.toml", MATRIX_OS), ("images.toml", MATRIX_IMAGES), ("torch.toml", MATRIX_FRAMEWORK)):
            (d / "matrix" / name).write_text(text)
            matrix.append(str(d / "matrix" / name))
        standin(BASE, suite=SUITE, cuda_version=CUDA)
        image_id = fixture_stack_image(docker_engine, STACK, BASE, stable_tag(matrix, STACK))
        state, config = d / "state", d / "config"
        env = {**slurm_cluster.env, "ENVMAN_STATE_DIR": str(state), "ENVMAN_CONFIG_DIR": str(config),
               "USER": os.environ.get("USER") or "root", "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("ENVMAN_MATRIX", None)
        old = os.environ.get("ENVMAN_STATE_DIR")
        os.environ["ENVMAN_STATE_DIR"] = str(state)
        try:
            save_report(SmokeReport(stack=STACK, image=stable_tag(matrix, STACK), image_id=image_id, overall="pass",
                                    reason="test fixture: stand-in stack image, no probe was run",
                                    gpus_requested=False, probe=None, exit_code=0, stderr_tail=""))
        finally:
            if old is None:
                os.environ.pop("ENVMAN_STATE_DIR")
            else:
                os.environ["ENVMAN_STATE_DIR"] = old
        project = d / "project"
        project.mkdir()
        (project / "envman.toml").write_text(f'stack = "{QUERY}"\nname = "slurm-demo"\n'
                                             '[environment]\nNOTE = "$HOME; $(id) \'x\'"\n')
        site = {"dir": d, "matrix": matrix, "env": env, "project": project, "cluster": slurm_cluster}
        trusted = envman(site, "project", "trust", str(project / "envman.toml"))  # it sets environment variables
        assert trusted.returncode == 0, trusted.stderr
        yield site
    finally:
        shutil.rmtree(d, ignore_errors=True)


def envman(site, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "envman"]
    for f in site["matrix"]:
        argv += ["--matrix", f]
    return subprocess.run([*argv, *args], cwd=site["project"], env=site["env"], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def submitted_id(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("submitted job "), p.stdout
    return first.split()[2].rstrip(":")


def jobs(site) -> dict[str, dict]:
    p = envman(site, "jobs", "--json")
    assert p.returncode == 0, p.stderr
    return {j["id"]: j for j in json.loads(p.stdout)}


def wait_done(site, *ids: str, timeout: float = 90) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        js = jobs(site)
        if all(js.get(i, {}).get("state") in TERMINAL for i in ids):
            return js
        if time.monotonic() > deadline:
            pytest.fail(f"jobs {ids} did not end: {[js.get(i) for i in ids]}\n{site['cluster'].log_tail()}")
        time.sleep(0.5)


def log(site, job: str) -> str:
    p = envman(site, "logs", job)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_output_and_exit_code_of_a_cpu_job(site):
    dry = envman(site, "submit", "--gpus", "0", "--dry-run", "--", "sh", "-c", "echo $0", "a b")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("#!/bin/bash\n") and "--no-gpu" in dry.stdout and "'a b'" in dry.stdout
    assert jobs(site) == {} or all(j["state"] for j in jobs(site).values())  # nothing submitted by --dry-run

    script = ('echo "hello from $ENVMAN_PROJECT on $CUDA_VERSION in $(pwd)"; echo "gpus=${CUDA_VISIBLE_DEVICES-unset}"; '
              'echo "note=$NOTE"; exit 3')
    job = submitted_id(envman(site, "submit", "--gpus", "0", "--time", "5", "--cpus", "1", "--mem", "100M",
                              "--", "sh", "-c", script))
    state = wait_done(site, job)[job]
    assert (state["state"], state["exit_code"]) == ("FAILED", 3)
    assert state["project"] == "slurm-demo" and state["runtime"] == "docker"
    out = log(site, job)
    assert f"hello from slurm-demo on {CUDA} in /workspace" in out
    assert "gpus=unset" in out  # a CPU job sees no GPU selection at all
    assert "note=$HOME; $(id) 'x'" in out

    ok = submitted_id(envman(site, "submit", "--gpus", "0", "--", "sh", "-c", "echo one; sleep 2; echo two"))
    followed = envman(site, "logs", "--follow", ok)  # returns once the job has ended, with all of it
    assert followed.returncode == 0 and followed.stdout == "one\ntwo\n", followed
    assert followed.stderr == f"envman: job {ok} COMPLETED, exit code 0\n"
    assert jobs(site)[ok]["state"] == "COMPLETED" and jobs(site)[ok]["exit_code"] == 0


def test_gpu_jobs_get_exactly_their_allocated_devices(site):
    """With GPU 0 held by another job, a one-GPU job gets device 1, and a two-GPU job device=0,1;
    the node (no NVIDIA driver) fails the preflight naming exactly those devices: never "all",
    never a silent CPU run."""
    env = site["env"]
    holder = subprocess.run(["sbatch", "--parsable", "--gres=gpu:1", "--output=/dev/null", "--wrap", "sleep 120"],
                            env=env, capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["squeue", "-h", "-j", holder, "-o", "%T"], env=env, capture_output=True, text=True,
                             timeout=30).stdout.strip() != "RUNNING":
            assert time.monotonic() < deadline, "the job holding GPU 0 never started"
            time.sleep(0.2)
        gres = subprocess.run(["scontrol", "show", "job", "-d", holder], env=env, capture_output=True, text=True,
                              timeout=30).stdout
        assert "gpu:1(IDX:0)" in gres, gres
        one = submitted_id(envman(site, "submit", "--gpus", "1", "--", "true"))
        assert wait_done(site, one)[one]["exit_code"] == 1
    finally:
        subprocess.run(["scancel", holder], env=env, timeout=30)
    two = submitted_id(envman(site, "submit", "--gpus", "2", "--", "true"))
    states = wait_done(site, one, two)
    for job, devices in ((one, "1"), (two, "0,1")):
        assert (states[job]["state"], states[job]["exit_code"], states[job]["gpus"]) == ("FAILED", 1, len(devices.split(","))), states[job]
        out = log(site, job)
        errors = [ln for ln in out.splitlines() if ln.startswith("envman: error:")]
        assert len(errors) == 1 and f"GPUs requested (--gpus device={devices}) but " in errors[0], out
        assert "--no-gpu" in errors[0] and "--gpus all" not in out


def test_cancel_stops_the_container(site, docker_engine):
    job = submitted_id(envman(site, "submit", "--gpus", "0", "--", "sleep", "300"))
    name = f"envman-job-{job}"
    deadline = time.monotonic() + 60
    while not docker_engine.list_containers({"envman.project": "slurm-demo"}) or not _running(name):
        assert time.monotonic() < deadline, f"container {name} never started: {log(site, job)}"
        time.sleep(0.3)
    subprocess.run(["scancel", job], env=site["env"], check=True, timeout=30)
    deadline = time.monotonic() + 20  # KillWait is 10 s: the trap must be faster than SIGKILL
    while _running(name):
        assert time.monotonic() < deadline, f"container {name} survived scancel"
        time.sleep(0.3)
    assert wait_done(site, job)[job]["state"] == "CANCELLED"


def _running(name: str) -> bool:
    p = subprocess.run(["docker", "ps", "-q", "--filter", f"name=^{name}$"], capture_output=True, text=True, timeout=30)
    return bool(p.stdout.strip())


def test_nonexistent_partition_is_a_clean_error(site):
    before = jobs(site)
    p = envman(site, "submit", "--partition", "nope", "--", "true")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "partition 'nope' does not exist" in p.stderr and "debug" in p.stderr
    assert jobs(site) == before
    bad = envman(site, "submit", "--partition", "de;bug", "--", "true")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    too_many = envman(site, "submit", "--gpus", "3", "--", "true")
    assert too_many.returncode == 2 and "Requested node configuration is not available" in too_many.stderr


def test_logs_refuses_jobs_that_are_not_the_users_envman_jobs(site):
    p = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--wrap", "true"], env=site["env"],
                       capture_output=True, text=True, check=True, timeout=30)
    other = p.stdout.strip()
    r = envman(site, "logs", other)
    assert r.returncode == 2 and f"job {other} is not one of your envman jobs" in r.stderr
    assert other not in jobs(site)
    assert envman(site, "logs", "../etc").returncode == 2


@pytest.mark.skipif(shutil.which("ch-run") is None and os.environ.get("CI", "") == "",
                    reason="charliecloud not installed (apt-get install charliecloud squashfs-tools-ng)")
def test_charliecloud_job_runs_unprivileged_from_the_converted_image(site):
    script = 'echo "ch $(id -u) $CUDA_VERSION $ENVMAN_PROJECT $(pwd)"; echo "note=$NOTE"; ls /workspace; exit 4'
    job = submitted_id(envman(site, "submit", "--runtime", "charliecloud", "--gpus", "0", "--time", "10",
                              "--", "sh", "-c", script))
    state = wait_done(site, job, timeout=150)[job]
    out = log(site, job)
    assert (state["state"], state["exit_code"]) == ("FAILED", 4), out
    assert f"ch 0 {CUDA} slurm-demo /workspace" in out and "envman.toml" in out
    assert "note=$HOME; $(id) 'x'" in out  # the project's variables arrive literally
    # The converted image runs for a user with no privileges at all, too.
    images = list((site["dir"] / "state" / "charliecloud").iterdir())
    assert len(images) == 1 and images[0].is_dir()
    nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "USER=nobody",
                             "ch-run", "--set-env", str(images[0]), "--", "sh", "-c", 'echo "$(id -u) $CUDA_VERSION"'],
                            capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 0 and nobody.stdout.strip() == f"65534 {CUDA}", nobody.stderr


def test_node_check_of_non_docker_runtimes_runs_on_the_node(site):
    """pyxis/apptainer/charliecloud jobs check the driver and verdict on the allocated GPUs first
    (envman node-check): on this driverless node that fails before any runtime is started."""
    job = submitted_id(envman(site, "submit", "--runtime", "charliecloud", "--gpus", "1", "--", "true"))
    state = wait_done(site, job)[job]
    out = log(site, job)
    assert (state["state"], state["exit_code"]) == ("FAILED", 1), out
    assert "GPUs requested (--gpus device=0) but " in out and "ch-convert" not in out and "input:" not in out


@pytest.fixture(scope="module")
def podman_site(site, tmp_path_factory):
    """The stack image loaded into Podman's storage, and a containers.conf whose default ulimits
    stay within this process's hard limits (Podman raises them for root containers otherwise,
    which fails where the runner lacks CAP_SYS_RESOURCE)."""
    import resource

    if shutil.which("podman") is None:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail("CI needs podman for the podman runtime test (apt-get install podman)", pytrace=False)
        pytest.skip("podman not installed")
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    nofile, nproc = resource.getrlimit(resource.RLIMIT_NOFILE)[1], resource.getrlimit(resource.RLIMIT_NPROC)[1]
    limits = [f"nofile={min(nofile, 1 << 20)}:{min(nofile, 1 << 20)}", f"nproc={min(nproc, 32768)}:{min(nproc, 32768)}"]
    conf.write_text("[containers]\ndefault_ulimits = [" + ", ".join(f'"{x}"' for x in limits) + "]\n")
    env = {**site["env"], "CONTAINERS_CONF": str(conf)}
    ref = stable_tag(site["matrix"], STACK)
    had = subprocess.run(["podman", "image", "exists", ref], env=env, timeout=60).returncode == 0
    save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE)
    subprocess.run(["podman", "load", "-q"], stdin=save.stdout, env=env, check=True, capture_output=True, timeout=300)
    assert save.wait(timeout=60) == 0
    try:
        yield {**site, "env": env}
    finally:
        if not had:
            subprocess.run(["podman", "rmi", "-f", ref], env=env, capture_output=True, timeout=120)


def test_podman_runtime_output_exit_code_and_cancel(podman_site):
    site = podman_site
    job = submitted_id(envman(site, "submit", "--runtime", "podman", "--gpus", "0", "--",
                              "sh", "-c", 'echo "podman $CUDA_VERSION $(pwd) note=$NOTE"; exit 5'))
    state = wait_done(site, job)[job]
    out = log(site, job)
    assert (state["state"], state["exit_code"], state["runtime"]) == ("FAILED", 5, "podman"), out
    assert f"podman {CUDA} /workspace note=$HOME; $(id) 'x'" in out

    long = submitted_id(envman(site, "submit", "--runtime", "podman", "--gpus", "0", "--", "sleep", "300"))
    name = f"envman-job-{long}"

    def running() -> bool:
        p = subprocess.run(["podman", "ps", "-q", "--filter", f"name=^{name}$"], env=site["env"], capture_output=True,
                           text=True, timeout=60)
        return bool(p.stdout.strip())

    deadline = time.monotonic() + 60
    while not running():
        assert time.monotonic() < deadline, f"container {name} never started: {log(site, long)}"
        time.sleep(0.3)
    subprocess.run(["scancel", long], env=site["env"], check=True, timeout=30)
    deadline = time.monotonic() + 20
    while running():
        assert time.monotonic() < deadline, f"container {name} survived scancel"
        time.sleep(0.3)
    assert wait_done(site, long)[long]["state"] == "CANCELLED"


@pytest.mark.skipif(shutil.which("ch-run") is None and os.environ.get("CI", "") == "",
                    reason="charliecloud not installed (apt-get install charliecloud squashfs-tools-ng)")
def test_charliecloud_job_gets_none_of_the_submitters_environment_nor_the_hosts_tmp(site):
    """envman run's isolation (red-team F10): a variable of the submitting shell and a file in the
    node's /tmp stay outside the container; the project's variables and the secrets file's
    removal at the end of the job."""
    marker = Path(tempfile.mkdtemp(prefix="envman-host-tmp-", dir="/tmp"))
    try:
        site_env = {**site, "env": {**site["env"], "ENVMAN_TEST_SUBMIT_SECRET": "s3cr3t-9c1f"}}
        script = 'env; echo "tmp: $(ls -a /tmp)"'
        job = submitted_id(envman(site_env, "submit", "--runtime", "charliecloud", "--gpus", "0", "--time", "10",
                                  "--", "sh", "-c", script))
        state = wait_done(site, job, timeout=150)[job]
        out = log(site, job)
        assert (state["state"], state["exit_code"]) == ("COMPLETED", 0), out
        assert "ENVMAN_PROJECT=slurm-demo" in out and "NVIDIA_VISIBLE_DEVICES=void" in out
        assert "s3cr3t-9c1f" not in out and "ENVMAN_TEST_SUBMIT_SECRET" not in out
        assert marker.name not in out, out
        assert list((site["dir"] / "state" / "slurm" / "env").iterdir()) == []  # deleted when the job ended
    finally:
        shutil.rmtree(marker, ignore_errors=True)
