"""Every bad input is one clean line on stderr and exit 2: a table of hostile command lines
(``hostile_cases.py``) run through the real console entry point, :func:`envman.main.main`.

Nothing here needs an engine: ``DOCKER_HOST`` points at a socket that does not exist and the
``docker`` on ``PATH`` fails, so no case can reach a real engine or run a container.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from envman.main import main

from .hostile_cases import CASES

DATA = Path(__file__).resolve().parents[2] / "data"
MINI = [a for f in sorted(DATA.glob("mini*.toml")) for a in ("--matrix", str(f))]


def _project(root: Path, text: str | bytes, **extra: str | bytes) -> str:
    root.mkdir(parents=True, exist_ok=True)
    f = root / "envman.toml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    for name, content in extra.items():
        (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(root)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    t = tmp_path_factory.mktemp("hostile")
    files: dict[str, str] = {"tmp": str(t)}
    (t / "bin.toml").write_bytes(bytes(range(256)) * 4)
    files["bin"] = str(t / "bin.toml")
    (t / "utf16.toml").write_bytes('schema = 1\nkind = "os"\n'.encode("utf-16"))
    files["utf16"] = str(t / "utf16.toml")
    (t / "adir.toml").mkdir()
    files["dir"] = str(t / "adir.toml")
    os.mkfifo(t / "fifo.toml")
    files["fifo"] = str(t / "fifo.toml")
    (t / "unreadable.toml").write_text("schema = 1\n")
    (t / "unreadable.toml").chmod(0)
    files["unreadable"] = str(t / "unreadable.toml")
    files["dev"] = "/dev/zero"
    files["missing"] = str(t / "missing.toml")
    (t / "bad.toml").write_text("schema = = 1\n")
    files["toml_bad"] = str(t / "bad.toml")
    (t / "deep.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    files["deep"] = str(t / "deep.toml")
    (t / "results.json").write_text("[]")
    files["results"] = str(t / "results.json")
    p = t / "projects"
    ok = 'stack = "torch-2.4-cuda12.4"\n'
    files["proj_ok"] = _project(p / "ok", ok)
    files["proj_utf16"] = _project(p / "utf16", ok.encode("utf-16"))
    files["proj_bin"] = _project(p / "bin", b"\x00\x01\x02stack")
    (p / "dir" / "envman.toml").mkdir(parents=True)
    files["proj_dir"] = str(p / "dir")
    (p / "fifo").mkdir()
    os.mkfifo(p / "fifo" / "envman.toml")
    files["proj_fifo"] = str(p / "fifo")
    files["proj_unreadable"] = _project(p / "unreadable", ok)
    (p / "unreadable" / "envman.toml").chmod(0)
    (p / "reqfifo").mkdir()
    os.mkfifo(p / "reqfifo" / "req.txt")
    files["proj_req_fifo"] = _project(p / "reqfifo", ok + 'requirements = "req.txt"\n')
    files["proj_req_dev"] = _project(p / "reqdev", ok + 'requirements = "/dev/zero"\n')
    files["proj_req_abs"] = _project(p / "reqabs", ok + 'requirements = "/etc/passwd"\n')
    files["proj_req_up"] = _project(p / "requp", ok + 'requirements = "../../../../etc/passwd"\n')
    (p / "reqlink").mkdir()
    (p / "reqlink" / "req.txt").symlink_to("/etc/passwd")
    files["proj_req_link"] = _project(p / "reqlink", ok + 'requirements = "req.txt"\n')
    files["proj_sock_mount"] = _project(p / "sock", ok + 'mounts = ["/var/run/docker.sock:/var/run/docker.sock"]\n')
    files["proj_home_mount"] = _project(p / "home", ok + 'mounts = ["~:/h"]\ncommand = ["sh", "-c", "echo x >> /h/.bashrc"]\n')
    files["proj_ssh_mount"] = _project(p / "ssh", ok + 'mounts = ["~/.ssh/:/s:ro"]\n')
    files["proj_rel_escape"] = _project(p / "rel", ok + 'mounts = ["../../..:/x"]\n')
    files["proj_env_nl"] = _project(p / "envnl", ok + '[environment]\nA = "x\\ny"\n')
    files["proj_huge_shm"] = _project(p / "shm", ok + 'shm_size = "99999999t"\n')
    files["proj_tilde_user"] = _project(p / "tilde", ok + 'mounts = ["~root/x:/x"]\n')
    files["proj_deep"] = _project(p / "deep", "a = " + "[" * 5000 + "]" * 5000 + "\n")
    (p / "etclink").mkdir()
    (p / "etclink" / "data").symlink_to("/etc")
    files["proj_etc_link"] = _project(p / "etclink", ok + 'mounts = ["data:/data"]\n')
    return files


@pytest.fixture
def env(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    monkeypatch.delenv("ENVMAN_DEBUG", raising=False)
    monkeypatch.delenv("ENVMAN_HOSTILE_UNSET", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\necho 'fake docker: no engine here' >&2\nexit 1\n")
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return sandbox


def _expand(words: list[str], files: dict[str, str]) -> list[str]:
    out = []
    for w in words:
        for k, v in files.items():
            w = w.replace("{" + k + "}", v)
        out.append(w)
    return out


def _argv(words: list[str], files: dict[str, str]) -> list[str]:
    """The case's words with the sandbox's paths, on the small matrix where a command reads one."""
    argv = _expand(words, files)
    if argv[0] in ("matrix", "render", "build", "ci", "run", "doctor", "project"):
        return MINI + argv
    return argv


def _test_id(name: str) -> str:
    """A case's name as a test id of plain characters: tools that hand ids back to pytest (mutmut)
    cannot pass quotes and backslashes through; each other character becomes ``xNN``."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.,=+") else f"x{ord(c):02x}" for c in name)


