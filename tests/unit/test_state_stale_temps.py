"""A write killed between creating its temporary file and renaming it (kill -9) leaves
``.<name>.*.tmp`` beside the file; the next write of that file removes it: only a regular file of
this user, untouched long enough to be no write in progress (envman.state.sweep_stale_temps)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from envman.state import STALE_TEMP_SECONDS, atomic_write, sweep_stale_temps


def _age(p, seconds):
    t = time.time() - seconds
    os.utime(p, (t, t), follow_symlinks=False)


def test_a_write_killed_before_its_rename_leaves_a_temp_file_the_next_write_removes(tmp_path):
    target = tmp_path / "config" / "trust.json"
    code = ("import os, sys\nfrom pathlib import Path\nfrom envman import state\n"
            "real = os.replace\n"
            "def stop(src, dst):\n    print('written', flush=True); os.kill(os.getpid(), 9)\n"
            "state.os.replace = stop\nstate.atomic_write(Path(sys.argv[1]), '{\"x\": 1}')\n")
    p = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL and "written" in p.stdout
    (left,) = list(target.parent.glob(".trust.json.*.tmp"))
    _age(left, STALE_TEMP_SECONDS + 1)
    atomic_write(target, "{}")
    assert not left.exists() and target.read_text() == "{}"
    assert list(target.parent.iterdir()) == [target]


@pytest.mark.parametrize("age,ours,kind,removed", [
    (STALE_TEMP_SECONDS + 1, True, "file", True),
    (STALE_TEMP_SECONDS - 30, True, "file", False),  # a write in progress
    (STALE_TEMP_SECONDS + 1, False, "file", False),  # another user's
    (STALE_TEMP_SECONDS + 1, True, "symlink", False),
    (STALE_TEMP_SECONDS + 1, True, "dir", False),
])
def test_only_this_user_s_old_regular_temp_files_of_that_file_are_removed(tmp_path, age, ours, kind, removed):
    target = tmp_path / "projects.json"
    left = tmp_path / ".projects.json.abc123.tmp"
    victim = tmp_path / "victim"
    victim.write_text("keep")
    if kind == "file":
        left.write_text("half")
    elif kind == "symlink":
        left.symlink_to(victim)
    else:
        left.mkdir()
    if not ours:
        if os.getuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(left, 4242, 4242)
    _age(left, age)
    other = tmp_path / ".trust.json.abc123.tmp"  # another file's temp: not this write's to judge
    other.write_text("x")
    _age(other, STALE_TEMP_SECONDS + 1)
    assert sweep_stale_temps(target) == ([left] if removed else [])
    assert left.exists() != removed and other.exists() and victim.read_text() == "keep"


def test_a_write_makes_its_temp_file_private_and_never_opens_one_that_exists(tmp_path, monkeypatch):
    from envman import state

    target = tmp_path / "runs.json"
    taken = tmp_path / f".runs.json.{'00' * 8}.tmp"
    taken.symlink_to(tmp_path / "elsewhere")  # a name planted where the first random name falls
    draws = iter([b"\0" * 8, b"\1" * 8])
    monkeypatch.setattr(state.os, "urandom", lambda n: next(draws))
    fd, tmp = state._new_temp(target)
    os.close(fd)
    assert tmp == str(tmp_path / f".runs.json.{'01' * 8}.tmp")
    assert oct(os.stat(tmp).st_mode & 0o777) == "0o600"
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed


def test_a_write_leaves_only_its_file_with_the_mode_asked(tmp_path):
    target = tmp_path / "sub" / "file.json"
    atomic_write(target, b"{}", mode=0o644)
    assert target.read_bytes() == b"{}" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in target.parent.iterdir()] == ["file.json"]


def test_a_write_loads_neither_tempfile_nor_random():
    code = ("import sys\nfrom pathlib import Path\nfrom envman.state import atomic_write\n"
            "atomic_write(Path(sys.argv[1]), 'x')\nprint(sorted(m for m in ('tempfile', 'random') if m in sys.modules))")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", code, os.path.join(d, "f")], capture_output=True, text=True,
                             check=True).stdout
    assert out.strip() == "[]"
