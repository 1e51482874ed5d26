"""Named environments: ``envman run --detach/--name``, ``exec``'s argv, selection by name or project,
the shell ``envman shell`` starts."""

from __future__ import annotations

import os
import subprocess

import pytest

from envman.run.envs import EnvContainer, SHELL_COMMAND, exec_argv, from_inspect, one, select
from envman.errors import UserError
from envman.run.plan import KEEP_ALIVE, RunPlan, docker_argv
from envman.run.command import check_container_name
from tests.support.cli import run_envman


def plan(**kw) -> RunPlan:
    base = dict(image="envman/s:latest", project="demo", stack="s", root="/p", home="/h", uid=1000, gid=1000)
    base.update(kw)
    return RunPlan(**base)


def test_named_and_detached_argv():
    argv = docker_argv(plan(env_name="bg", container_name="envman-1000-bg", detach=True, command=KEEP_ALIVE, tty=True, interactive=True))
    assert argv[argv.index("--name") + 1] == "envman-1000-bg"
    assert "envman.env=bg" in argv and "envman.uid=1000" in argv and "--detach" in argv
    assert "--tty" not in argv and "--interactive" not in argv
    assert argv[-2:] == ["sleep", "infinity"]
    argv = docker_argv(plan(workdir="/workspace/a b"))
    assert argv[argv.index("--workdir") + 1] == "/workspace/a b" and "--name" not in argv


@pytest.mark.parametrize("bad", ["a b", "-x", "", "a" * 129, "x;rm", "../x", "x/y"])
def test_env_names_are_checked(bad):
    with pytest.raises(UserError):
        check_container_name(bad)


def _c(env, project, state="running", cid="c1"):
    return EnvContainer(cid, f"envman-1-{env}", env, project, "s", 1, state, "2026-11-23 10:00:00", "img", "/p")


def test_select_by_name_then_project():
    cs = [_c("a", "p", cid="1"), _c("b", "p", cid="2"), _c("p", "q", cid="3")]
    assert [c.id for c in select(cs, "p", action="stop")] == ["3"]  # a name beats a project
    assert [c.id for c in select(cs[:2], "p", action="stop")] == ["1", "2"]
    with pytest.raises(UserError, match="running: a, b, p"):
        select(cs, "zzz", action="stop")
    with pytest.raises(UserError, match="2 running environments"):
        one(cs[:2], "p")
    with pytest.raises(UserError, match="not running"):
        one([_c("a", "p", state="exited")], "a")


def test_exec_argv_and_inspect():
    c = from_inspect({"Id": "abc", "Name": "/envman-1-x", "State": {"Status": "running"}, "Created": "2026-11-23T10:00:00.1Z",
                      "Config": {"Image": "i", "Labels": {"envman.env": "x", "envman.project": "p", "envman.name": "s",
                                                          "envman.uid": "1"}},
                      "Mounts": [{"Source": "/home/u/p", "Destination": "/workspace"}]})
    assert (c.env, c.project, c.uid, c.root, c.created) == ("x", "p", 1, "/home/u/p", "2026-11-23 10:00:00")
    argv = exec_argv(c, ["ls", "-l"], uid=5, gid=6, workdir="/workspace/s", environment=[("A", "1")], tty=True,
                     interactive=True)
    assert argv == ["docker", "exec", "--interactive", "--tty", "--user", "5:6", "--workdir", "/workspace/s", "--env",
                    "HOME=/home/envman", "--env", "A", "abc", "ls", "-l"]  # values never on an argv
    argv = exec_argv(c, ["ls"], uid=5, gid=6, workdir="/w", environment=[("A", "secret")], env_file="{slot}")
    assert argv[argv.index("--env-file") + 1] == "{slot}" and not any("secret" in w for w in argv)
    assert exec_argv(c, [], uid=5, gid=6, workdir="/workspace")[-3:] == list(SHELL_COMMAND)


def envman_helper(*args, cwd=None, env=None):
    e = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    e.update(env or {})
    return run_envman(args, cwd=cwd, env=e)


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_the_shell_envman_opens_keeps_the_stack_venv_first_on_path(tmp_path, shell):
    """`envman shell` and a bare `envman exec` ran a login shell, whose /etc/profile (Debian and
    Ubuntu set PATH outright) and start-up files hid the venv: `python: command not found`. Here
    the user's start-up files reset PATH too, and the venv's python must still be the one found."""
    import shutil
    import subprocess

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("#!/bin/sh\necho venv\n")
    (venv / "python").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    for rc in (".bashrc", ".profile", ".bash_profile"):
        (home / rc).write_text("PATH=/usr/bin:/bin\n")
    tools = tmp_path / "tools"  # the shells the image has: bash and sh, or sh alone
    tools.mkdir()
    for name in ("sh", "bash") if shell == "bash" else ("sh",):
        (tools / name).symlink_to(shutil.which(name))
    r = subprocess.run(list(SHELL_COMMAND), input='command -v python; echo "bash=${BASH:-}"; exit\n',
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={"HOME": str(home), "PATH": f"{venv}:{tools}", "TERM": "dumb"})
    out = r.stdout.splitlines()
    assert r.returncode == 0 and out[0] == str(venv / "python"), (r.stdout, r.stderr)
    assert (out[1] != "bash=") == (shell == "bash")  # bash where the image has it, else sh