def _main(argv: list[str]) -> int | str | None:
    """The console script's exit code for ``argv``, run in this process."""
    try:
        main(argv)
    except SystemExit as e:
        return e.code
    return 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, words", CASES, ids=[_test_id(c[0]) for c in CASES])
def test_hostile_command_line_is_one_clean_line_and_exit_2(env, capfd, tmp_path, name, words):
    if os.geteuid() == 0 and any("unreadable" in w for w in words):
        pytest.skip("root reads files without read permission")
    argv = _argv(words, env)
    before = set(os.listdir(tmp_path / "cwd"))
    code = _main(argv)
    out, err = capfd.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, (code, err[-2000:], out[-500:])
    assert len(lines) == 1, err
    assert lines[0].startswith("envman: error: ") or lines[0].startswith("envman run:"), lines
    # nothing half-written where the command ran
    assert set(os.listdir(tmp_path / "cwd")) == before
    assert not os.path.exists("/tmp/envman-hostile-x")


def test_corpus_is_large():
    assert len(CASES) >= 300


def _one_per_command() -> list[tuple[str, list[str]]]:
    """The first case of each command that an exec'd argv can carry (no NUL byte) and that holds
    for root too (no unreadable file)."""
    seen: dict[str, tuple[str, list[str]]] = {}
    for name, words in CASES:
        command = words[2] if words[0] == "--matrix" else words[0]
        if command not in seen and not any("\0" in w or "unreadable" in w for w in words):
            seen[command] = (name, words)
    return list(seen.values())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, words", _one_per_command(), ids=[_test_id(c[0]) for c in _one_per_command()])
def test_the_real_console_script_answers_like_main(env, capfd, tmp_path, name, words):
    """``python -m envman`` in a new interpreter says the same line, with the same exit code, as the
    in-process :func:`main` of the test above."""
    argv = _argv(words, env)
    p = subprocess.run([sys.executable, "-m", "envman", *argv], capture_output=True, text=True, timeout=100)
    code = _main(argv)
    _, err = capfd.readouterr()
    assert (p.returncode, p.stderr) == (code, err) and code == 2, (p.returncode, p.stderr, code, err)
    assert len(p.stderr.splitlines()) == 1 and p.stdout == ""


def test_one_real_console_script_case_per_command():
    assert {w[2] if w[0] == "--matrix" else w[0] for _, w in _one_per_command()} >= {
        "matrix", "render", "build", "ci", "report", "doctor", "project", "run"}
