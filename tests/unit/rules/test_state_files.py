"""Security by rule: state files.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from envman.errors import UserError
from envman.safefile import read_state, read_state_json, state_problem

from tests.support.security_rules import HOSTILE, ROOT, STATE


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("entry", STATE, ids=[s[0] for s in STATE])
def test_every_state_file_is_believed_only_when_it_is_a_private_regular_file_of_yours(home, entry, kind, capfd):
    name, path_fn, good, reader = entry
    path = Path(path_fn())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(good))
    os.chmod(path, 0o600)
    assert reader(), f"{name}: a good file is believed"
    path.unlink()
    HOSTILE[kind](path)
    result: list = []
    t = threading.Thread(target=lambda: result.append(reader()), daemon=True)
    t.start()
    t.join(30)  # a FIFO must not hang the reader (the bound only keeps a regression from hanging the suite)
    assert not t.is_alive(), f"{name}: reading a {kind} hangs"
    assert not result[0], f"{name}: a {kind} state file is believed"
    if kind not in ("oversized",):
        assert "ignoring" in capfd.readouterr().err


def test_the_project_registry_refuses_a_file_others_can_write(home):
    from envman.project.registry import read_registry, registry_path

    path = registry_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": 1, "projects": {"p": {"root": "/x"}}}))
    os.chmod(path, 0o600)
    assert read_registry() == {"p": Path("/x")}
    os.chmod(path, 0o666)
    with pytest.raises(UserError, match="writable by its group or by others"):
        read_registry()


def test_a_cached_docker_run_line_in_a_writable_runs_json_is_never_executed(home, monkeypatch):
    """The run-plan cache holds a whole ``docker run`` line: one others could write is a miss."""
    from envman.run import fastpath as run_cache

    executed = []
    monkeypatch.setattr(run_cache, "exec_docker", lambda argv, env: executed.append(argv))
    monkeypatch.setattr(run_cache, "lookup", lambda key, environ=None: run_cache._load(run_cache.cache_file())["runs"].get(key))
    key = run_cache.cache_key([], ["."], [])
    path = Path(run_cache.cache_file())
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"argv": ["/bin/true", "run", "--privileged", "-v", "/:/host"], "home": str(home / "h"), "deps": [], "images": [], "sources": []}
    path.write_text(json.dumps({"format": run_cache.CACHE_FORMAT, "runs": {key: entry}}))
    for mode in (0o664, 0o646):
        os.chmod(path, mode)
        run_cache.try_cached_run([], ["."], [])
        assert executed == []
    os.chmod(path, 0o600)
    run_cache.try_cached_run([], ["."], [])
    assert executed and executed[0][0] == "/bin/true"  # the same file, believable, is used


_STATE_READS = re.compile(r"\.read_text\(|\.read_bytes\(|json\.load\(|(?<![.\w])open\(")


#: Files that read something other than envman's state with these calls (templates, the build
#: context, the engine's own config, job logs, files the user names), each checked by hand.
_NOT_STATE = {
    "envman/probe/pyz.py", "envman/engine/socket.py", "envman/engine/select.py", "envman/engine/context.py",
    "envman/engine/builder.py", "envman/render/dockerfile.py", "envman/render/rendercache.py", "envman/images/build.py",
    "envman/project/lock.py", "envman/cluster/slurm.py", "envman/safefile.py", "envman/state.py",
    "envman/matrix/write.py", "envman/images/base.py", "envman/render/base.py",
    # the lock's closure check runs inside a project image and reads the requirements and lock there
    "envman/project/lockcheck.py",
    # the wheel store's wheels: never state; each is hashed against its pin before it is served
    "envman/images/wheelstore.py", "envman/engine/wheelserver.py",
    # the driver's /proc files, a CDI spec the user names (read non-blocking, regular files only),
    # mount targets in a root file system; stdlib only, since scripts load it by path
    "envman/engine/cdi.py",
}


def test_no_module_reads_a_state_file_around_the_safe_reader():
    """By rule: outside the files listed above, nothing in envman opens a file with open(),
    read_text(), read_bytes() or json.load(): state goes through envman.safefile."""
    offenders = []
    for f in sorted((ROOT / "envman").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith("envman/probe/app/") or rel in _NOT_STATE:
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _STATE_READS.search(code) and "tarfile.open" not in code and "urlopen" not in code and "fdopen" not in code:
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert offenders == []


def test_state_problem_names_each_kind(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    os.chmod(f, 0o600)
    assert state_problem(os.lstat(f)) is None
    os.chmod(f, 0o620)
    assert "writable" in state_problem(os.lstat(f))
    os.mkfifo(tmp_path / "p")
    assert "FIFO" in state_problem(os.lstat(tmp_path / "p"))
    (tmp_path / "l").symlink_to(f)
    assert "symbolic link" in state_problem(os.lstat(tmp_path / "l"))
    assert read_state(tmp_path / "missing") is None and read_state_json(tmp_path / "missing") is None
