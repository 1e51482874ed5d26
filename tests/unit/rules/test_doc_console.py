"""The console blocks of README.md and docs/ that need no engine, run again and compared with what
the docs show (the grammar, markers and normalisations: ``tests/support/doc_console.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import doc_console as dc
from tests.support.cli import run_envman

BLOCKS = dc.all_blocks()
UNIT = [b for b in BLOCKS if b.check == "unit"]


def run_block(block: dc.Block, monkeypatch) -> list[str]:
    return dc.run_block(block, monkeypatch, engine=False)


@pytest.mark.parametrize("block", UNIT, ids=[b.where for b in UNIT])
def test_a_console_block_is_what_the_command_prints_now(block, monkeypatch):
    problems = run_block(block, monkeypatch)
    assert not problems, "\n".join(problems)


def test_every_console_block_is_checked_or_says_why():
    assert len(UNIT) >= 10
    for b in BLOCKS:
        assert b.check in dc.KINDS
        assert b.check != "unchecked" or len(b.reason) >= 10, b.where


def _doc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def test_a_stale_block_fails(tmp_path, monkeypatch):
    fresh = dc.Block("page.md", 1, "unit", steps=(dc.Step("", "envman matrix ls --framework torch --cuda 12.8 | tail -1",
                                                           (), None),))
    out = run_envman(["matrix", "ls", "--framework", "torch", "--cuda", "12.8"], merge_stderr=True).stdout
    last = out.splitlines()[-1]
    good = dc.Block(fresh.path, 1, "unit", steps=(dc.Step("", fresh.steps[0].line, (last,), None),))
    assert run_block(good, monkeypatch) == []
    stale = last.replace(last.split()[0], str(int(last.split()[0]) + 1), 1)  # one row more than there is
    bad = dc.Block(fresh.path, 1, "unit", steps=(dc.Step("", fresh.steps[0].line, (stale,), None),))
    (problem,) = run_block(bad, monkeypatch)
    assert "the output differs" in problem and f"-{stale}" in problem and f"+{last}" in problem


def test_a_wrong_exit_status_fails(tmp_path, monkeypatch):
    line = "envman render torch-2.6-cuda12-arm64 -o -"
    shown = run_envman(line.split()[1:], merge_stderr=True).stdout.splitlines()
    for code, ok in ((2, True), (1, False)):
        block = dc.Block("page.md", 1, "unit", steps=(dc.Step("", line, tuple(shown), code),))
        assert (run_block(block, monkeypatch) == []) is ok


def test_markers_are_read(tmp_path):
    text = ("a\n\n```console\n$ envman matrix ls\nx\n```\n"
            "<!-- console: docker setup=cloned as=/tmp/t -->\n```console\n$ envman run\ny\n(exit 2)\n```\n"
            "<!-- console: unchecked: needs a GPU and its driver -->\n\n```\n$ envman run\nz\n```\n"
            "```bash\n$ envman build x\n```\n"  # a synopsis: no output, not a console block
            "```\nno prompt here\n```\n")
    b = dc.read_blocks(_doc(tmp_path, text), tmp_path)
    assert [(x.check, x.line, x.options, x.reason) for x in b] == [
        ("unit", 3, {}, ""), ("docker", 8, {"setup": "cloned", "as": "/tmp/t"}, ""),
        ("unchecked", 15, {}, "needs a GPU and its driver")]
    assert b[1].steps == (dc.Step("", "envman run", ("y",), 2),)


@pytest.mark.parametrize("marker, problem", [
    ("<!-- console: unchecked -->", "must say why"),
    ("<!-- console: unchecked:   -->", "must say why"),
    ("<!-- console: skip -->", "the check is one of"),
    ("<!-- console: unit setup=nosuch -->", "is not one of"),
    ("<!-- console: unit fast -->", "option 'fast'"),
    ("<!-- console: unit home=/home/you -->", "the only home"),
    ("<!-- console: docker as= -->", "option 'as='"),
])
def test_a_bad_marker_is_refused(tmp_path, marker, problem):
    with pytest.raises(dc.BlockError, match=problem):
        dc.read_blocks(_doc(tmp_path, f"{marker}\n```\n$ envman x\ny\n```\n"), tmp_path)


def test_a_marker_before_no_console_block_is_refused(tmp_path):
    with pytest.raises(dc.BlockError, match="shows no command's output"):
        dc.read_blocks(_doc(tmp_path, "<!-- console: unit -->\n```\n$ envman x\n```\n"), tmp_path)
    with pytest.raises(dc.BlockError, match="just before a fenced block"):
        dc.read_blocks(_doc(tmp_path, "<!-- console: unit -->\ntext\n```\n$ envman x\ny\n```\n"), tmp_path)


@pytest.mark.parametrize("line, args, env, cd, filters", [
    ("envman matrix ls", ["matrix", "ls"], {}, None, []),
    ("COLUMNS=200 envman matrix show x | grep -E '^(name|cuda )'", ["matrix", "show", "x"], {"COLUMNS": "200"}, None,
     [("grep", "^(name|cuda )")]),
    ("cd a/b && envman run -- pwd      # a comment", ["run", "--", "pwd"], {}, "a/b", []),
    ("envman render x -o - | head -5 | tail -2", ["render", "x", "-o", "-"], {}, None, [("head", "5"), ("tail", "2")]),
    ("envman run --mount ~/.ssh:/s", ["run", "--mount", "/h/.ssh:/s"], {}, None, []),
    ("envman run -- sh -c 'echo \"$HOME\"'", ["run", "--", "sh", "-c", 'echo "$HOME"'], {}, None, []),
])
def test_the_command_grammar(line, args, env, cd, filters):
    cmd = dc.parse_line(line, "/h")
    assert (cmd.args, cmd.env, cmd.cd, cmd.filters) == (args, env, cd, filters)


@pytest.mark.parametrize("line", ["git clone x && cd y", "envman a && envman b", "envman a | sed 1d", "envman a; ls",
                                  "envman a | head", "envman 'a"])
def test_a_line_outside_the_grammar_is_refused(line):
    with pytest.raises(dc.BlockError):
        dc.parse_line(line, "/h")


@pytest.mark.parametrize("shown, real, ok", [
    (["a", "b"], "a\nb\n", True),
    (["a", "b"], "a\nb\nc\n", False),  # one line more than the docs show
    (["a", "..."], "a\nb\nc\n", True),
    (["a", "...", "c"], "a\nc\n", True),  # ... may stand for no line
    (["a", "...", "c"], "a\nb\n", False),
    (["x: […] here"], "x: long text here\n", True),
    (["x: […] here"], "x: long text\nhere\n", False),  # a cut stays within its line
    (["took 0.3 s"], "took 12.75 s\n", True),
    (["took 0.3 s"], "took 0.3 ms\n", False),
    (["made x (5e89fb139cb4)"], "made x (0123456789ab)\n", True),
    (["made x (5e89fb139cb4)"], "made x (0123456789a)\n", False),  # 11 hex digits: not an id
    (["at 2026-11-23T14:46:48Z"], "at 2027-01-02T03:04:05Z\n", True),
    (["3    gan  11-23 14:39:49"], "3    gan  12-01 09:00:00   \n", True),
    (["newest 2026-10-28 (29 days old)"], "newest 2026-10-28 (1 day old)\n", True),
    (["engine  Docker 20.10.24+dfsg1, rootful"], "engine  Docker 27.3.1, rootful\n", True),
    (["engine  Docker 20.10.24+dfsg1, rootful"], "engine  Podman 4.3.1, rootful\n", False),
    (["tensorflow 2.21.0"], "tensorflow 2.22.0\n", False),  # a framework's version is never normalised
    (["name a.b"], "name aXb\n", False),  # the shown text is literal, not a pattern
    ([], "", True),
    ([], "x\n", False),
])
def test_comparison_and_normalisations(shown, real, ok):
    assert dc.matches(shown, real) is ok


def test_every_normalisation_says_why():
    assert all(len(why) > 5 for _, _, why in dc.NORMALISE)


def test_sandbox_paths_are_shown_as_the_docs_write_them(tmp_path):
    box = dc.make_sandbox(tmp_path, {"PATH": "/bin", "ENVMAN_MATRIX": "x.toml", "XDG_STATE_HOME": "/s"})
    assert "ENVMAN_MATRIX" not in box.env and "XDG_STATE_HOME" not in box.env and box.env["HOME"] == str(tmp_path / "home")
    real = f"wrote {tmp_path}/home/proj/envman.toml; {tmp_path}/cloned\n"
    assert dc.shown_paths(real, box, {"as": "/tmp/t"}) == "wrote /tmp/t/home/proj/envman.toml; /tmp/t/cloned\n"
    assert dc.shown_paths(real, box, {"home": "~", "as": "/tmp/t"}) == "wrote ~/proj/envman.toml; /tmp/t/cloned\n"


def test_a_pipe_shows_stdout_only(monkeypatch):
    """``envman X | head`` on a terminal: the pipe gets stdout; stderr is not what the pipe shows."""
    line = "envman render torch-2.6-cuda12-arm64 -o - | head -3"
    quiet = dc.Block("page.md", 1, "unit", steps=(dc.Step("", line, (), 2),))
    assert run_block(quiet, monkeypatch) == []
    err = run_envman(["render", "torch-2.6-cuda12-arm64", "-o", "-"]).stderr.splitlines()
    noisy = dc.Block("page.md", 1, "unit", steps=(dc.Step("", line, tuple(err), 2),))
    (problem,) = run_block(noisy, monkeypatch)
    assert "the output differs" in problem
