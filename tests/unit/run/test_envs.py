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


class _LabelledEngine:
    """The two engine calls ``envman exec``/``stop``/``ps`` make, over a fixed list of containers."""

    def __init__(self, containers):
        self.containers, self.stopped = list(containers), []

    def list_containers(self, labels, *, all=True):  # noqa: A002  (the engine's name)
        want = [tuple(x.split("=", 1)) for x in labels]
        return [c for c in self.containers if not [k for k, v in want if c.labels.get(k) != v]]

    def inspect_container(self, ref):
        return next((c for c in self.containers if ref in (c.id, c.name)), None)

    def stop_containers(self, ids, timeout):
        self.stopped += list(ids)


def run_container(cid_char, env, project="myproj", uid=None):
    from envman import labels as L
    from envman.engine.api import ContainerInfo

    return ContainerInfo(cid_char * 64, f"c-{env}", "img", "running",
                         L.run_labels(project, "torch-2.4.1-cpu-py3.12", os.getuid() if uid is None else uid, env))


def record_started(container, *, age=0.0):
    """Record ``container`` as one this user's envman started (what ``docker run --cidfile`` writes)."""
    import time

    from envman.run.cidfile import with_cidfile

    argv = with_cidfile(["docker", "run", "--rm", "img"])
    path = argv[argv.index("--cidfile") + 1]
    with open(path, "w") as f:
        f.write(container.id)
    os.utime(path, (time.time() - age, time.time() - age))
    return path


@pytest.fixture
def engine_of(monkeypatch, tmp_path):
    from envman.run import envs

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    entered: list[list[str]] = []
    monkeypatch.setattr(envs, "exec_docker", lambda argv, env: entered.append(argv))
    monkeypatch.setattr(envs, "terminal_flags", lambda: (False, False))

    def make(*containers):
        e = _LabelledEngine(containers)
        monkeypatch.setattr(envs, "_engine", lambda: e)
        e.entered = entered
        return e

    return make


def test_exec_never_enters_a_container_another_user_labelled_as_mine(monkeypatch, tmp_path):
    """Attack (issue 35, another user of the same engine): ``envman exec NAME|PROJECT`` picks the
    container among ``list_containers(uid=me)``, which filters on the label ``envman.uid``, and
    labels are written by whoever creates the container. A neighbour starts a container of any
    image with ``--label envman.role=run --label envman.uid=<victim> --label envman.env=dev
    --label envman.project=myproj``; when the victim's own environment is not running (ended,
    crashed), ``envman exec dev`` (or ``envman exec myproj``) silently enters the neighbour's
    container as the victim, with the victim's ``-e NAME=VALUE`` secrets and whatever is typed into
    the shell. A container is the user's only if this user's envman started it (record its ID in
    the user's state, as ``built.json`` does for images)."""
    from envman import labels as L
    from envman.engine.api import ContainerInfo
    from envman.run import envs

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    planted = ContainerInfo("c0ffee" * 10 + "abcd", "not-yours", "neighbour/evil:1", "running",
                            L.run_labels("myproj", "torch-2.4.1-cpu-py3.12", os.getuid(), "dev"))

    class Engine:
        def list_containers(self, labels, *, all=True):  # noqa: A002  (the engine's name)
            want = [tuple(x.split("=", 1)) for x in labels]
            return [planted] if not [k for k, v in want if planted.labels.get(k) != v] else []

        def inspect_container(self, ref):
            return planted if ref in (planted.id, planted.name) else None

    entered = []
    monkeypatch.setattr(envs, "_engine", lambda: Engine())
    monkeypatch.setattr(envs, "exec_docker", lambda argv, env: entered.append(argv))
    monkeypatch.setattr(envs, "terminal_flags", lambda: (False, False))
    try:
        envs.exec_cli(["dev", "-e", "HF_TOKEN=hf_secret"], ["python"])
    except UserError:
        return  # refused: the rule holds
    assert not entered, f"entered the neighbour's container: {entered[0]}"


@pytest.mark.parametrize("target", ["dev", "myproj"])
def test_exec_enters_my_recorded_container_and_refuses_a_labelled_one_in_one_line(engine_of, target):
    """Boundaries: the container whose ID my envman recorded is entered, by name or project, even
    with a neighbour's look-alike beside it (no "two environments" ambiguity); alone, the
    look-alike is refused in one line that says why, and nothing is entered."""
    from envman.run import envs

    mine, theirs = run_container("a", "dev"), run_container("b", "dev")
    e = engine_of(mine, theirs)
    record_started(mine)
    envs.exec_cli([target], ["python"])
    assert len(e.entered) == 1 and mine.id in e.entered[0] and theirs.id not in e.entered[0]
    e = engine_of(theirs)
    with pytest.raises(UserError) as err:
        envs.exec_cli([target], ["python"])
    assert "your envman did not start it" in err.value.what and "\n" not in err.value.line()
    assert len(e.entered) == 1  # the first exec only


def test_exec_of_a_project_with_two_of_my_environments_says_so_whatever_a_look_alike_claims(engine_of):
    """The error is about my containers when the target names some of them (two running
    environments of the project: name one), never a neighbour's look-alike beside them; the
    look-alike is what the error names only when nothing of mine answers to the target."""
    from envman.run import envs

    one, two, theirs = run_container("a", "one"), run_container("b", "two"), run_container("c", "one")
    e = engine_of(one, two, theirs)
    record_started(one)
    record_started(two)
    with pytest.raises(UserError) as err:
        envs.exec_cli(["myproj"], ["python"])
    assert "2 running environments" in err.value.what and "did not start" not in err.value.what
    assert not e.entered


def test_stop_and_ps_act_only_on_my_recorded_containers(engine_of, capsys):
    """``envman stop`` refuses a look-alike and stops only mine; ``envman ps`` lists only mine
    (``--all-users`` lists what the labels say, every user's)."""
    import json

    from envman.cli import envs as cli

    mine, theirs = run_container("a", "dev"), run_container("b", "other")
    e = engine_of(mine, theirs)
    record_started(mine)
    cli.stop("dev", 10)
    assert e.stopped == [mine.id]
    with pytest.raises(UserError, match="did not start it"):
        cli.stop("other", 10)
    assert e.stopped == [mine.id]
    capsys.readouterr()
    cli.ps(all_users=False, as_json=True)
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [mine.id[:12]]
    cli.ps(all_users=True, as_json=True)
    assert {r["id"] for r in json.loads(capsys.readouterr().out)} == {mine.id[:12], theirs.id[:12]}
