"""envman against rootless Podman's Docker-compatible API, as a non-root user with no Docker access.

A test user (created here, removed at the end) starts ``podman system service`` on a socket under
its own ``XDG_RUNTIME_DIR``; envman finds that socket by itself (the user cannot use Docker's).
The stand-in stack (``tests/support/multiuser.py``) is built, smoke-tested, promoted, run and
pruned through it; GPUs go through CDI with a fake ``nvidia.com/gpu`` spec, and a GPU request
Podman cannot attach is refused instead of starting a container without one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.cdi import FAKE_NVIDIA_CDI
from tests.support.multiuser import STANDIN_DRIVER, create_user, delete_user, require_user_tools, user_python

from .test_shared_engine import MATRIX, STACK_QUERY

pytestmark = [pytest.mark.docker, pytest.mark.podman, pytest.mark.slow]

CDI_FILE = Path("/etc/cdi/envman-test-fake-nvidia.yaml")

GPU_CHECK = r'''
import json, sys
from envman.engine.docker import Engine
from envman.engine.values import GpuRequest
from envman.errors import EnvmanError
with Engine.connect() as e:
    try:
        r = e.run(sys.argv[1], ["sh", "-c", "echo gpu=${FAKE_GPU:-none}"], gpus=GpuRequest("devices", devices=("0",)), network="none")
        print(json.dumps({"ok": True, "stdout": r.stdout, "exit": r.exit_code}))
    except EnvmanError as exc:
        print(json.dumps({"ok": False, "error": exc.line()}))
'''


@pytest.fixture(scope="module")
def pod(docker_engine, standin):
    require_user_tools("the rootless Podman tests create a user and start its podman service",
                       ("podman", "newuidmap", "useradd", "runuser"))
    top = Path(tempfile.mkdtemp(prefix="envman-podman-"))
    top.chmod(0o755)
    user = None
    service = None
    try:
        python = user_python(top / "py")
        (top / "matrix.toml").write_text(MATRIX)
        (top / "driver.py").write_text(STANDIN_DRIVER)
        (top / "gpu_check.py").write_text(GPU_CHECK)
        user = create_user("envmanu-p")  # not in the docker group: Docker's socket is not its engine
        runtime = top / "run"
        for d in (runtime, runtime / "podman"):
            d.mkdir(mode=0o700)
            os.chown(d, user.uid, user.gid)
        env = user.env(XDG_RUNTIME_DIR=str(runtime))
        r = user.run(["sh", "-c", "mkdir -p ~/.config/containers && "
                      "printf '[storage]\\ndriver = \"overlay\"\\n' > ~/.config/containers/storage.conf"], env=env)
        assert r.returncode == 0, r.stderr
        sock = runtime / "podman" / "podman.sock"
        service = subprocess.Popen(
            ["runuser", "-u", user.name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
             "podman", "system", "service", "--time=0", f"unix://{sock}"],
            stdout=subprocess.DEVNULL, stderr=(top / "service.log").open("wb"))
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sock.exists(), f"podman system service did not start: {(top / 'service.log').read_text()[-2000:]}"
        base = standin.rootfs("bookworm")
        saved = subprocess.run(["docker", "save", base], capture_output=True, check=True).stdout
        r = subprocess.run(["runuser", "-u", user.name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                            "podman", "load"], input=saved, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        yield {"top": top, "python": str(python), "base": base, "user": user, "env": env, "sock": sock}
    finally:
        CDI_FILE.unlink(missing_ok=True)
        if service is not None:
            service.terminate()
            try:
                service.wait(timeout=20)
            except subprocess.TimeoutExpired:
                service.kill()
        if user is not None:
            user.run(["podman", "system", "reset", "--force"], env=user.env(XDG_RUNTIME_DIR=str(top / "run")),
                     timeout=120)
            delete_user(user.name)
        shutil.rmtree(top, ignore_errors=True)


def as_user(pod, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return pod["user"].run(list(argv), env=pod["env"], timeout=timeout)


def envman(pod, *args: str) -> subprocess.CompletedProcess:
    return as_user(pod, pod["python"], "-m", "envman", "--matrix", str(pod["top"] / "matrix.toml"), *args)


def test_rootless_podman_build_smoke_run_prune(pod):
    user = pod["user"]
    # doctor names the engine it found on its own
    r = envman(pod, "doctor", "--json")
    engine = json.loads(r.stdout)["engine"]
    assert engine["engine"] == "podman" and engine["rootless"] is True, r.stdout
    assert engine["selected_by"] == "rootless podman socket" and engine["url"] == f"unix://{pod['sock']}"

    # build, smoke, promote through Podman's Docker API
    def build(variant: str) -> dict:
        r = as_user(pod, pod["python"], str(pod["top"] / "driver.py"), str(pod["top"] / "matrix.toml"), STACK_QUERY,
                    variant, pod["base"])
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = build("p1")
    assert first["smoked"] and first["promoted"] and first["overall"] == "pass", first
    again = build("p1")
    assert again["cached"] and not again["smoked"] and again["stable_id"] == first["stable_id"]
    r = envman(pod, "images", "--json")
    rows = json.loads(r.stdout)
    assert any(row.get("smoke") == "pass" for row in rows), r.stdout

    # run a project: the podman CLI, rootless, files in the project stay the user's
    root = user.home / "pod-proj"
    assert as_user(pod, "mkdir", "-p", str(root)).returncode == 0
    assert as_user(pod, "sh", "-c", f"printf 'name = \"pod-proj\"\\nstack = \"{STACK_QUERY}\"\\ngpus = \"none\"\\n' "
                   f"> {root}/envman.toml").returncode == 0
    assert envman(pod, "project", "add", str(root)).returncode == 0
    dry = envman(pod, "run", "pod-proj", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    argv = json.loads(dry.stdout)["argv"]
    assert argv[:4] == ["podman", "--remote", "--url", f"unix://{pod['sock']}"] and "--userns" in argv
    r = envman(pod, "run", "pod-proj", "--", "sh", "-c", "id -u; touch /workspace/made-here")
    assert r.returncode == 0 and r.stdout.split()[0] == str(user.uid), (r.stdout, r.stderr)
    assert (root / "made-here").stat().st_uid == user.uid

    # prune: another build's stale image is the user's to remove; the stable one stays
    second = build("p2")
    assert second["promoted"] and second["stable_id"] != first["stable_id"]
    r = envman(pod, "run", "pod-proj", "--update", "--", "true")
    assert r.returncode == 0, r.stderr
    r = envman(pod, "prune", "--json")
    assert r.returncode == 0, r.stderr
    removed = {row["image_id"] for row in json.loads(r.stdout)}
    assert first["stable_id"] in removed and second["stable_id"] not in removed
    assert envman(pod, "run", "pod-proj", "--", "true").returncode == 0


def test_podman_gpu_request_goes_through_cdi_or_is_refused(pod):
    image = pod["base"]
    check = lambda: json.loads(as_user(pod, pod["python"], str(pod["top"] / "gpu_check.py"), image).stdout)  # noqa: E731
    CDI_FILE.unlink(missing_ok=True)
    refused = check()
    assert refused["ok"] is False and "Podman cannot attach" in refused["error"], refused
    CDI_FILE.parent.mkdir(parents=True, exist_ok=True)
    CDI_FILE.write_text(FAKE_NVIDIA_CDI)
    try:
        attached = check()
        assert attached == {"ok": True, "stdout": "gpu=0\n", "exit": 0}, attached
    finally:
        CDI_FILE.unlink(missing_ok=True)
