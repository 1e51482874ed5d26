"""The CLI contract: fast help, one-line errors with exit 2, JSON shapes."""

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_envman

from tests.unit.conftest import MINI

SHIPPED = (Path(__file__).resolve().parents[3] / "matrices" / "torch.toml").exists()
needs_shipped = pytest.mark.skipif(not SHIPPED, reason="shipped matrix files are not present")


def envman(*args, env=None, check=None, fresh=False):
    """``envman ARGS`` in a process of its own; ``fresh``: a new interpreter (``python -m envman``)
    instead of a fork of this one (tests/support/cli.py)."""
    e = dict(os.environ)
    e.pop("ENVMAN_MATRIX", None)
    e.update(env or {})
    if fresh:
        p = subprocess.run([sys.executable, "-m", "envman", *args], capture_output=True, text=True, env=e)
    else:
        p = run_envman(args, env=e)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout, p.stderr)
    return p


def test_help_and_version():
    p = envman("--help", check=0, fresh=True)
    assert "matrix" in p.stdout
    p = envman("--version", check=0, fresh=True)
    assert p.stdout.startswith("envman ")


def test_help_starts_fast():
    envman("--help", check=0, fresh=True)  # warm the bytecode cache
    best = min(_cpu_seconds("--help") for _ in range(3))
    assert best < 1.0, f"envman --help took {best:.2f}s of CPU"


def _cpu_seconds(*args):
    """The CPU time (user + system) a new ``envman ARGS`` process takes: what start-up costs,
    whatever else the machine is busy with (its wall time is not)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    envman(*args, check=0, fresh=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_help_imports_no_heavy_modules():
    code = "import sys; from envman.cli import app; print(' '.join(sorted(m for m in ('docker', 'jinja2', 'envman.render.dockerfile', 'envman.engine.docker', 'rich.table') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@needs_shipped
def test_unknown_name_is_one_line_exit_2():
    p = envman("matrix", "show", "torch-1.0-cuda12")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("envman: error:")
    assert "closest valid names" in p.stderr and "Traceback" not in p.stderr


@needs_shipped
def test_malformed_user_matrix_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("schema = 1\nkind = 'gpus'\n[[gpu]]\nid = 1\n")
    p = envman("--matrix", str(bad), "matrix", "ls")
    assert p.returncode == 2 and str(bad) in p.stderr and "gpu[0].id" in p.stderr
    assert p.stderr.count("\n") == 1 and p.stdout == ""


@needs_shipped
def test_show_json_shape():
    d = json.loads(envman("matrix", "show", "torch-1.0-cuda10", "--json", check=0).stdout)
    for key in ("name", "framework", "framework_version", "cuda", "cudnn", "python", "os", "base_image",
                "base_image_status", "min_driver", "toolkit_driver", "sass_archs", "ptx_archs", "sources"):
        assert key in d, key
    assert (d["framework_version"], d["cuda"]) == ("1.0.1", "10.0")
    assert d["base_image_status"] in ("published", "deleted", "unknown")


@needs_shipped
def test_ls_json_and_filters():
    rows = json.loads(envman("matrix", "ls", "--framework", "tf", "--json", check=0).stdout)
    assert rows and all(r["framework"] == "tensorflow" for r in rows)
    assert {"name", "framework", "framework_version", "cuda"} <= set(rows[0])
    cpu = json.loads(envman("matrix", "ls", "--cuda", "cpu", "--json", check=0).stdout)
    assert cpu and all(r["cuda"] is None for r in cpu)
    p = envman("matrix", "ls", "--framework", "caffe")
    assert p.returncode == 2 and "--framework" in p.stderr


@needs_shipped
@pytest.mark.parametrize(
    "args,code,verdict",
    [
        (["torch-2.7-cuda12.8", "--driver", "570.124.06", "--sm", "12.0"], 0, "ok"),
        # torch 1.0 cu100 carries SASS up to sm_75 and PTX compute_50: an A100 runs it only by JIT
        (["torch-1.0-cuda10", "--driver", "450.80.02", "--sm", "8.0"], 0, "jit_only"),
        (["torch-1.0-cuda10", "--driver", "396.26", "--sm", "7.5"], 1, "driver_too_old"),
        # torch 2.4 cu124 has no sm_120 SASS and no PTX: Blackwell cards get "no kernel image"
        (["torch-2.4-cuda12.4", "--driver", "570.124.06", "--sm", "12.0"], 1, "arch_unsupported"),
        (["torch-2.7-cuda12.8", "--driver", "470.57.02", "--sm", "8.6"], 1, "driver_too_old"),
        (["torch-2.7-cuda12.8", "--driver", "570.124.06", "--sm", "3.7"], 1, "arch_unsupported"),
    ],
)
def test_explain_exit_codes(args, code, verdict):
    p = envman("matrix", "explain", *args, "--json", check=code)
    assert json.loads(p.stdout)["verdict"] == verdict


@needs_shipped
def test_explain_by_gpu_name_and_bad_input():
    p = envman("matrix", "explain", "torch-2.7-cuda12.8", "--driver", "570.124.06", "--gpu", "a100", "--json", check=0)
    assert json.loads(p.stdout)["sm"] == "8.0"
    assert envman("matrix", "explain", "torch-2.7-cuda12.8", "--driver", "banana", "--sm", "8.0").returncode == 2
    assert envman("matrix", "explain", "torch-2.7-cuda12.8", "--driver", "570.1", "--gpu", "voodoo5").returncode == 2
    assert envman("matrix", "explain", "torch-2.7-cuda12.8", "--driver", "570.1").returncode == 2


def test_validate_user_file_reports_problems(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text(
        "schema = 1\nkind = 'framework'\nframework = 'torch'\n[[build]]\nversion='9.0.0'\nvariant='cu999'\n"
        "cuda='99.9'\npython=['3.11']\npackages=['torch==9.0.0']\nsass=['8.0']\nsource=['s']\nstatus='confirmed'\n"
    )
    p = envman("matrix", "validate", str(bad), "--json")
    assert p.returncode == 1
    assert any("CUDA 99.9" in x for x in json.loads(p.stdout)["problems"])


NETWORK_FLAGS = ("--registry-mirror", "--ca-bundle", "--pip-index", "--pip-extra-index", "--framework-index",
                 "--wheelhouse", "--offline", "--online", "--apt-mirror", "--python-mirror")


@pytest.mark.parametrize("command", [("render",), ("build",), ("ci", "run")])
def test_render_build_and_ci_take_every_network_option(command):
    from typer.main import get_command

    from envman.cli import app

    cmd = get_command(app)
    for word in command:
        cmd = cmd.commands[word]
    flags = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    assert set(NETWORK_FLAGS) <= flags, sorted(set(NETWORK_FLAGS) - flags)


def test_build_options_reach_the_render(tmp_path, monkeypatch):
    """--python-mirror and --online given to build end up in its RenderOptions, over the config."""
    from envman.cli._options import network_options

    (tmp_path / "config.toml").write_text('[network]\noffline = true\nwheelhouse = "%s"\n' % tmp_path)
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    none = dict(registry_mirror=None, ca_bundle=None, pip_index=None, pip_extra_index=None, framework_index=None,
                wheelhouse=None, apt_mirror=None)
    assert network_options(**none, offline=None, python_mirror=None).offline  # the config's
    opts = network_options(**none, offline=False, python_mirror="https://pbs.example.org/releases/download")
    assert not opts.offline  # --online wins over the config
    assert opts.python_install_mirror == "https://pbs.example.org/releases/download"


def test_the_console_script_builds_only_the_command_it_runs_and_the_same_tree():
    """The console script's root builds a command when it is first asked for; built, the tree
    is the one the registered app gives (every command, option, help text and flag)."""
    code = """
