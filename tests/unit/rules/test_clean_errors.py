"""Security by rule: clean errors.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.project.file import load_project

from tests.support.cli import run_envman

from tests.support.security_rules import STACK, UNSAFE, cli_env


def _engine_errors():
    import http.client

    import requests
    import urllib3

    return [
        ("urllib3 ProtocolError", urllib3.exceptions.ProtocolError("Connection aborted.", http.client.RemoteDisconnected("x"))),
        ("requests ConnectionError", requests.exceptions.ConnectionError("Connection aborted.")),
        ("requests ChunkedEncodingError", requests.exceptions.ChunkedEncodingError("broken")),
        ("http.client RemoteDisconnected", http.client.RemoteDisconnected("Remote end closed connection")),
        ("wrapped", RuntimeError("build stream")),
    ]


@pytest.mark.parametrize("case", range(5))
def test_an_engine_dying_mid_command_is_one_engine_line_exit_1(case, capfd):
    import urllib3

    from envman.boundary import guarded

    name, exc = _engine_errors()[case]
    if name == "wrapped":  # raised while handling a broken connection
        def fn():
            try:
                raise urllib3.exceptions.ProtocolError("Connection aborted.")
            except urllib3.exceptions.ProtocolError:
                raise exc
    else:
        def fn():
            raise exc
    assert guarded(fn) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "container engine" in err and "internal error" not in err, err


@pytest.mark.parametrize("errno_,code", [(28, 1), (122, 1), (30, 1), (5, 1)])
@pytest.mark.parametrize("filename", [None, "/cfg/trust.json"])
def test_a_full_or_broken_disk_is_one_line(errno_, code, filename, capfd):
    from envman.boundary import guarded

    def fn():
        raise OSError(errno_, os.strerror(errno_), *([filename] if filename else []))

    assert guarded(fn) == code
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err and "try again" in err, err


@pytest.mark.parametrize("exc,code", [(RecursionError("maximum recursion depth exceeded"), 2),
                                      (ValueError("Exceeds the limit (4300 digits) for integer string conversion"), 2)])
def test_deep_nesting_and_huge_numbers_are_one_line_exit_2(exc, code, capfd):
    from envman.boundary import guarded

    def fn():
        raise exc

    assert guarded(fn) == code
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err


@pytest.mark.parametrize("file", ["envman.toml", "envman.lock"])
def test_a_deeply_nested_project_or_lock_file_is_one_line(home, tmp_path, file):
    from envman.project.lock import read_lock

    root = tmp_path / "p"
    root.mkdir()
    deep = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"
    (root / "envman.toml").write_text(deep if file == "envman.toml" else STACK)
    (root / "envman.lock").write_text(deep)
    with pytest.raises(UserError, match="nested too deeply|not valid TOML") as e:
        load_project(root) if file == "envman.toml" else read_lock(root)
    assert "\n" not in e.value.line()
    r = run_envman(["project", "show", str(root)] if file == "envman.toml" else ["lock", str(root)], env=cli_env(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["torch-" + "9" * 10_000, "torch-2.4-cuda" + "1" * 5_000, "x" * 10_000,
                                  "torch-2.4-cpu-py3." + "1" * 5_000])
def test_an_overlong_name_is_one_short_line(home, tmp_path, name):
    for words in (["matrix", "show", name], ["render", name, "-o", "-"]):
        r = run_envman(words, env=cli_env(tmp_path))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and len(r.stderr) < 2000, r.stderr[:300]
        assert "internal error" not in r.stderr


def test_a_refusal_of_thousands_of_mounts_is_one_clipped_line(home, tmp_path):
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    from envman.project.file import MAX_MOUNTS

    mounts = ", ".join(f'"./d:/target-number-{i}"' for i in range(MAX_MOUNTS))
    (root / "envman.toml").write_text(STACK + f"mounts = [{mounts}]\n")
    r = run_envman(["run", str(root), "--", "true"], env=cli_env(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[:300]
    assert len(r.stderr) < 3000 and "more)" in r.stderr and "envman project trust" in r.stderr


def test_the_lock_check_s_reason_is_the_error_line():
    from envman.project.image import build_reason

    tail = ("#12 [5/6] RUN python /opt/envman/project/lockcheck.py\n"
            "#12 0.41 envman: envman.lock names packages the requirements do not need: rich (refresh it: envman lock --upgrade)\n"
            "#12 ERROR: process did not complete successfully: exit code: 1\n")
    assert build_reason(tail) == ("envman.lock names packages the requirements do not need: rich "
                                  "(refresh it: envman lock --upgrade)")
    assert build_reason("E: Unable to locate package nosuch\n") is None


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_no_raw_html_from_results_reaches_the_markdown_summary(text):
    from envman.ci.report import markdown_summary

    results = [{"row": "torch-2.4.1-cpu" + text, "name": text, "result": "fail", "reason": "<img src=x onerror=alert(1)>" + text,
                "steps": {text or "build": {"status": "fail"}}, "shard": text, "framework": "torch" + text,
                "framework_version": "2.4.1" + text, "cuda": None, "variant": "cpu" + text}]
    md = markdown_summary(results, sources=[text], notes=[text])
    assert "<" not in md and ">" not in md.replace("\n> ", "\n").lstrip(">")
    assert not any(c in md for c in UNSAFE if c != "\n")


_LOCAL = st.from_regex(r"[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,2}\+[a-z0-9]{1,8}", fullmatch=True)


@given(st.one_of(_LOCAL, st.from_regex(r"[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,2}", fullmatch=True)),
       st.one_of(st.just("cpu"), st.text(alphabet="abcxyz0123._+-", min_size=1, max_size=90)))
@settings(max_examples=60, deadline=None)
def test_a_row_validates_only_when_its_name_parses_and_its_variant_renders(version, variant):
    """By rule: what matrix validation accepts, the stack-name grammar and the render accept."""
    import re as _re

    from envman.errors import ResolveError
    from envman.matrix import validate as V
    from envman.matrix.model import FrameworkBuild
    from envman.render.dockerfile import FIELD_RULES
    from envman.stack.names import parse_name

    problems = []
    b = FrameworkBuild.__new__(FrameworkBuild)
    object.__setattr__(b, "framework", "torch")
    object.__setattr__(b, "version", version)
    object.__setattr__(b, "variant", variant)
    object.__setattr__(b, "cuda", None)
    V._check_renderable_names(b, "w", lambda where, what: problems.append(what))
    try:
        parse_name(f"torch-{version}-cpu")
        parses = True
    except ResolveError:
        parses = False
    renders = bool(FIELD_RULES["variant"][0].fullmatch(variant))
    assert (not problems) == (parses and renders), (version, variant, problems)
    if _re.search(r"\+", version):
        assert problems
