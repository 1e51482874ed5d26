"""Daily use on the real engine: bare commands, the matching working directory, named
environments (``run --detach/--name``, ``exec``, ``ps``, ``stop``), ``shell``.

The stacks, matrix and state are the fixtures of ``test_projects`` (stand-in stack images on
stand-in bases, no framework inside); everything envman does with them here is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docker.test_projects import envman, matrix_files, stable_tag, stacks, workdir  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STACK = "torch-0.0.2-cuda12.8"


@pytest.fixture(scope="module")
def project(stacks, matrix_files, workdir):  # noqa: F811
    """A registered CPU project ``envman-test-daily`` with a subdirectory ``sub/deep``."""
    _ids, states = stacks
    root = workdir / "project-daily"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "envman.toml").write_text(f'stack = "{STACK}"\nname = "envman-test-daily"\ngpus = "none"\n')
    config, state = workdir / "config-daily", states["root"]
    r = envman(matrix_files, config, state, "project", "add", str(root), cwd=workdir)
    assert r.returncode == 0, r.stderr
    return root, config, state


def _envman(matrix_files, project, *args, cwd=None, **kw):  # noqa: F811
    root, config, state = project
    return envman(matrix_files, config, state, *args, cwd=cwd or root.parent, **kw)


def _containers(uid: int) -> list[dict]:
    out = subprocess.run(["docker", "ps", "-a", "--filter", "label=envman.project=envman-test-daily",
                          "--filter", f"label=envman.uid={uid}", "--format", "{{json .}}"],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_bare_command_and_the_matching_working_directory(matrix_files, project):  # noqa: F811
    root, _config, _state = project
    r = _envman(matrix_files, project, "run", "envman-test-daily", "python", "-c", "import sys; print(sys.argv[1:])",
                "-V", "--gpus", "x")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['-V', '--gpus', 'x']"  # everything after the project is the command's
    r = _envman(matrix_files, project, "run", "envman-test-daily", "--", "python", "-V")
    assert r.returncode == 0 and r.stdout.startswith("Python 3.13"), (r.stdout, r.stderr)

    r = _envman(matrix_files, project, "run", "--", "pwd", cwd=root / "sub" / "deep")
    assert r.returncode == 0 and r.stdout.strip() == "/workspace/sub/deep", (r.stdout, r.stderr)
    r = _envman(matrix_files, project, "run", "envman-test-daily", "pwd", cwd=root / "sub")
    assert r.stdout.strip() == "/workspace/sub", r.stderr
    r = _envman(matrix_files, project, "run", "envman-test-daily", "pwd", cwd=root.parent)  # outside: the root
    assert r.stdout.strip() == "/workspace", r.stderr
    # A second identical run (the cached plan) starts in the same place.
    r = _envman(matrix_files, project, "run", "--", "pwd", cwd=root / "sub" / "deep")
    assert r.stdout.strip() == "/workspace/sub/deep", r.stderr

    r = _envman(matrix_files, project, "run", "envman-test-daily", "true", "--", "false")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "once" in r.stderr, r.stderr


def test_named_environment_exec_ps_stop(matrix_files, project):  # noqa: F811
    root, _config, _state = project
    me = os.getuid()
    deadline = time.monotonic() + 30  # an earlier test's --rm containers are removed by the engine after they exit
    while _containers(me) and time.monotonic() < deadline:
        time.sleep(0.3)
    try:
        r = _envman(matrix_files, project, "run", "--detach", "--name", "daily-bg", "envman-test-daily")
        assert r.returncode == 0, r.stderr
        (c,) = _containers(me)
        assert c["Names"] == "daily-bg" and c["State"] == "running"

        r = _envman(matrix_files, project, "ps", "--json")
        rows = [x for x in json.loads(r.stdout) if x["project"] == "envman-test-daily"]
        assert [(x["name"], x["stack"], x["state"], x["uid"]) for x in rows] == [
            ("daily-bg", "torch-0.0.2-cuda12.8-py3.13", "running", me)]
        r = _envman(matrix_files, project, "ps")
        assert "daily-bg" in r.stdout and "envman-test-daily" in r.stdout

        # exec: as the caller, HOME and the matching directory, by name or by project.
        r = _envman(matrix_files, project, "exec", "daily-bg", "sh", "-c", 'echo "$(id -u):$(id -g) $HOME $(pwd)"',
                    cwd=root / "sub")
        assert r.returncode == 0 and r.stdout.strip() == f"{me}:{os.getgid()} /home/envman /workspace/sub", r.stderr
        r = _envman(matrix_files, project, "exec", "envman-test-daily", "--", "sh", "-c", "echo hi > made-in-env")  # by project
        assert r.returncode == 0 and (root / "made-in-env").stat().st_uid == me, r.stderr
        r = _envman(matrix_files, project, "exec", "daily-bg", "sh", "-c", "exit 5")
        assert r.returncode == 5

        # The same name twice is refused in one line; another name is fine.
        r = _envman(matrix_files, project, "run", "--detach", "--name", "daily-bg", "envman-test-daily")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "already exists" in r.stderr, r.stderr
        r = _envman(matrix_files, project, "run", "--name", "Bad Name", "envman-test-daily", "true")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr

        # --detach alone: named after the project, in a container name of this user's
        r = _envman(matrix_files, project, "run", "-d", "envman-test-daily", "sleep", "300")
        assert r.returncode == 0, r.stderr
        assert sorted(c["Names"] for c in _containers(me)) == ["daily-bg", f"envman-{me}-envman-test-daily"]
        r = _envman(matrix_files, project, "exec", "envman-test-daily", "sh", "-c", "echo $ENVMAN_PROJECT")
        assert r.returncode == 0 and r.stdout.strip() == "envman-test-daily", r.stderr  # the one named so

        r = _envman(matrix_files, project, "stop", "envman-test-daily")  # the environment named so, only
        assert r.returncode == 0 and r.stdout.startswith("stopped envman-test-daily") and "daily-bg" not in r.stdout
        r = _envman(matrix_files, project, "stop", "daily-bg")
        assert r.returncode == 0 and r.stdout.startswith("stopped daily-bg"), r.stderr
        deadline = time.monotonic() + 30
        while _containers(me) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _containers(me) == []  # stopped and removed
        r = _envman(matrix_files, project, "exec", "daily-bg", "true")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "envman run --detach" in r.stderr, r.stderr
    finally:
        for c in _containers(me):
            subprocess.run(["docker", "rm", "-f", c["ID"]], capture_output=True)


def test_shell_reads_commands_from_stdin(matrix_files, project):  # noqa: F811
    root, config, state = project
    env = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    env.update(ENVMAN_CONFIG_DIR=str(config), ENVMAN_STATE_DIR=str(state))
    argv = [sys.executable, "-m", "envman", *[a for f in matrix_files for a in ("--matrix", f)], "shell", "envman-test-daily"]
    p = subprocess.run(argv, input='echo "shell in $(pwd) as $(id -u)"; echo "python=$(command -v python)"; exit 3\n',
                       capture_output=True, text=True, env=env, cwd=root / "sub", timeout=300)
    assert p.returncode == 3, p.stderr
    assert f"shell in /workspace/sub as {os.getuid()}" in p.stdout
    # the image's /etc/profile (Debian's) sets PATH outright: the stack's venv must still come first
    assert "python=/opt/venv/bin/python" in p.stdout, p.stdout
    r = subprocess.run([*argv, "ls"], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "takes no command" in r.stderr, r.stderr


@pytest.mark.pypi
def test_notebook_serves_jupyterlab_on_localhost_with_a_token(docker_engine, matrix_files, project):  # noqa: F811
    import re
    import signal
    import urllib.error
    import urllib.request

    root, config, state = project
    proc = _envman(matrix_files, project, "notebook", "envman-test-daily", popen=True)
    try:
        url = None
        deadline = time.monotonic() + 600  # the first start installs JupyterLab from the index
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"(http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]{64}))", line)
            if m:
                url, port, token = m.group(1), int(m.group(2)), m.group(3)
        assert url is not None, proc.stderr.read() if proc.poll() is not None else "no URL printed"
        body = None
        while body is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=3) as r:
                    assert r.status == 200
                    body = json.loads(r.read())
            except (OSError, urllib.error.URLError):
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.5)
        assert body is not None and "started" in body, body
        with urllib.request.urlopen(url, timeout=10) as r:  # the lab page itself, with the token
            assert r.status == 200 and b"JupyterLab" in r.read()
        with pytest.raises(urllib.error.HTTPError) as no_token:  # without the token: refused
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10)
        assert no_token.value.code == 403

        (c,) = docker_engine.list_containers({"envman.project": "envman-test-daily"})
        inspect = json.loads(subprocess.run(["docker", "inspect", c.id], capture_output=True, text=True,
                                            check=True).stdout)[0]
        assert inspect["HostConfig"]["PortBindings"] == {"8888/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
        assert token not in " ".join([inspect["Path"], *inspect["Args"]])  # the token is on no command line
        stack_image = stable_tag(matrix_files, STACK)
        probe = subprocess.run(["docker", "run", "--rm", "--entrypoint", "/opt/venv/bin/python", stack_image, "-c",
                                "import jupyterlab"], capture_output=True, text=True)
        assert probe.returncode != 0  # JupyterLab is in the notebook layer, never in the stack image
        # the notebook layer, run by the ID this user's build recorded (its tag is anyone's to move)
        assert inspect["Config"]["Image"] == inspect["Image"] and inspect["Image"].startswith("sha256:")
        layer = json.loads(subprocess.run(["docker", "image", "inspect", inspect["Image"]], capture_output=True, text=True,
                                          check=True).stdout)[0]
        assert any(t.startswith("envman/notebook-envman-test-daily:") for t in layer["RepoTags"])

        proc.send_signal(signal.SIGINT)  # Ctrl-C stops it, and the container is removed
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 30
        while docker_engine.list_containers({"envman.project": "envman-test-daily"}) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert docker_engine.list_containers({"envman.project": "envman-test-daily"}) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for img in docker_engine.list_images({"envman.project": "envman-test-daily"}):
            for t in img.tags or (img.id,):
                docker_engine.remove_image(t, force=True)


def test_clean_removes_this_users_state_and_images_only(docker_engine, stacks, matrix_files, workdir):  # noqa: F811
    from envman import labels as L
    from envman.engine.context import deterministic_tar

    me = os.getuid()
    state, config = workdir / "state-clean", workdir / "config-clean"
    (state / "homes" / "p").mkdir(parents=True)
    (state / "homes" / "p" / "file").write_text("x")
    (state / "logs").mkdir()
    (state / "notes-of-mine.txt").write_text("not envman's")
    config.mkdir()
    tag = f"envman-test-clean-{os.getpid()}"
    base = stable_tag(matrix_files, "torch-0.0.2-cuda12.8-py3.13")  # the fixture stack image
    refs = {}
    for who, uid in (("mine", me), ("theirs", me + 4242), ("used", me)):
        labels = {L.MANAGED: L.TRUE, L.ROLE: L.ROLE_PROJECT, L.PROJECT: tag, L.NAME: STACK,
                  L.BUILT_BY_UID: str(uid), "envman.test-clean": who}
        refs[who] = f"envman/project-{tag}:{who}"
        df = f"FROM {base}\nLABEL envman.test-clean-layer={who}\n"
        for _ in docker_engine.build(deterministic_tar({"Dockerfile": df.encode()}), refs[who], labels=labels):
            pass
    holder = subprocess.run(["docker", "create", "--label", f"envman.test-clean={tag}", refs["used"], "true"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        def run(*args):
            return envman(matrix_files, config, state, "clean", *args, cwd=workdir)

        dry = run("--images", "--dry-run", "--json")
        doc = json.loads(dry.stdout)
        assert refs["mine"] in doc["images"] and refs["theirs"] not in doc["images"]
        assert refs["used"] in doc["kept_in_use"] and docker_engine.inspect_image(refs["mine"]) is not None
        assert (state / "homes").exists()  # a dry run removes nothing

        r = run("--images")  # no terminal to ask on: refused, nothing removed
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--yes" in r.stderr

        r = run("--images", "--yes")
        assert r.returncode == 0, r.stderr
        assert docker_engine.inspect_image(refs["mine"]) is None
        assert docker_engine.inspect_image(refs["theirs"]) is not None  # another user's
        assert docker_engine.inspect_image(refs["used"]) is not None  # a container uses it
        assert docker_engine.inspect_image(base) is not None  # no builder recorded: never this user's
        assert not (state / "homes").exists() and not (state / "logs").exists()
        assert (state / "notes-of-mine.txt").read_text() == "not envman's"
    finally:
        subprocess.run(["docker", "rm", "-f", holder], capture_output=True)
        for ref in refs.values():
            if docker_engine.inspect_image(ref) is not None:
                docker_engine.remove_image(ref, force=True)
