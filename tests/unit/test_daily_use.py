"""Daily-use pieces without a daemon: bare commands, the matching working directory, named
environments' argv and selection, the help's type column."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envman.run.envs import EnvContainer, SHELL_COMMAND, exec_argv, from_inspect, one, select
from envman.errors import UserError
from envman.run.plan import KEEP_ALIVE, RunPlan, container_workdir, docker_argv
from envman.run import grammar
from envman.run.command import check_container_name
from tests.support.cli import run_envman


def plan(**kw) -> RunPlan:
    base = dict(image="envman/s:latest", project="demo", stack="s", root="/p", home="/h", uid=1000, gid=1000)
    base.update(kw)
    return RunPlan(**base)


@pytest.mark.parametrize("words, options, command", [
    (["alpha", "python", "-V"], ["alpha"], ["python", "-V"]),
    (["--stack", "s", "alpha", "python", "-V"], ["--stack", "s", "alpha"], ["python", "-V"]),
    (["--stack=s", "alpha", "ls", "--stack"], ["--stack=s", "alpha"], ["ls", "--stack"]),
    (["-p8888", "alpha", "ls"], ["-p8888", "alpha"], ["ls"]),
    (["alpha", "--no-gpu", "-e", "A=1", "sh", "-c", "x"], ["alpha", "--no-gpu", "-e", "A=1"], ["sh", "-c", "x"]),
    (["alpha", "--gpus", "all"], ["alpha", "--gpus", "all"], []),
    (["--no-gpu"], ["--no-gpu"], []),
    (["-d", "--name", "bg", "alpha"], ["-d", "--name", "bg", "alpha"], []),
])
def test_bare_command_starts_at_the_second_positional(words, options, command):
    assert grammar.split(grammar.RUN, words) == (options, command)


def test_working_directory_matches_the_callers(tmp_path):
    root = tmp_path / "alpha"
    (root / "sub" / "deep").mkdir(parents=True)
    assert container_workdir(root, root / "sub" / "deep") == "/workspace/sub/deep"
    assert container_workdir(root, root) == "/workspace"
    assert container_workdir(root, tmp_path) == "/workspace"  # outside the project: its root
    (tmp_path / "link").symlink_to(root / "sub")
    assert container_workdir(root, tmp_path / "link") == "/workspace/sub"  # through a link, resolved
    (tmp_path / "alpha2").mkdir()
    assert container_workdir(root, tmp_path / "alpha2") == "/workspace"  # a prefix is not a parent


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


def _envman(*args, cwd=None, env=None):
    e = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    e.update(env or {})
    return run_envman(args, cwd=cwd, env=e)


@pytest.mark.parametrize("cmd", [["run"], ["exec"], ["shell"], ["build"], ["ps"], ["stop"], ["matrix", "ls"], ["doctor"]])
def test_help_has_no_type_placeholders_and_run_looks_like_the_rest(cmd):
    p = _envman(*cmd, "--help")
    assert p.returncode == 0, p.stderr
    assert "╭─ Options" in p.stdout and not re.search(r"<(bool|str|int|list\[|Path|path)", p.stdout), p.stdout


def test_help_after_the_command_belongs_to_the_command(tmp_path):
    # `envman run P CMD --help` is CMD's --help: envman goes on to the run (and fails here: no project)
    p = _envman("run", "nosuchproject", "python", "--help", cwd=tmp_path,
                env={"ENVMAN_CONFIG_DIR": str(tmp_path), "ENVMAN_STATE_DIR": str(tmp_path)})
    assert p.returncode == 2 and "Usage" not in p.stdout and "nosuchproject" in p.stderr, (p.stdout, p.stderr)


def test_two_commands_and_shell_arguments_are_one_line_errors(tmp_path):
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path), "ENVMAN_STATE_DIR": str(tmp_path)}
    p = _envman("run", "x", "true", "--", "false", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "once" in p.stderr
    p = _envman("shell", "x", "ls", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "takes no command" in p.stderr
    p = _envman("run", "--name", "no good", "x", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--name" in p.stderr


def test_notebook_layer_and_command():
    from envman.run.notebook import JUPYTERLAB, notebook_command, notebook_dockerfile, notebook_image_ref, notebook_url

    df = notebook_dockerfile("sha256:" + "a" * 64)
    assert df.splitlines()[1] == "FROM sha256:" + "a" * 64 and JUPYTERLAB in df and "# syntax" not in df
    a, b = notebook_image_ref("p", "sha256:" + "a" * 64), notebook_image_ref("p", "sha256:" + "b" * 64)
    assert a.startswith("envman/notebook-p:") and a != b  # a new base image: a new layer
    cmd = notebook_command(1000)
    assert "--ip=0.0.0.0" in cmd and "--no-browser" in cmd and "--allow-root" not in cmd
    assert not any("token" in w.lower() for w in cmd)  # the token travels as JUPYTER_TOKEN, by name
    assert "--allow-root" in notebook_command(0)
    assert notebook_url(9999, "ab") == "http://127.0.0.1:9999/lab?token=ab"


def test_notebook_token_is_passed_by_name_only():
    argv = docker_argv(plan(inherit_env=("JUPYTER_TOKEN",)))
    assert argv[argv.index("JUPYTER_TOKEN") - 1] == "--env" and not any(w.startswith("JUPYTER_TOKEN=") for w in argv)


def test_notebook_port_checks():
    import socket

    from envman.run.notebook import check_port, free_port

    with pytest.raises(UserError, match="outside"):
        check_port(80)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(UserError, match="in use"):
            check_port(s.getsockname()[1])
    p = free_port()
    assert check_port(p) == p


def test_markup_like_user_data_prints_as_is_in_every_read_command(tmp_path):
    """Square brackets in data (extras, paths, errors) are text, never rich markup."""
    root = tmp_path / "p[red]x[/red]" / "[bold]audit"
    root.mkdir(parents=True)
    (root / "envman.toml").write_text('stack = "tf-2.15-py3.11"\nname = "audit"\nrequirements = ["pkg[extra]==1"]\n')
    broken = tmp_path / "b[u]roken"
    broken.mkdir()
    (broken / "envman.toml").write_text('stack = "tf-2.15-py3.11"\nname = "broken"\n')
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path / "c"), "ENVMAN_STATE_DIR": str(tmp_path / "s"),
           "DOCKER_HOST": "unix:///nonexistent.sock", "COLUMNS": "400"}
    for d in (root, broken):
        assert _envman("project", "add", str(d), env=env).returncode == 0
    (broken / "envman.toml").write_text('stack = "[bold]nope["\n')  # now it fails to load, its error names the path

    show = _envman("matrix", "show", "tf-2.15-py3.11", env=env)
    assert show.returncode == 0 and "tensorflow[and-cuda]==2.15.0.post1" in show.stdout, show.stdout
    ls = _envman("matrix", "ls", "--framework", "tensorflow", env=env)
    assert ls.returncode == 0 and "\\[" not in ls.stdout
    pls = _envman("project", "ls", env=env)
    assert str(root) in pls.stdout and "b[u]roken" in pls.stdout, pls.stdout
    pshow = _envman("project", "show", "audit", env=env)
    assert str(root) in pshow.stdout, pshow.stdout
    top = _envman("ls", env=env)
    assert "audit" in top.stdout and "invalid" in top.stdout, top.stdout
    doc = _envman("doctor", env=env)
    assert "b[u]roken" in doc.stdout, doc.stdout
    for p in (show, ls, pls, pshow, top, doc):
        assert "\\[" not in p.stdout  # nothing escaped twice either


def test_ls_says_why_a_stack_from_a_user_matrix_file_is_unknown(tmp_path):
    data = Path(__file__).resolve().parents[1] / "data" / "standin-torch.toml"
    m = tmp_path / "my[matrix].toml"
    m.write_text(data.read_text().replace("2.13.0", "0.0.9"))
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('stack = "torch-0.0.9-cpu"\nname = "orig"\n')
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path / "c"), "ENVMAN_STATE_DIR": str(tmp_path / "s"),
           "DOCKER_HOST": "unix:///nonexistent.sock", "COLUMNS": "300"}
    assert _envman("project", "add", str(proj), env=env).returncode == 0
    with_file = _envman("ls", env={**env, "ENVMAN_MATRIX": str(m)})
    assert "torch-0.0.9-cpu-py3.11" in with_file.stdout and "error" not in with_file.stdout, with_file.stdout
    without = _envman("ls", env=env)
    assert "invalid" in without.stdout
    why = [ln for ln in without.stdout.splitlines() if ln.startswith("error: orig:")]
    assert len(why) == 1 and "unknown to the loaded matrix" in why[0] and str(m) in why[0], without.stdout
    js = _envman("ls", "--json", env=env)
    (row,) = __import__("json").loads(js.stdout)
    assert str(m) in row["problems"][0]["message"]
    # loaded again (through --matrix): no hint, it resolves
    again = _envman("--matrix", str(m), "ls", env=env)
    assert "invalid" not in again.stdout and "error" not in again.stdout


def test_origins_record_only_user_files(tmp_path, monkeypatch):
    from envman.stack import origins

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    origins.record("x-1", "x-1.0-cpu", [])
    assert not (tmp_path / origins.ORIGINS_FILE).exists()  # shipped files only: nothing to say later
    origins.record("x-1", "x-1.0-cpu", [str(tmp_path / "a.toml")])
    assert origins.missing_files_hint("x-1", [str(tmp_path / "a.toml")]) is None  # still loaded
    hint = origins.missing_files_hint("x-1")
    assert hint and str(tmp_path / "a.toml") in hint and "x-1.0-cpu" in hint
    assert origins.missing_files_hint("other") is None
    (tmp_path / origins.ORIGINS_FILE).write_text("[not a dict")
    assert origins.missing_files_hint("x-1") is None  # a broken record is no hint, never an error


def test_clean_plan_names_only_envmans_entries(tmp_path, monkeypatch):
    from envman.run.clean import apply, plan

    state, config = tmp_path / "state", tmp_path / "config"
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(state))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(config))
    (state / "homes" / "p" / "ro").mkdir(parents=True)
    (state / "homes" / "p" / "ro" / "f").write_text("x")
    (state / "homes" / "p" / "ro").chmod(0o500)  # a read-only folder in a home still goes
    (state / "reports").mkdir()
    (state / "mine.txt").write_text("keep")
    config.mkdir()
    (config / "config.toml").write_text("")
    (config / "other").write_text("keep")
    p = plan()
    assert sorted(x.name for x in p.paths) == ["homes", "reports"] and not p.images
    p = plan(config=True)
    assert "config.toml" in {x.name for x in p.paths}
    apply(p)
    assert not (state / "homes").exists() and (state / "mine.txt").exists() and (config / "other").exists()
    assert plan(config=True).empty


def test_completion_callbacks(tmp_path, monkeypatch):
    from envman.cli import complete

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    got = complete.complete_stack("torch-2.4")
    assert "torch-2.4" in got and "torch-2.4-cuda12" in got and "torch-2.4.1-cuda12.4-py3.10" in got
    assert all(g.startswith("torch-2.4") for g in got)
    tf = complete.complete_stack("tf-2.15")
    assert "tf-2.15" in tf and all(t.startswith("tf-2.15") for t in tf)  # the alias as typed
    assert complete.complete_stack("ten") == ["tensorflow-"] and "torch-" in complete.complete_stack("")
    assert (tmp_path / "s" / "cache" / "completion.json").exists()  # the next Tab reads the cache
    gpus = complete.complete_gpu("rtx30")
    assert "rtx3090" in [g.lower().replace(" ", "") for g in gpus]
    assert complete.complete_flavour("cudnn") == ["cudnn-runtime", "cudnn-devel"]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "envman.toml").write_text('stack = "torch-2.4-cuda12"\nname = "alpha"\n')
    from envman.project.file import load_project
    from envman.project.registry import register

    register(load_project(tmp_path / "p"))
    assert complete.complete_project("al") == ["alpha"] and complete.complete_project("zz") == []


def test_completion_through_bash_zsh_and_fish_protocols(tmp_path):
    import shutil

    env = {"ENVMAN_STATE_DIR": str(tmp_path / "s"), "ENVMAN_CONFIG_DIR": str(tmp_path / "c")}
    e = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    e.update(env)
    # typer picks the shell --show-completion prints for from the parent processes (no shell above
    # pytest: "Shell  not supported."); its switch makes the shell the option's value instead.
    script = run_envman(["--show-completion", "bash"], env={**e, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}).stdout
    assert "complete" in script and "_ENVMAN_COMPLETE=complete_bash" in script
    if shutil.which("bash"):  # the generated script in a real bash, calling envman as installed here
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "envman").write_text(f"#!/bin/sh\nexec {sys.executable} -m envman \"$@\"\n")
        (tmp_path / "bin" / "envman").chmod(0o755)
        (tmp_path / "c.sh").write_text(script)
        p = subprocess.run(["bash", "-c", f'source {tmp_path / "c.sh"}; COMP_WORDS=(envman matrix show torch-2.4-cu); '
                            'COMP_CWORD=3; _envman_completion envman; printf "%s\\n" "${COMPREPLY[@]}"'],
                           capture_output=True, text=True, env={**e, "PATH": f"{tmp_path / 'bin'}:{e['PATH']}"})
        got = p.stdout.split()
        assert "torch-2.4-cuda12" in got and all(g.startswith("torch-2.4-cu") for g in got), (p.stdout, p.stderr)
    for shell, words in (("zsh", "envman doctor --gpu a10"), ("fish", "envman render --flavour cudnn-")):
        p = run_envman([], env={**e, "_ENVMAN_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_ARGS": words,
                                "_TYPER_COMPLETE_FISH_ACTION": "get-args"})
        assert p.returncode == 0 and ("a100" in p.stdout or "cudnn-devel" in p.stdout), (shell, p.stdout, p.stderr)


def test_explain_names_a_compatible_build_and_reads_the_host_driver(tmp_path):
    import json
    import shutil

    env = {"ENVMAN_STATE_DIR": str(tmp_path / "s"), "ENVMAN_CONFIG_DIR": str(tmp_path / "c")}
    p = _envman("matrix", "explain", "torch-2.4-cuda12", "--gpu", "RTX 5090", "--driver", "570.86", "--json", env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["verdict"] == "arch_unsupported"
    alt = doc["alternative"]
    assert alt and alt.startswith("torch-")
    ok = _envman("matrix", "explain", alt, "--gpu", "RTX 5090", "--driver", "570.86", "--json", env=env)
    assert ok.returncode == 0, ok.stdout  # the named build does run there
    text = _envman("matrix", "explain", "torch-2.4-cuda12", "--gpu", "RTX 5090", "--driver", "570.86", env=env)
    assert f"compatible: {alt}" in text.stdout
    fine = json.loads(_envman("matrix", "explain", "torch-2.4-cuda12", "--sm", "8.6", "--driver", "570.86", "--json",
                              env=env).stdout)
    assert fine["alternative"] is None
    host = _envman("matrix", "explain", "torch-2.4-cuda12", "--sm", "8.6", env=env)
    if shutil.which("nvidia-smi") is None:  # no driver to read here: one line that says to give one
        assert host.returncode == 2 and host.stderr.count("\n") == 1 and "--driver" in host.stderr
    else:
        assert host.returncode in (0, 1) and "on driver" in host.stdout


def test_images_lists_own_tags_and_project_names():
    from envman.images.build import ImageRow
    from envman.cli.build import own_tags

    r = own_tags(ImageRow("torch-2.4.1-cuda12.4-py3.10", ("envman/torch-2.4.1-cuda12.4-py3.10:latest", "me/x:latest"),
                          "sha256:1", 1, 0, True, "pass"))
    assert r.tags == ("envman/torch-2.4.1-cuda12.4-py3.10:latest",) and r.stable
    foreign = own_tags(ImageRow("s", ("envman/s:abc", "someone/s:latest"), "sha256:2", 1, 0, True, "pass"))
    assert foreign.tags == ("envman/s:abc",) and not foreign.stable  # a foreign :latest is not the stable tag
    proj = own_tags(ImageRow("s", ("envman/project-alpha:0123",), "sha256:3", 1, 0, False, "untested", project="alpha"))
    assert proj.project == "alpha" and proj.tags == ("envman/project-alpha:0123",)


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


def test_a_project_build_shows_its_steps_but_not_one_line_per_label(capsys):
    """The classic builder turns each label into a LABEL step: a project build printed 22 steps,
    16 of them labels. Steps are shown; label steps are not."""
    from envman.engine.api import BuildEvent
    from envman.run.command import print_step

    steps = ["Step 1/22 : FROM sha256:abc", "Step 2/22 : USER root", "Step 3/22 : RUN pip install -r x",
             *[f"Step {i}/22 : LABEL envman.k{i}=v" for i in range(4, 20)], "Step 20/22 : label x=y",
             "Step 5/7 : RUN echo LABEL", "Step 2/5 : LABEL a=b c=d"]
    for s in steps:
        print_step(BuildEvent("step", s, step=s.split()[1]))
    shown = capsys.readouterr().err.splitlines()
    assert shown == [f"  {s}" for s in steps if " : LABEL " not in s.upper()]
    assert len(shown) == 4


_ONE_ANSWER_SERVER = """
import socket, sys, time
time.sleep(float(sys.argv[2]))  # the server takes a while to come up
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept(); c.recv(100); c.sendall(b"HTTP/1.0 403 Forbidden\\r\\n\\r\\n"); c.close()
sys.exit(int(sys.argv[3]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_notebook_prints_its_url_only_once_the_server_answers(tmp_path, code):
    """The URL was printed before Jupyter answered. Now the server runs in a child and the URL
    comes once it answers HTTP; the exit code is the server's."""
    from envman.run.notebook import free_port, serve_and_announce

    port = free_port()
    out = tmp_path / "out"
    pid = os.fork()
    if pid == 0:  # a child of the test, so that its stdout can be a file
        fd = os.open(out, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        sys.stdout = open(1, "w", closefd=False)
        start = lambda: os.execv(sys.executable, [sys.executable, "-c", _ONE_ANSWER_SERVER, str(port), "0.5", str(code)])
        got = serve_and_announce(start, port, lambda: f"URL {port}\n", timeout=60)
        os._exit(got)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == code
    assert out.read_text() == f"URL {port}\n"


def test_waiting_for_a_server_ends_when_it_exits_or_times_out():
    from envman.run.notebook import answers_http, free_port, wait_until_ready

    port = free_port()
    assert not answers_http(port)
    assert wait_until_ready(port, 60, alive=lambda: False) == "exited"
    assert wait_until_ready(port, 0, alive=lambda: True, pause=0) == "timeout"


def test_clean_knows_every_file_and_folder_envman_writes_for_a_user():
    """clean left Charliecloud's converted images and trust.json behind. Every name the code
    joins onto the state or config directory must be one clean removes."""
    from envman.run.clean import CONFIG_ENTRIES, STATE_ENTRIES

    root = Path(__file__).resolve().parents[2] / "envman"
    state, config = set(), set()
    for f in root.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        state |= set(re.findall(r'(?:state_dir\(\)|Path\(state_dir\)|spec\.state_dir\)?) / "([^"/]+)"', text))
        config |= set(re.findall(r'config_dir\(\) / "([^"/]+)"', text))
        for const in re.findall(r'^(?:ORIGINS_FILE|TRUST_FILE|REGISTRY_FILE)\s*=\s*"([^"]+)"', text, re.M):
            (config if const in ("trust.json", "projects.json") else state).add(const)
    assert state and config
    assert state <= set(STATE_ENTRIES), state - set(STATE_ENTRIES)
    assert config <= set(CONFIG_ENTRIES), config - set(CONFIG_ENTRIES)
    assert {"charliecloud", "matrix-origins.json"} <= state and "trust.json" in config


def test_prune_reports_what_the_engine_freed_and_names_the_build_cache(tmp_path, monkeypatch, capsys):
    """prune added up image sizes (shared layers counted once per image); it now reports the
    engine's image storage before minus after, and says who reclaims the build cache."""
    from envman.cli import build as CB
    import envman.project.image as PI
    from tests.unit.test_build_pipeline import image_store

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    store = image_store()
    for i in range(3):  # three images of 1000 bytes each in the fake's listing...
        store.add(f"envman/torch-0.0.{i}-cpu-py3.11:old{i}", f"sha256:{i}" * 2, **{"envman.name": f"torch-0.0.{i}-cpu-py3.11"})
    sizes = iter([(10_000_000, 3_200_000_000), (8_500_000, 3_200_000_000)])  # ...that free 1.5 MB together
    monkeypatch.setattr(store, "storage", lambda: next(sizes), raising=False)

    from tests.support.fake_engine import patch_connect

    patch_connect(monkeypatch, store)
    monkeypatch.setattr(PI, "project_images_in_use", lambda engine, resolve: (set(), set()))
    CB.prune(dry_run=False, all_users=False, as_json=False)
    out = capsys.readouterr().out
    assert "3 images removed, 2 MB freed (the engine's image storage before and after)" in " ".join(out.split())
    assert "build cache holds 3200 MB" in out and "docker builder prune" in " ".join(out.split())


_SERVER_UNTIL_INTERRUPTED = """
import os, signal, socket, sys, time
signal.signal(signal.SIGINT, lambda *a: os._exit(42))
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept(); c.recv(100); c.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\n"); c.close()
time.sleep(120)
"""


def test_ctrl_c_sent_to_envman_notebook_reaches_the_server():
    """The server runs in a child: an INT sent to envman (Ctrl-C, or a supervisor) is forwarded to
    it, and envman ends with the server's code."""
    import signal
    import time

    from envman.run.notebook import free_port, serve_and_announce

    port = free_port()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        sys.stdout = open(1, "w", closefd=False)
        start = lambda: os.execv(sys.executable, [sys.executable, "-c", _SERVER_UNTIL_INTERRUPTED, str(port)])
        os._exit(serve_and_announce(start, port, lambda: "ready\n", timeout=60))
    os.close(w)
    with os.fdopen(r) as out:
        assert out.readline() == "ready\n"  # the server answered
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("envman notebook did not end after Ctrl-C")
    assert os.waitstatus_to_exitcode(done[1]) == 42


def test_clean_removes_an_image_after_those_built_on_it_and_keeps_one_others_build_on(tmp_path):
    """clean --images failed on a rebuilt base listed before its stacks ("image has dependent
    child images"): children go first, and a base another user's image still stands on is kept."""
    from envman.errors import EngineError
    from envman.run.clean import CleanPlan, apply

    children = {"sha256:base": {"sha256:stack"}, "sha256:shared": {"sha256:theirs"}}
    removed = []

    class Engine:
        def remove_image(self, ref, force=False):
            if children.get(ref, set()) - set(removed):
                raise EngineError(f"remove image {ref}: conflict: unable to delete (cannot be forced) - "
                                  "image has dependent child images")
            removed.append(ref)

    plan = CleanPlan(images=(("sha256:base", "envman/base:10.0", 1), ("sha256:stack", "envman/s:latest", 1),
                             ("sha256:shared", "envman/base:11.0", 1)))
    kept: list[str] = []
    assert apply(plan, Engine(), kept=kept) == []
    assert removed == ["sha256:stack", "sha256:base"]
    assert kept == ["envman/base:11.0: other images are built on it"]
