"""The one error boundary (envman/boundary.py): every failure is one line on stderr with its exit
code (2 for bad input, 1 for a full disk or a broken engine connection, 130 for ^C, 70 for a bug),
and ``envman [--matrix F]... COMMAND`` is split without the full CLI."""

from __future__ import annotations

import errno

import pytest

from envman.boundary import guarded, run_argv
from envman.errors import UserError


@pytest.mark.parametrize("argv, expected", [
    (["run", "x"], ([], ["x"])),
    (["--matrix", "a.toml", "-m", "b.toml", "run"], (["a.toml", "b.toml"], [])),
    (["--matrix=a.toml", "run", "--", "ls"], (["a.toml"], ["--", "ls"])),
    (["build", "x"], None),
    (["--matrix"], None),  # an option without its value is the full CLI's to refuse
    (["-v", "run"], None),  # any other option before the command too
    ([], None),
])
def test_run_argv_takes_only_matrix_options_before_the_command(argv, expected):
    assert run_argv(argv) == expected
    assert run_argv(["-m", "f", "exec", "p"], command="exec") == (["f"], ["p"])


def _run(capsys, exc: BaseException) -> tuple[int, list[str]]:
    def fail() -> None:
        raise exc

    code = guarded(fail)
    return code, capsys.readouterr().err.splitlines()


def test_a_success_is_0_and_its_own_code_passes_through(capsys):
    assert guarded(lambda: None) == 0 and guarded(lambda: 3) == 3
    assert capsys.readouterr().err == ""


def test_a_user_error_is_one_line_without_a_doubled_prefix(capsys):
    code, lines = _run(capsys, UserError("envman: envman: bad value", fix="fix it"))
    assert (code, lines) == (2, ["envman: error: bad value — fix it"])
    code, lines = _run(capsys, UserError("bad value", where="f.toml", fix="fix it"))
    assert (code, lines) == (2, ["envman: error: f.toml: bad value — fix it"])


@pytest.mark.parametrize("exc, code, says", [
    (KeyboardInterrupt(), 130, "envman: interrupted"),
    (RecursionError(), 2, "nested too deeply"),
    (OSError(errno.ENOSPC, "No space left on device", "/s/x"), 1, "/s/x: No space left on device — free some space"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "p.toml"), 2, "p.toml: No such file or directory"),
    (ValueError("embedded null byte"), 2, "NUL byte"),
    (ValueError("Exceeds the limit (4300 digits) for integer string conversion"), 2, "thousands of digits"),
    (RuntimeError("boom\nsecond line"), 70, "internal error: RuntimeError: boom second line"),
    (OSError("no file named"), 70, "internal error: OSError"),  # no file: a bug, not the input
])
def test_each_failure_is_one_line_with_its_exit_code(capsys, monkeypatch, exc, code, says):
    monkeypatch.delenv("ENVMAN_DEBUG", raising=False)
    got, lines = _run(capsys, exc)
    assert got == code and len(lines) == 1 and says in lines[0], lines


def test_a_broken_engine_connection_is_exit_1_even_when_wrapped(capsys):
    class ConnectionError(Exception):  # as the HTTP stack under the engine client raises it
        pass

    ConnectionError.__module__ = "urllib3.exceptions"
    try:
        try:
            raise ConnectionError("Connection aborted")
        except ConnectionError as inner:
            raise KeyError("x") from inner
    except KeyError as outer:
        code, lines = _run(capsys, outer)
    assert code == 1 and len(lines) == 1 and "container engine connection broke" in lines[0]


def test_a_bug_is_raised_whole_when_debug_asks_for_it(monkeypatch):
    monkeypatch.setenv("ENVMAN_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        guarded(lambda: (_ for _ in ()).throw(RuntimeError("boom")))


def test_a_long_message_of_a_bug_is_clipped(capsys, monkeypatch):
    monkeypatch.delenv("ENVMAN_DEBUG", raising=False)
    code, lines = _run(capsys, RuntimeError("x" * 1000))
    assert code == 70 and len(lines) == 1 and lines[0].count("x") <= 301
