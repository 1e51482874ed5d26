"""The grammar of ``envman run``, ``exec`` and ``shell`` (:mod:`envman.run.grammar`): one table,
and the parser, the split into options and command, and the ``--help`` all agree with it.

- ``envman NAME --help`` lists exactly the options the parser accepts: every listed spelling is
  accepted (with a value where the table says so) and stored where the table says; every other
  option-like word, abbreviations of the listed ones included, is refused with one error line.
- The split of ``envman run [OPTIONS] PROJECT CMD ARGS...`` is checked on generated words: any
  mix of options (long, short, ``--opt=value``, ``-pVALUE``, short clusters such as ``-dp80``)
  around PROJECT, then any command, splits where the command starts, and the options parse back
  to what was generated.
- The grammar reaches the CLI frameworks through public APIs only: no module reads a private
  attribute of an argparse object or assigns to an attribute of typer or click.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.run import grammar
from tests.support.cli import run_envman

GRAMMARS = sorted(grammar.GRAMMARS)
PACKAGE = Path(grammar.__file__).resolve().parents[1]


# --------------------------------------------------------------------------- help == parser


def _listed_options(help_text: str) -> set[str]:
    """The option spellings in the first column of the help's Options panel."""
    out: set[str] = set()
    in_options = False
    for line in help_text.splitlines():
        if re.match(r"\s*╭─ Options", line):
            in_options = True
            continue
        if in_options and line.lstrip().startswith("╰"):
            break
        row = re.match(r"\s*│ (-[^│]*?)(?:\s{2,}|$)", line) if in_options else None
        if row:
            first = line.split("│")[1]
            out.update(w for w in first.split() if re.fullmatch(r"--?[A-Za-z][\w-]*", w))
    return out


@pytest.fixture(scope="module")
def help_texts() -> dict[str, str]:
    """``envman NAME --help`` of each grammar, through the console script's own routing."""
    out = {}
    for name in GRAMMARS:
        r = run_envman([name, "--help"], env={"COLUMNS": "300", "TERM": "dumb", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        out[name] = r.stdout
    return out


@pytest.mark.parametrize("name", GRAMMARS)
def test_help_lists_exactly_the_options_of_the_table(name, help_texts):
    assert _listed_options(help_texts[name]) == set(grammar.GRAMMARS[name].flags())


@pytest.mark.parametrize("name", GRAMMARS)
def test_help_shows_each_options_help_and_value(name, help_texts):
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", help_texts[name]).split())
    g = grammar.GRAMMARS[name]
    for o in g.options:
        assert " ".join(o.help.split())[1:] in flat, o.flags
        if o.metavar:
            assert re.search(rf"{re.escape(o.flags[-1])}( -\w)? {re.escape(o.metavar)} ", flat), o.flags
    assert g.target in flat and ("CMD" in flat) == (g.command_help is not None)
    assert " ".join(g.summary.split()) in flat


def _given(g: grammar.Grammar, flag: str) -> list[str]:
    o = g.option(flag)
    return [flag, "v1"] if o is not None and o.takes_value else [flag]


@pytest.mark.parametrize("name, flag", [(n, f) for n in GRAMMARS for f in grammar.GRAMMARS[n].flags()
                                        if f not in grammar.HELP_FLAGS])
def test_every_listed_option_is_accepted_and_stored_where_the_table_says(name, flag):
    g = grammar.GRAMMARS[name]
    o = g.option(flag)
    a = grammar.parse(g, [*_given(g, flag), "target"])
    value = getattr(a, o.dest)
    assert value == (["v1"] if o.repeat else "v1" if o.takes_value else True)
    assert getattr(a, g.target_dest) == "target"


@pytest.mark.parametrize("name, flag", [(n, f) for n in GRAMMARS for o in grammar.GRAMMARS[n].options
                                        for f in o.flags if f.startswith("--")])
def test_no_abbreviation_is_accepted(name, flag):
    g = grammar.GRAMMARS[name]
    for cut in range(3, len(flag)):
        if flag[:cut] in g.flags():
            continue
        with pytest.raises(UserError) as e:
            grammar.parse(g, [flag[:cut], "v1", "target"] if g.option(flag).takes_value else [flag[:cut], "target"])
        assert e.value.where == f"envman {name}"


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(GRAMMARS), word=st.from_regex(r"--?[a-z][a-z-]{0,14}", fullmatch=True))
def test_an_option_the_table_does_not_list_is_refused(name, word):
    g = grammar.GRAMMARS[name]
    if word in g.flags() or any(c in word[1:] for c in "hdpve") and not word.startswith("--"):
        return  # a listed spelling, or a short cluster that starts with a listed letter
    with pytest.raises(UserError):
        grammar.parse(g, [word, "target"])


# --------------------------------------------------------------------------- split (property)


def _option_words(g: grammar.Grammar):
    """A strategy of (words, {dest: expected value}) for one option, in any of its spellings."""
    def spell(o: grammar.Option, value: str, form: int) -> list[str]:
        flag = o.flags[form % len(o.flags)]
        if not o.takes_value:
            return [flag]
        if flag.startswith("--"):
            return [f"{flag}={value}"] if form >= len(o.flags) else [flag, value]
        return [flag + value] if form >= len(o.flags) else [flag, value]

    values = st.from_regex(r"[a-z0-9][a-z0-9=:,./-]{0,8}", fullmatch=True)
    return st.builds(lambda o, v, form: (spell(o, v, form), o, v),
                     st.sampled_from(g.options), values, st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), name=st.sampled_from(GRAMMARS))
