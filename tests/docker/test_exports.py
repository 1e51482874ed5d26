"""``envman export devcontainer`` and ``envman export compose`` read by the real tools: the Dev
Containers CLI (``read-configuration``, then ``up`` on the local engine and ``exec`` in the
container) and Debian's docker-compose 1.29 (``config``).

The project's stack image is a fixture built here FROM the stand-in Debian root filesystem (see
``tests/docker/test_registry.py``); the stack version is unique to the session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import in_ci

from envman.state import stable_ref

from .test_registry import MATRIX, STACK, build_fixture_image, stack_obj

pytestmark = [pytest.mark.docker]


def _need(tool: str, how: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if in_ci():
            pytest.fail(f"CI needs {tool}: {how}", pytrace=False)
        pytest.skip(f"{tool} is not installed ({how})")
    return path


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("matrix") / "torch.toml"
    path.write_text(MATRIX)
    return path


@pytest.fixture
def home(tmp_path) -> Path:
    for d in ("state", "config"):
        (tmp_path / "home" / d).mkdir(parents=True)
    return tmp_path / "home"


def envman(matrix: Path, home: Path, *args: str, cwd: Path | None = None):
    env = {**os.environ, "ENVMAN_STATE_DIR": str(home / "state"), "ENVMAN_CONFIG_DIR": str(home / "config")}
    env.pop("ENVMAN_MATRIX", None)
    return subprocess.run([sys.executable, "-m", "envman", "--matrix", str(matrix), *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd, stdin=subprocess.DEVNULL)


def make_project(root: Path, name: str, extra: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "envman.toml").write_text(f'stack = "{STACK}"\nname = "{name}"\ngpus = "none"\n{extra}')
    return root


def trust(matrix: Path, home: Path, *roots: Path) -> None:
    """An export carries a file's mounts, variables and command to another tool: as for a run,
    the user trusts the file first."""
    for root in roots:
        r = envman(matrix, home, "project", "trust", str(root / "envman.toml"))
        assert r.returncode == 0, r.stderr


@pytest.mark.compose
def test_compose_file_is_read_by_docker_compose(matrix, home, tmp_path):
    compose_bin = _need("docker-compose", "apt-get install docker-compose")
    a = make_project(tmp_path / "a", "envman-test-a", 'command = ["sh", "-c", "echo $HOME"]\n'
                     '[environment]\nPRICE = "5$ off"\nDB_PASSWORD = "never-written"\n')
    b = make_project(tmp_path / "b", "envman-test-b", "ports = [8080]\n")
    out = tmp_path / "compose.yaml"
    r = envman(matrix, home, "export", "compose", str(a), str(b), "-o", str(out))
    assert r.returncode == 2 and "not trusted" in r.stderr and not out.exists(), r.stderr
    trust(matrix, home, a, b)
    r = envman(matrix, home, "export", "compose", str(a), str(b), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "never-written" not in out.read_text() and "5$ off" not in out.read_text()
    source = r.stderr.split("set -a; . ")[1].split(";")[0]  # the values, in a file only the user reads
    assert os.stat(source).st_mode & 0o777 == 0o600
    r = envman(matrix, home, "export", "compose", str(a), "-o", str(out))
    errors = [line for line in r.stderr.splitlines() if not line.startswith("warning: ")]  # a warning may come first
    assert r.returncode == 2 and "--force" in r.stderr and len(errors) == 1, r.stderr
    p = subprocess.run(["sh", "-c", f'set -a; . "{source}"; set +a; exec "$0" -f "$1" config', compose_bin, str(out)],
                       capture_output=True, text=True, timeout=120, env={**os.environ})
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(p.stdout)
    sa, sb = doc["services"]["envman-test-a"], doc["services"]["envman-test-b"]
    # compose re-escapes $ in its own output: "$$" there is one literal "$" in the container.
    assert sa["environment"]["PRICE"] == "5$$ off" and sa["command"] == ["sh", "-c", "echo $$HOME"]
    assert sa["environment"]["DB_PASSWORD"] == "never-written"  # read when compose runs, not stored
    assert sa["image"] == sb["image"] == stable_ref(stack_obj(matrix))
    assert {"source": str(a.resolve()), "target": "/workspace", "type": "bind"} in sa["volumes"]
    assert sb["ports"][0].startswith("127.0.0.1:8080:8080")
    assert sa["security_opt"] == ["no-new-privileges"] and sa["init"] is True


@pytest.mark.compose
def test_compose_gpu_reservation_is_understood_by_docker_compose(matrix, home, tmp_path):
    compose_bin = _need("docker-compose", "apt-get install docker-compose")
    gpu_matrix = tmp_path / "gpu.toml"
    gpu_matrix.write_text(MATRIX.replace('variant = "cpu"', 'variant = "cu124"\ncuda = "12.4"\nsass = ["8.0", "9.0"]'))
    stack = STACK.replace("-cpu-", "-cuda12.4-")
    root = tmp_path / "g"
    root.mkdir()
    (root / "envman.toml").write_text(f'stack = "{stack}"\nname = "envman-test-g"\ngpus = "device=0,1"\n')
    out = tmp_path / "compose.yaml"
    trust(gpu_matrix, home, root)
    r = envman(gpu_matrix, home, "export", "compose", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    p = subprocess.run([compose_bin, "-f", str(out), "config"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    dev = yaml.safe_load(p.stdout)["services"]["envman-test-g"]["deploy"]["resources"]["reservations"]["devices"]
    assert dev == [{"capabilities": ["gpu"], "device_ids": ["0", "1"], "driver": "nvidia"}]


@pytest.mark.devcontainer
def test_devcontainer_is_read_and_brought_up_by_the_dev_containers_cli(docker_engine, standin, matrix, home, tmp_path,
                                                                       test_labels):
    cli = _need("devcontainer", "npm install -g @devcontainers/cli")
    stack = stack_obj(matrix)
    local = stable_ref(stack)
    root = make_project(tmp_path / "dc", "envman-test-dc", '[environment]\nGREETING = "hello $USER"\nAPI_TOKEN = "x"\n')
    container = None
    try:
        build_fixture_image(docker_engine, standin, stack, test_labels)
        trust(matrix, home, root)
        r = envman(matrix, home, "export", "devcontainer", str(root))
        assert r.returncode == 0, r.stderr
        conf = json.loads((root / ".devcontainer" / "devcontainer.json").read_text())
        assert "API_TOKEN" not in conf["containerEnv"] and "--env-file" in conf["runArgs"]
        p = subprocess.run([cli, "read-configuration", "--workspace-folder", str(root)], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        read = json.loads(p.stdout.strip().splitlines()[-1])["configuration"]
        assert read["workspaceFolder"] == "/workspace" and read["remoteUser"] == "envman"
        p = subprocess.run([cli, "up", "--workspace-folder", str(root), "--id-label", f"envman.test-dc={tmp_path.name}"],
                           capture_output=True, text=True, timeout=600, env={**os.environ, "API_TOKEN": "tok-from-env"})
        result = json.loads(p.stdout.strip().splitlines()[-1])
        container = result.get("containerId")
        assert p.returncode == 0 and result["outcome"] == "success", (p.stdout[-2000:], p.stderr[-2000:])
        probe = "id -un; pwd; echo \"$GREETING\"; echo \"$API_TOKEN\"; echo \"$ENVMAN_STACK\"; ls /workspace"
        p = subprocess.run([cli, "exec", "--workspace-folder", str(root), "--id-label", f"envman.test-dc={tmp_path.name}",
                            "sh", "-c", probe], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.strip().splitlines()
        assert lines[:5] == ["envman", "/workspace", "hello $USER", "x", stack.name], lines
        assert "envman.toml" in lines[5:]
        info = docker_engine.inspect_image(local)
        assert info is not None
    finally:
        if container:
            docker_engine.remove_container(container, force=True)
        for img in docker_engine.list_images(test_labels):  # the CLI's images inherit the fixture's labels
            if any(t.startswith("vsc-") for t in img.tags):
                for t in img.tags:
                    docker_engine.remove_image(t, force=True)
        if docker_engine.inspect_image(local) is not None:
            docker_engine.remove_image(local, force=True)
