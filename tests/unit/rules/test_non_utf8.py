"""Bytes that are not UTF-8 (a value passed with -e, a project folder's name) are one line, exit 2,
or work: never an internal error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envman.errors import UserError
from envman.images.pins import project_key
from envman.run.prepare import parse_cli_env


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"ok\xc3", b"\xed\xa0\x80"])
def test_a_value_that_is_not_utf8_is_one_line(raw):
    value = raw.decode("utf-8", "surrogateescape")
    with pytest.raises(UserError, match="not UTF-8"):
        parse_cli_env([f"A={value}"])
    with pytest.raises(UserError, match="not UTF-8"):
        parse_cli_env(["B"], {"B": value})


def test_a_folder_name_that_is_not_utf8_has_a_pin_key():
    root = b"/tmp/\xffproj".decode("utf-8", "surrogateescape")
    assert len(project_key("p", root)) == 32 and project_key("p", root) != project_key("p", "/tmp/proj")


def test_the_cli_says_it_in_one_line(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), ENVMAN_CONFIG_DIR=str(tmp_path / "c"),
               ENVMAN_STATE_DIR=str(tmp_path / "s"), ENVMAN_RUN_CACHE="0")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\n')
    r = subprocess.run([sys.executable.encode(), b"-m", b"envman", b"run", str(tmp_path / "p").encode(), b"--dry-run",
                        b"-e", b"A=\xff", b"--", b"true"], env=env, capture_output=True)
    assert r.returncode == 2 and b"not UTF-8" in r.stderr and r.stderr.count(b"\n") == 1, r.stderr