def test_split_finds_the_command_after_any_mix_of_options(data, name):
    g = grammar.GRAMMARS[name]
    before = data.draw(st.lists(_option_words(g), max_size=4))
    after = data.draw(st.lists(_option_words(g), max_size=3))
    target = data.draw(st.from_regex(r"[a-z][a-z0-9_.]{0,8}", fullmatch=True))
    command = data.draw(st.lists(st.sampled_from(["python", "-V", "--stack", "-p", "x", "-h", "--help", "a=b"]),
                                 max_size=4)) if g.command_help else []
    if command and command[0].startswith("-"):
        command = ["python", *command]
    words = [w for ws, _, _ in before for w in ws] + [target] + [w for ws, _, _ in after for w in ws]
    options, cmd = grammar.split(g, words + command)
    assert (options, cmd) == (words, command)
    assert grammar.asks_help(g, words + command) is False  # -h in the command is the command's
    a = grammar.parse(g, options)
    assert getattr(a, g.target_dest) == target
    expected: dict[str, object] = {}
    for _, o, v in before + after:  # a repeated option keeps every value, any other the last
        expected[o.dest] = [*expected.get(o.dest, []), v] if o.repeat else v if o.takes_value else True
    assert {k: getattr(a, k) for k in expected} == expected


@pytest.mark.parametrize("words, cluster_flags", [
    (["-dp80", "alpha", "ls"], {"detach": True, "port": ["80"]}),
    (["-dp", "80", "alpha", "ls"], {"detach": True, "port": ["80"]}),
    (["-de", "A=1", "alpha", "ls"], {"detach": True, "env_var": ["A=1"]}),
])
def test_a_short_cluster_ends_at_its_first_option_that_takes_a_value(words, cluster_flags):
    options, command = grammar.split(grammar.RUN, words)
    assert command == ["ls"] and options == words[:-1]
    a = grammar.parse(grammar.RUN, options)
    assert {k: getattr(a, k) for k in cluster_flags} == cluster_flags


@pytest.mark.parametrize("name, words, asked", [
    ("run", ["--help"], True), ("run", ["alpha", "-h"], True), ("run", ["-dh"], True),
    ("run", ["alpha", "python", "--help"], False), ("run", ["alpha", "--", "--help"], False),
    ("run", ["--", "-h"], False), ("run", ["--name", "x", "alpha", "sh", "-h"], False),
    ("exec", ["box", "-h"], True), ("exec", ["box", "ls", "-h"], False),
    ("shell", ["-h"], True), ("shell", ["--stack", "s", "--help"], True),
])
def test_help_is_asked_only_among_the_options(name, words, asked):
    assert grammar.asks_help(grammar.GRAMMARS[name], words) is asked


