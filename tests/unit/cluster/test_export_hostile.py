"""Hostile project variables against the exports and Slurm scripts: a project's variable reaches
its container and nothing else. No name the project chose is ever set in a shell of the user's
(the file sourced before ``docker compose up``) or in the batch shell that starts a pyxis job,
where the shell, the loader, docker, compose or Slurm would obey it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from envman.cluster import export as X
from envman.cluster.export import ExportInput
from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve

#: Names a shell, the dynamic loader, docker, compose or envman read from the environment of the
#: shell the user sources the compose file into (each would run code on the host or move the run).
HOST_READ_NAMES = ("PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PROMPT_COMMAND", "BASH_ENV", "ENV",
                   "IFS", "PS1", "PS4", "SHELLOPTS", "BASHOPTS", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT",
                   "DOCKER_CONFIG", "COMPOSE_FILE", "COMPOSE_PROJECT_NAME", "ENVMAN_CONFIG_DIR", "ENVMAN_STATE_DIR",
                   "PYTHONPATH", "PYTHONSTARTUP", "GCONV_PATH", "TMPDIR")

_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)
_VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\n\r"), max_size=40)


def _input(environment) -> ExportInput:
    return ExportInput(project="p", root=Path("/srv/p"), stack=resolve(load_matrix(), "torch-2.4-cpu"),
                       image="envman/p:latest", command=(), environment=tuple(environment), mounts=(), ports=(),
                       gpus=None, shm_size="512m")


def _sourced(text: str, tmp: Path) -> dict[str, str]:
    """The environment a POSIX shell has after ``set -a; . FILE; set +a``, from a fixed one."""
    f = tmp / "env.sh"
    f.write_text(text)
    base = {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "LANG": "C.UTF-8"}
    out = subprocess.run(["/bin/sh", "-c", 'set -a; . "$0"; set +a; exec env -0', str(f)], env=base,
                         capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    return dict(item.split("=", 1) for item in out.split("\0") if item)


@pytest.mark.parametrize("name", HOST_READ_NAMES)
def test_the_compose_env_file_never_sets_a_name_the_project_chose(name, tmp_path):
    env = _sourced(X.shell_env_file_text([(name, "/tmp/evil")]), tmp_path)
    assert env.get(name) != "/tmp/evil"
    assert env[X.compose_env_name(name)] == "/tmp/evil"
    svc = X.compose_service(_input([(name, "/tmp/evil")]), uid=1000, gid=1000, home="/h")
    if name != "HOME":  # envman's own HOME of the container wins, as in envman run
        assert yaml.safe_load(X.to_yaml(svc))["environment"][name] == "${" + X.compose_env_name(name) + "}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_NAMES, _VALUES, min_size=1, max_size=6))
def test_sourcing_the_compose_env_file_sets_only_envmans_names_with_the_exact_values(tmp_path, variables):
    env = _sourced(X.shell_env_file_text(sorted(variables.items())), tmp_path)
    base = {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "LANG": "C.UTF-8"}
    changed = {k for k, v in env.items() if base.get(k) != v} - {"PWD", "SHLVL", "_", "OLDPWD"}
    assert changed == {X.compose_env_name(k) for k in variables}
    assert all(env[X.compose_env_name(k)] == v for k, v in variables.items())


def test_the_compose_service_substitutes_every_variable_from_its_envman_name():
    variables = [("DB_PASS", "pw$x"), ("OPENAI_KEY", "sk-1")]
    doc = yaml.safe_load(X.to_yaml(X.compose({"p": X.compose_service(_input(variables), uid=1, gid=1, home="/h")})))
    env = doc["services"]["p"]["environment"]
    assert env["DB_PASS"] == "${ENVMAN_ENV_DB_PASS}" and env["OPENAI_KEY"] == "${ENVMAN_ENV_OPENAI_KEY}"
    assert "pw" not in str(doc) and "sk-1" not in str(doc)


def test_compose_interpolates_the_envman_name_when_docker_compose_is_here(tmp_path):
    """With a real Compose (v2's ``docker compose`` or v1's ``docker-compose``), ``config`` shows
    each value from the sourced file, and the shell keeps its own PATH."""
    import shutil

    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        tool = "docker compose"
    elif shutil.which("docker-compose"):
        tool = "docker-compose"
    else:
        pytest.skip("no docker compose here")
    variables = [("PATH", "/evil"), ("DB_PASS", "p$w 'q'"), ("PROMPT_COMMAND", "touch /tmp/x")]
    (tmp_path / "compose.yaml").write_text(X.to_yaml(X.compose({"p": X.compose_service(_input(variables), uid=1, gid=1,
                                                                                           home="/h")})))
    (tmp_path / "env.sh").write_text(X.shell_env_file_text(variables))
    out = subprocess.run(["/bin/sh", "-c", f'set -a; . ./env.sh; set +a; echo "$PATH"; exec {tool} -f compose.yaml config'],
                         cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PATH": os.environ["PATH"]})
    assert out.returncode == 0, out.stderr[-500:]
    shell_path, _, config = out.stdout.partition("\n")
    assert shell_path == os.environ["PATH"]
    env = yaml.safe_load(config)["services"]["p"]["environment"]
    assert env["PATH"] == "/evil" and env["PROMPT_COMMAND"] == "touch /tmp/x"
    assert env["DB_PASS"].replace("$$", "$") == "p$w 'q'"  # config prints a literal $ as compose reads it, $$


# --------------------------------------------------------------------------- nothing half-written

EXPORTS = {
    "k8s": ["export", "k8s", "{proj}", "--image", "r.example/x@sha256:" + "a" * 64, "-o", "{out}/job.yaml"],
    "compose": ["export", "compose", "{proj}", "-o", "{out}/compose.yaml"],
    "devcontainer": ["export", "devcontainer", "{proj}", "-o", "{out}/dc"],
}


@pytest.mark.parametrize("exporter", sorted(EXPORTS))
def test_an_export_whose_env_file_cannot_be_written_writes_nothing(exporter, tmp_path, monkeypatch, capsys):
    """The variables' file (in the state directory) is written before the exported file: a Job or
    service left behind would name a Secret or a file that was never made."""
    from envman.main import main

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cuda12.4"\ngpus = "none"\n'
                                      '[environment]\nDB_PASS = "pw-9f3e"\n')
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    with pytest.raises(SystemExit):
        main(["project", "trust", str(proj)])
    (tmp_path / "blocked").write_text("a file where the state directory would be\n")
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "blocked"))
    out = tmp_path / "out"
    words = [w.replace("{proj}", str(proj)).replace("{out}", str(out)) for w in EXPORTS[exporter]]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(words)
    err = capsys.readouterr().err
    errors = [ln for ln in err.strip().splitlines() if not ln.startswith("warning: ")]  # no engine: a warning first
    assert e.value.code == 2 and len(errors) == 1 and "internal error" not in err, err
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))


def test_no_variable_envman_reads_starts_with_the_compose_prefix():
    """The names the compose env file sets are envman's own and read by nothing: no variable envman
    reads (``ENVMAN_*`` in its code) starts with ``ENVMAN_ENV_``."""
    import re

    package = Path(X.__file__).resolve().parents[1]
    writers = {Path(X.__file__).resolve(), package / "cli" / "export.py"}  # they write the prefix
    read = {n for f in package.rglob("*.py") if f.resolve() not in writers
            for n in re.findall(r"\bENVMAN_[A-Z0-9_]+", f.read_text())}
    assert read and not [n for n in read if n.startswith(X.COMPOSE_ENV_PREFIX)]


# --------------------------------------------------------------------------- what an export writes over

def _fifo(p):
    os.mkfifo(p)


def _socket(p):
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


def _device(p):
    if os.getuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(p, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))  # what /dev/null is


@pytest.mark.parametrize("make", [_fifo, _socket, _device], ids=["fifo", "socket", "device"])
def test_an_export_never_writes_over_what_is_not_a_regular_file_even_with_force(make, tmp_path):
    import stat

    target = tmp_path / "out.yaml"
    make(target)
    before = os.lstat(target)
    with pytest.raises(X.UserError) as e:
        X.write_files({target: "x: 1\n"}, force=True)
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"cannot write {target}: it is not a regular file", "envman export", "choose another -o (or - to print it)")
    after = os.lstat(target)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino


@pytest.mark.parametrize("kind", ["file", "symlink", "dangling symlink"])
def test_force_replaces_a_regular_file_or_a_link_itself_never_what_a_link_points_to(kind, tmp_path):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    target = tmp_path / "out.yaml"
    if kind == "file":
        target.write_text("old\n")
    elif kind == "symlink":
        target.symlink_to(elsewhere)
    else:
        target.symlink_to(tmp_path / "nowhere")
    X.write_files({target: "x: 1\n"}, force=True)
    assert target.read_text() == "x: 1\n" and not target.is_symlink() and elsewhere.read_text() == "keep\n"
