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
