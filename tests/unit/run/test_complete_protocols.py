"""Tests of ``envman/run/complete.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.cli import run_envman


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