# --------------------------------------------------------------------------- public APIs only


def test_the_grammar_module_loads_nothing_at_import():
    """It is read on every run before anything else: no other module of envman, no argparse."""
    code = ("import sys; before = set(sys.modules); import envman.run.grammar; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert loaded <= {"__future__", "envman", "envman.run", "envman.run.grammar"}


def _private_framework_use(source: str) -> list[str]:
    """Reads of a private attribute (``x._name``, not ``self._name``) in a module that imports
    argparse, and assignments to an attribute of anything imported from typer or click."""
    tree = ast.parse(source)
    framework_names: set[str] = set()
    uses_argparse = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                uses_argparse |= a.name == "argparse"
                if a.name.split(".")[0] in ("typer", "click"):
                    framework_names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("typer", "click"):
            framework_names.update(a.asname or a.name for a in node.names)
    out = []
    for node in ast.walk(tree):
        if (uses_argparse and isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "os"))):
            out.append(f"line {node.lineno}: private attribute {node.attr}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                root = t
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(t, ast.Attribute) and isinstance(root, ast.Name) and root.id in framework_names:
                    out.append(f"line {node.lineno}: assigns {ast.unparse(t)}")
    return out


def test_no_module_patches_typer_or_reads_argparse_internals():
    found = {str(p.relative_to(PACKAGE.parent)): v for p in sorted(PACKAGE.rglob("*.py"))
             if (v := _private_framework_use(p.read_text()))}
    assert found == {}


@pytest.mark.parametrize("source", [
    "import argparse\np = argparse.ArgumentParser()\np._option_string_actions.get('--x')",
    "import argparse\nisinstance(a, argparse._HelpAction)",
    "import typer\ntyper.core.TyperOption.display_type_rich = f",
    "from typer._click.types import ParamType\nParamType.get_metavar = f",
    "import click.types as t\nt.ParamType.get_metavar = f",
])
def test_the_public_api_rule_catches_each_breach(source):
    assert _private_framework_use(source)


@pytest.mark.parametrize("name", sorted(grammar.GRAMMARS))
def test_a_command_line_at_the_option_word_limit_parses_and_one_past_it_is_one_line(name):
    """The parser's cost grows with the square of the options given: the words are bounded, and
    exactly at the bound every ``-e`` still arrives."""
    g = grammar.GRAMMARS[name]
    target = [] if not g.target_required else ["t"]
    pairs = (grammar.MAX_OPTION_WORDS - len(target)) // 2
    words = [w for i in range(pairs) for w in ("-e", f"K{i}=v")] + target
    words += ["--dry-run"] * (grammar.MAX_OPTION_WORDS - len(words))
    assert len(words) == grammar.MAX_OPTION_WORDS
    assert grammar.parse(g, words).env_var[-1] == f"K{pairs - 1}=v"
    with pytest.raises(UserError) as e:
        grammar.parse(g, words + ["-e"])
    assert str(e.value).count("\n") == 0 and f"{grammar.MAX_OPTION_WORDS + 1} option words" in str(e.value)


def test_twenty_thousand_env_options_are_refused_in_one_line_at_once():
    r = run_envman(["run", "--dry-run", *(w for i in range(20000) for w in ("-e", f"K{i}=v")), "p", "--", "true"])
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "40002 option words" in r.stderr


@pytest.mark.parametrize("columns", [None, "", "0", "-5", "abc", "1", "57", "200", " 90 "])
def test_the_help_width_is_shutils_own(columns, monkeypatch):
    """argparse asks for the terminal's width on every parse: envman answers as
    ``shutil.get_terminal_size`` does, without importing it."""
    import shutil

    from envman.run.grammar import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_a_parse_imports_neither_shutil_nor_the_compression_modules():
    import subprocess
    import sys

    # a short cluster: a line the parser itself reads (plain words are read without it)
    code = ("import sys\nfrom envman.run import grammar\ngrammar.parse(grammar.RUN, ['p', '-dp80'])\n"
            "print(sorted(m for m in ('shutil', 'bz2', 'lzma', 'argparse') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['argparse']"


def test_the_help_wraps_at_the_columns_given(monkeypatch, capsys):
    from envman.run import grammar

    monkeypatch.setenv("COLUMNS", "60")
    with pytest.raises(SystemExit):
        grammar.parse(grammar.RUN, ["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 58


# --------------------------------------------------------------------------- plain words, no argparse

_WORD = st.sampled_from(["P", "proj", "", "a b", "-", "--", "-1", "-x y", "=v", "v=1", "K=V", "8888",
                         "--stack", "--stak", "-p", "-p80", "-dp80", "-e", "-eK=V", "-p=80", "--no-gpu=",
                         "--no-gpu=1", "--stack=", "--stack=torch-2.5", "--env-var", "--env-var=A=B", "-d",
                         "--help", "-h", "--json", "--name", "--dry-run", "--gpus", "all", "-v", "/a:/b"])


def _argparse(g: grammar.Grammar, words: list[str]) -> dict[str, object] | str:
    try:
        return vars(grammar.parser(g).parse_args(words))
    except UserError as exc:
        return f"error: {exc.what}"
    except SystemExit:
        return "help"


@pytest.mark.parametrize("name", GRAMMARS)
@settings(max_examples=400, deadline=None)
@given(words=st.lists(_WORD, max_size=6))
def test_plain_words_are_read_as_argparse_reads_them(name: str, words: list[str]) -> None:
    g = grammar.GRAMMARS[name]
    plain = grammar.parse_plain(g, words)
    if plain is not None:
        assert vars(plain) == _argparse(g, words), words


@pytest.mark.parametrize("words, expected", [
    ([], {"project": None}),
    (["P"], {"project": "P"}),
    (["--no-gpu", "P"], {"project": "P", "no_gpu": True}),
    (["P", "--stack", "torch-2.5", "-e", "A=1", "--env-var=B", "-p", "80", "--port=81"],
     {"project": "P", "stack": "torch-2.5", "env_var": ["A=1", "B"], "port": ["80", "81"]}),
    (["--stack=", "--json", "--dry-run"], {"stack": "", "as_json": True, "dry_run": True}),
    (["--shm-size", "1g", "--shm-size", "2g"], {"shm_size": "2g"}),
])
def test_everyday_run_lines_are_read_without_argparse(words: list[str], expected: dict[str, object]) -> None:
    plain = grammar.parse_plain(grammar.RUN, words)
    assert plain is not None
    got = vars(plain)
    assert {k: got[k] for k in expected} == expected
    assert got == _argparse(grammar.RUN, words)


@pytest.mark.parametrize("words", [
    ["--stak", "x"], ["-dp80"], ["-p80"], ["-p=80"], ["--no-gpu=1"], ["--stack"], ["--stack", "-x"], ["P", "Q"],
    ["-"], ["-1"], ["--help"], ["-h"], ["-x y"],
])
def test_other_lines_go_to_argparse(words: list[str]) -> None:
    assert grammar.parse_plain(grammar.RUN, words) is None


def test_exec_without_its_target_goes_to_argparse() -> None:
    assert grammar.parse_plain(grammar.EXEC, ["--dry-run"]) is None
    assert vars(grammar.parse_plain(grammar.EXEC, ["env1", "--dry-run"]) or {}) == {
        "target": "env1", "dry_run": True, "env_var": []}


def test_an_everyday_run_line_loads_no_argparse() -> None:
    code = ("import sys; from envman.run import grammar; "
            "grammar.parse(grammar.RUN, ['--no-gpu', 'P', '-e', 'A=1']); print('argparse' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
