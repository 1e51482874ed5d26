"""Shell completion: the fast path (no CLI framework) answers exactly what the CLI's declarations
answer, completes project names for every command that takes one, and GPU names by any word."""

from __future__ import annotations

import os

import pytest

from envman.run import complete as C
from tests.support.cli import run_envman

PROJECTS = ("alpha", "alpine", "beta")


@pytest.fixture
def env(tmp_path, monkeypatch):
    from envman.project.file import load_project
    from envman.project.registry import register

    e = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    e.update(ENVMAN_STATE_DIR=str(tmp_path / "s"), ENVMAN_CONFIG_DIR=str(tmp_path / "c"))
    for k in ("ENVMAN_STATE_DIR", "ENVMAN_CONFIG_DIR"):
        monkeypatch.setenv(k, e[k])
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    for name in PROJECTS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "envman.toml").write_text(f'stack = "torch-2.4-cpu"\nname = "{name}"\n')
        register(load_project(tmp_path / name))
    return e


def _bash(words: str) -> dict[str, str]:
    parts = words.split(" ")
    return {"_ENVMAN_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}


def _typed(kind: str) -> str:
    return {"project": "al", "stack": "torch-2.4-cu", "stack+project": "a", "gpu": "a10", "flavour": "cudnn"}[kind]


PASS_THROUGH = {("run",), ("exec",), ("shell",)}  # they parse their own words: the CLI completes none
CASES = ([(" ".join(path), kind) for path, kind in C.POSITIONAL.items() if path not in PASS_THROUGH]
         + [("doctor --gpu", "gpu"), ("matrix explain torch-2.4 --gpu", "gpu"), ("render --flavour", "flavour"),
            ("project init --env", "stack"), ("notebook --stack", "stack")])


@pytest.mark.parametrize("command, kind", CASES)
def test_the_fast_path_answers_what_the_cli_declares(env, command, kind):
    words = f"envman {command} {_typed(kind)}"
    fast = C.fast_complete(_bash(words))
    assert fast is not None, f"{words}: the fast path left it to the CLI"
    cli = run_envman([], env={**env, **_bash(words)})  # main([]) never takes the fast path
    assert cli.returncode == 0, cli.stderr
    got, declared = fast[0].replace("\\ ", " ").split("\n"), cli.stdout.rstrip("\n").split("\n")
    if kind == "gpu":  # the CLI keeps only names that start with the word, as typed: RTX offered nothing
        assert set(declared) <= set(got) and len(got) > len(declared)
    else:
        assert got == declared
    assert fast[0], f"{words}: nothing offered"


@pytest.mark.parametrize("command", ["run", "shell", "exec", "stop", "submit", "notebook", "lock",
                                     "export k8s", "export compose", "export devcontainer"])
def test_every_command_that_takes_a_project_completes_its_name(env, command):
    out, code = C.fast_complete(_bash(f"envman {command} alp"))
    assert code == 0 and out.split("\n") == ["alpha", "alpine"]
    out, _ = C.fast_complete(_bash(f"envman --matrix x.toml {command} --no-gpu b")) if command == "run" else ("beta", 0)
    assert out == "beta"


@pytest.mark.parametrize("words", [
    "envman bu", "envman run alpha py", "envman run alpha --", "envman build --no", "envman run -- --st",
    "envman run alpha --st", "envman run alpha -- pyt",
    "envman matrix show torch-2.4 x", "envman project add ",
])
def test_what_only_the_cli_knows_is_left_to_it(words):
    assert C.fast_complete(_bash(words)) is None


def test_every_gpu_is_offered_by_any_word_of_its_name(env):
    names = C.cached_names()["gpus"]
    for name in names:
        for i, word in enumerate(name.split()):
            typed = " ".join(name.split()[i:])[:len(word) + 2]
            assert name in C.gpus_for(typed, names), (name, typed)
    rtx = C.gpus_for("RTX", names)
    assert "GeForce RTX 3090" in rtx and all("rtx" in g.lower() for g in rtx)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_get_typers_format(env, shell):
    extra = {"_ENVMAN_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_ARGS": 'envman doctor --gpu "GeForce RTX 30',
             "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    fast = C.fast_complete(extra)
    assert fast is not None and fast[1] == 0
    if shell == "zsh":  # typer's zsh script evals this
        assert fast[0].startswith("_arguments '*: :((") and '"GeForce RTX 3090"' in fast[0].split("\n")
        flavour = {**extra, "_TYPER_COMPLETE_ARGS": "envman render --flavour cudnn-"}
        assert C.fast_complete(flavour)[0] == run_envman([], env={**env, **flavour}).stdout.rstrip("\n")
    else:
        assert "GeForce RTX 3090" in fast[0].split("\n")
    if shell == "fish":
        assert C.fast_complete({**extra, "_TYPER_COMPLETE_FISH_ACTION": "is-args"}) == ("", 0)


@pytest.mark.parametrize("command", ["run", "shell", "exec"])
def test_run_shell_and_exec_complete_their_option_names_from_their_grammar(env, command):
    """typer does not parse these three (their own grammar does), so it completed no option name."""
    from envman.run.grammar import GRAMMARS

    grammar = GRAMMARS[command]
    out = C.fast_complete(_bash(f"envman {command} --"))
    assert out is not None and out[1] == 0
    assert out[0].splitlines() == [f for f in grammar.flags() if f.startswith("--")]
    if grammar.option("--stack") is not None:
        assert C.fast_complete(_bash(f"envman {command} --st"))[0].splitlines() == ["--stack"]
        # after an option that takes a value, and after a flag, still options
        assert C.fast_complete(_bash(f"envman -m m.toml {command} --port 80 --no-gpu --st"))[0].splitlines() == ["--stack"]
        # the value of --stack is a stack, not an option name
        assert C.fast_complete(_bash(f"envman {command} --stack --")) is None
    assert C.fast_complete(_bash(f"envman {command} -"))[0].splitlines() == \
        [f for f in grammar.flags() if f.startswith("--")]


def test_a_gpu_typed_as_its_name_is_offered_names_first_and_as_its_id_ids_first(env):
    names = C.cached_names()["gpus"]
    ids = {g for g in names if g == g.lower() and " " not in g}
    rtx = C.gpus_for("RTX", names)
    named = [g for g in rtx if g not in ids]
    assert rtx[:len(named)] == named and "RTX" in named[0].split()
    low = C.gpus_for("rtx", names)
    assert low[0] in ids and set(low) == set(rtx)
    assert C.gpus_for("GeForce RTX 309", names)[:2] == ["GeForce RTX 3090", "GeForce RTX 3090 Ti"]