import json, sys
import envman.cli as cli
root = cli._command()
from envman.cli import _registered
cmd = root.get_command(None, "project")
print(json.dumps({"built": sorted(root.commands), "registered": bool(_registered),
                  "modules": sorted(m for m in sys.modules if m.startswith("envman.cli."))}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["built"] == ["project"] and not out["registered"]
    assert "envman.cli.build" not in out["modules"] and "envman.cli.project" in out["modules"]

    from typer.main import get_command

    import envman.cli as cli

    def described(c) -> dict:
        params = [{**{k: repr(getattr(p, k, None)) for k in ("name", "opts", "secondary_opts", "required", "default",
                                                              "help", "is_flag", "multiple", "hidden", "metavar")},
                   "type": f"{type(p.type).__name__}:{getattr(p.type, 'name', '')}"} for p in c.params]
        subs = {n: described(s) for n, s in getattr(c, "commands", {}).items()}
        return {"type": type(c).__name__, "name": c.name, "help": c.help, "short_help": c.short_help,
                "hidden": c.hidden, "no_args_is_help": getattr(c, "no_args_is_help", None), "params": params,
                "commands": subs}

    lazy = cli._LazyGroup(name="envman")
    eager = get_command(cli.app)
    ctx = eager.make_context("envman", [], resilient_parsing=True)
    assert lazy.list_commands(ctx) == list(eager.commands)
    for name in lazy.list_commands(ctx):
        assert described(lazy.get_command(ctx, name)) == described(eager.commands[name]), name


def test_the_root_help_of_the_console_script_is_the_registered_trees():
    """The console script lists the commands from stand-ins (name, help, hidden): its --help is
    byte for byte the help of the whole registered tree."""
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb"}
    lazy = subprocess.run([sys.executable, "-c", "from envman.main import main; main(['--help'])"], env=env,
                          capture_output=True, text=True)
    eager = subprocess.run([sys.executable, "-c", "from typer.main import get_command; from envman.cli import app; "
                            "get_command(app)(['--help'], prog_name='envman')"], env=env, capture_output=True, text=True)
    assert lazy.returncode == eager.returncode == 0, (lazy.stderr, eager.stderr)
    assert "render" in lazy.stdout and "node-check" not in lazy.stdout  # a hidden command stays hidden
    assert lazy.stdout == eager.stdout


def test_every_command_is_declared_once_in_the_commands_table():
    """envman.cli.COMMANDS is the one place that names and registers commands: the click tree
    holds exactly its entries, in its order, and no command module registers anything itself."""
    import re
    from pathlib import Path

    from typer.main import get_command

    import envman.cli as cli

    root = get_command(cli.app)
    plain = [c for c in cli.COMMANDS if isinstance(c, cli.Command)]
    groups = [g for g in cli.COMMANDS if isinstance(g, cli.Group)]
    assert list(root.commands) == [c.name for c in plain] + [g.name for g in groups]
    assert {n for n, c in root.commands.items() if c.hidden} == {c.name for c in plain if c.hidden}
    for g in groups:
        assert list(root.commands[g.name].commands) == [c.name for c in g.commands]
        assert root.commands[g.name].help == g.help
    for entry in [*plain, *(c for g in groups for c in g.commands)]:
        module, name = entry.target.split(":")
        assert callable(getattr(__import__(f"envman.cli.{module}", fromlist=[name]), name))
    for f in Path(cli.__file__).parent.glob("*.py"):
        if f.name != "__init__.py":
            assert not re.search(r"\b(app|root)\.command\(|add_typer\(|^def register\(|^app = typer\.Typer\(", f.read_text(), re.M), f


@pytest.mark.parametrize("args", [["frobnicate"], ["buidl"], ["--frob"], ["matrix", "frob"], ["build", "--frob"]])
def test_a_usage_error_says_envman_once(args):
    """`envman frobnicate` said "envman: error: envman: No such command"."""
    from tests.support.cli import run_envman

    r = run_envman(args)
    assert r.returncode == 2 and r.stderr.count("envman:") == 1 and r.stderr.count("\n") == 1, r.stderr


def test_a_message_that_starts_with_envman_is_not_prefixed_twice(capsys):
    from envman.boundary import guarded
    from envman.errors import UserError

    def fail():
        raise UserError("envman: the lock names packages the requirements do not need", fix="envman lock --upgrade")

    assert guarded(fail) == 2
    assert capsys.readouterr().err.startswith("envman: error: the lock names")


def test_a_group_summary_that_lists_its_commands_lists_every_one():
    """`matrix --help` said "list, show, explain, validate" and left out update and check-tags."""
    from envman.cli import COMMANDS, Group

    for g in (c for c in COMMANDS if isinstance(c, Group)):
        names = [c.name for c in g.commands if not c.hidden]
        _, colon, tail = g.help.partition(": ")
        words = [w.strip(" .") for w in tail.split(",")] if colon else []
        if words and any(w in names for w in words):  # the summary lists commands: all of them, as named
            assert words == names, (g.name, words, names)


def _every_command():
    """(words, click command) of every command envman has, sub-commands included."""
    from envman.cli import COMMANDS, Group, build_command

    for entry in COMMANDS:
        cmd = build_command(entry)
        if isinstance(entry, Group):
            for name, sub in cmd.commands.items():
                yield f"{entry.name} {name}", sub
        else:
            yield entry.name, cmd


def test_every_commands_placeholders_are_written_one_way():
    """Arguments were `project`, `{project}` and `PROJECT` in different commands: every
    placeholder of every usage line and every option value is now written in capitals."""
    import click

    from envman.run.grammar import GRAMMARS

    seen = 0
    for words, cmd in _every_command():
        ctx = click.Context(cmd, info_name=f"envman {words}")
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        if words in GRAMMARS:  # run, exec, shell: their usage comes from their grammar
            usage = GRAMMARS[words].usage
        for piece in re.findall(r"[\[{]?([A-Za-z][\w|.-]*)[\]}]?(?:\.\.\.)?", usage):
            if piece in ("envman", words.split()[0], *words.split()):
                continue
            assert piece == piece.upper(), (words, usage)
            seen += 1
        for p in cmd.params:
            if p.param_type_name == "option" and not p.is_flag:
                metavar = p.make_metavar(ctx) if "ctx" in p.make_metavar.__code__.co_varnames else p.make_metavar()
                assert metavar == metavar.upper(), (words, p.opts, metavar)
    assert seen > 30
