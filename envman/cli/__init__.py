"""The ``envman`` command line: a thin typer layer over the domain modules.

The command modules hold typer declarations only; :data:`COMMANDS` names and registers every
command, and the domain modules they call are imported inside the command functions, so
``envman --help`` stays fast. The console script is :func:`envman.main.main`, which sends a plain
``envman run`` past this module; errors go through its one boundary, :func:`envman.boundary.guarded`.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from envman import __version__

if TYPE_CHECKING:
    from envman.matrix.source import MatrixSource

def _type_column(self, ctx) -> str | None:
    """The help's type column: nothing for a flag or an argument (its name is shown), else the
    option's metavar, else click's upper-case type name (TEXT, PATH, INTEGER), not ``<str>``."""
    if isinstance(self, typer.core.TyperArgument) or getattr(self, "is_flag", False) or getattr(self, "count", False):
        return None
    if self.metavar:
        return self.metavar
    label = self.display_type(ctx).strip("<>")
    if label.startswith("list[") and label.endswith("]"):
        label = label[5:-1]
    return {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH", "bool": "BOOLEAN",
            "int range": "INTEGER", "float range": "NUMBER"}.get(label.lower(), label.upper())


typer.core.TyperOption.display_type_rich = _type_column  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = _type_column  # type: ignore[method-assign]

app = typer.Typer(
    name="envman",
    help="Containerised multi-CUDA environments: resolve, render, build, smoke-test and run GPU stacks side by side.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class State:
    """Options of the root command, for the sub-commands of this invocation."""

    matrix: MatrixSource | None = None


STATE = State()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envman {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    matrix: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--matrix",
            "-m",
            help="Extra matrix file (repeatable); also ENVMAN_MATRIX=path:path. Same format as matrices/*.toml.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    from envman.matrix.source import MatrixSource

    STATE.matrix = MatrixSource.of(matrix or [])


def matrix_source() -> MatrixSource:
    """The matrix of this invocation: shipped files, ``[matrix] files``, ENVMAN_MATRIX, --matrix."""
    if STATE.matrix is None:
        from envman.matrix.source import MatrixSource

        STATE.matrix = MatrixSource()
    return STATE.matrix


def get_matrix():
    """The loaded matrix of this invocation (:func:`matrix_source`)."""
    return matrix_source().matrix


@dataclass(frozen=True)
class Command:
    """``envman [GROUP] NAME`` runs ``envman.cli.MODULE.FUNCTION`` (``target`` is
    ``"MODULE:FUNCTION"``); ``cls``, ``"MODULE:CLASS"``, for a command that parses its own words."""

    name: str
    target: str
    cls: str | None = None
    hidden: bool = False


@dataclass(frozen=True)
class Group:
    """``envman NAME ...``: a noun with sub-commands."""

    name: str
    help: str
    commands: tuple[Command, ...]


#: Every command of envman, in the order ``envman --help`` lists them (typer lists the plain
#: commands first, then the groups). The modules only define the functions; this is the one place
#: that names and registers them. The command modules are small typer declarations; the domain
#: modules they call are imported inside the command functions.
COMMANDS: tuple[Command | Group, ...] = (
    Command("render", "render:render"),
    Command("build", "build:build"),
    Command("smoke", "build:smoke"),
    Command("images", "build:images"),
    Command("prune", "build:prune"),
    Command("run", "project:run", cls="project:RunCommand"),
    Command("exec", "project:exec_", cls="project:ExecCommand"),
    Command("shell", "project:shell", cls="project:ShellCommand"),
    Command("doctor", "project:doctor"),
    Command("ls", "project:ls"),
    Command("lock", "project:lock"),
    Command("clean", "envs:clean"),
    Command("notebook", "envs:notebook"),
    Command("ps", "envs:ps"),
    Command("stop", "envs:stop"),
    Command("report", "ci:report"),
    Command("push", "registry:push"),
    Command("pull", "registry:pull"),
    Command("submit", "slurm:submit", cls="slurm:SubmitCommand"),
    Command("jobs", "slurm:jobs"),
    Command("logs", "slurm:logs"),
    Command("node-check", "slurm:node_check", hidden=True),
    Group("matrix", "The compatibility matrix: list, show, explain, validate.", (
        Command("ls", "matrix:ls"),
        Command("show", "matrix:show"),
        Command("explain", "matrix:explain"),
        Command("validate", "matrix:validate_cmd"),
        Command("update", "matrix:update"),
        Command("check-tags", "ci:check_tags"),
    )),
    Group("project", "Projects: a directory bound to a stack (envman.toml) and the registry of them.", (
        Command("init", "project:init"),
        Command("add", "project:add"),
        Command("trust", "project:trust_cmd"),
        Command("untrust", "project:untrust_cmd"),
        Command("trusted", "project:trusted_cmd"),
        Command("ls", "project:project_ls"),
        Command("show", "project:show"),
        Command("rm", "project:rm"),
    )),
    Group("ci", "CI validation: plan shards of matrix rows, run them, write JUnit/JSON/Markdown.", (
        Command("plan", "ci:plan"),
        Command("run", "ci:run"),
    )),
    Group("export", "Write a project's run as a Kubernetes Job, a Dev Container or a compose file.", (
        Command("k8s", "export:k8s"),
        Command("devcontainer", "export:devcontainer_cmd"),
        Command("compose", "export:compose_cmd"),
    )),
)


def _find(target: str):
    import importlib

    module, name = target.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def _add(to: typer.Typer, c: Command) -> None:
    to.command(c.name, cls=_find(c.cls) if c.cls else None, hidden=c.hidden)(_find(c.target))


def _register() -> None:
    for entry in COMMANDS:
        if isinstance(entry, Group):
            group = typer.Typer(no_args_is_help=True)
            for c in entry.commands:
                _add(group, c)
            app.add_typer(group, name=entry.name, help=entry.help)
        else:
            _add(app, entry)


_register()


def main(argv: list[str] | None = None, *, invocation: tuple[str, ...] | None = None) -> None:
    """The typer CLI behind the one error boundary (:func:`envman.boundary.guarded`).
    ``invocation`` is the console script's words as given, for commands that key a cache on
    them (handed to the commands as the click context's ``obj``)."""
    from envman.boundary import guarded

    _help_width(sys.argv[1:] if argv is None else argv)
    sys.exit(guarded(lambda: _invoke(argv, invocation)))


#: The width of help sent to a pipe or a file: rich assumes 80 columns there and cut option
#: defaults short (``python-build-standa…``).
PIPED_HELP_WIDTH = 160


def _help_width(argv: list[str]) -> None:
    """Help written to a pipe or a file is laid out at :data:`PIPED_HELP_WIDTH` columns, unless
    ``TERMINAL_WIDTH`` or ``COLUMNS`` says otherwise (a terminal keeps its own width)."""
    import os

    if not (not argv or "--help" in argv or "-h" in argv) or sys.stdout.isatty():
        return
    if os.environ.get("TERMINAL_WIDTH") or os.environ.get("COLUMNS"):
        return
    import typer.rich_utils

    typer.rich_utils.MAX_WIDTH = PIPED_HELP_WIDTH


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The click command typer builds from :data:`app`, built once per process (a click command
    keeps no state between invocations; every call gets its own context)."""
    return typer.main.get_command(app)  # type: ignore[return-value]


def _invoke(argv: list[str] | None, invocation: tuple[str, ...] | None = None) -> int:
    """Run the typer app; a usage error (unknown option, bad value, missing argument) becomes the
    same one-line ``UserError`` as every other bad input, not click's framed block."""
    from envman.errors import UserError

    try:  # typer >= 0.17 vendors click as typer._click; older typer uses click itself
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import ClickException, UsageError

    try:
        code = _command()(args=argv, prog_name="envman", standalone_mode=False, obj=invocation)
    except UsageError as exc:
        ctx = exc.ctx
        where = ctx.command_path if ctx is not None else "envman"
        raise UserError(exc.format_message(), where=where, fix=f"see {where} --help") from None
    except ClickException as exc:  # e.g. a file option click could not open
        raise UserError(exc.format_message(), where="envman", fix="see envman --help") from None
    except typer.Abort:
        raise KeyboardInterrupt from None
    except typer.Exit as exc:
        return exc.exit_code
    return code if isinstance(code, int) else 0
