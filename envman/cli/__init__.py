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
from envman.cli._out import emit_line

if TYPE_CHECKING:
    from envman.matrix.source import MatrixSource

_app = typer.Typer(
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
        emit_line(f"envman {__version__}")
        raise typer.Exit()


@_app.callback()
def root(
    matrix: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--matrix",
            "-m",
            help="Extra matrix file (repeatable); also ENVMAN_MATRIX=path:path. Same format as matrices/*.toml.",
            metavar="PATH",
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
    Command("doctor", "doctor:doctor"),
    Command("ls", "doctor:ls"),
    Command("lock", "project:lock"),
    Command("clean", "envs:clean"),
    Command("notebook", "envs:notebook"),
    Command("ps", "envs:ps"),
    Command("stop", "envs:stop"),
    Command("report", "ci:report"),
    Command("push", "remote:push"),
    Command("pull", "remote:pull"),
    Command("submit", "slurm:submit", cls="slurm:SubmitCommand"),
    Command("jobs", "slurm:jobs"),
    Command("logs", "slurm:logs"),
    Command("node-check", "slurm:node_check", hidden=True),
    Group("matrix", "The compatibility matrix: ls, show, explain, validate, update, check-tags.", (
        Command("ls", "matrix:ls"),
        Command("show", "matrix:show"),
        Command("explain", "matrix:explain"),
        Command("validate", "matrix:validate_cmd"),
        Command("update", "matrix:update"),
        Command("check-tags", "ci:check_tags"),
    )),
    Group("project", "Projects: a directory bound to a stack (envman.toml) and the registry of them.", (
        Command("init", "project:init"),
        Command("detect", "project:detect"),
        Command("add", "project:add"),
        Command("trust", "project:trust_cmd"),
        Command("untrust", "project:untrust_cmd"),
        Command("trusted", "project:trusted_cmd"),
        Command("ls", "project:project_ls"),
        Command("show", "project:show"),
        Command("rm", "project:rm"),
    )),
    Group("base", "Base images of your own: make one from the distribution's mirror, for machines with no registry.", (
        Command("make", "base:make"),
    )),
    Group("ci", "CI validation: plan shards of matrix rows, run them, write JUnit/JSON/Markdown.", (
        Command("plan", "ci:plan"),
        Command("run", "ci:run"),
    )),
    Group("cdi", "CDI specs of this host's NVIDIA GPUs, for Podman and other CDI runtimes.", (
        Command("generate", "cdi:generate"),
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
    from envman.cli._help import Command as EnvmanCommand

    to.command(c.name, cls=_find(c.cls) if c.cls else EnvmanCommand, hidden=c.hidden)(_find(c.target))


def _group_typer(entry: Group) -> typer.Typer:
    group = typer.Typer(no_args_is_help=True)
    for c in entry.commands:
        _add(group, c)
    return group


_registered: list[bool] = []


def _register() -> None:
    """Every command of :data:`COMMANDS` on :data:`app` (once; on first use of ``envman.cli.app``)."""
    if _registered:
        return
    _registered.append(True)
    for entry in COMMANDS:
        if isinstance(entry, Group):
            _app.add_typer(_group_typer(entry), name=entry.name, help=entry.help)
        else:
            _add(_app, entry)


def __getattr__(name: str):
    """``envman.cli.app``: the typer app with every command registered (the whole tree, for
    tools and tests); the console script builds only the commands it runs (:func:`_command`)."""
    if name == "app":
        _register()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _LazyGroup(typer.core.TyperGroup):
    """The root command: the click command of an entry of :data:`COMMANDS` is built when it is
    first asked for, so ``envman project ls`` builds the ``project`` group and nothing else
    (typer's reflection over every command's signature, and their modules' imports, were a
    fifth of each command's start-up). Its own help (``envman --help``) lists every command from
    a stand-in that carries what the list shows (name, help, hidden), not the whole command."""

    _listing = False

    def list_commands(self, ctx) -> list[str]:
        return [entry.name for entry in COMMANDS]

    def format_help(self, ctx, formatter) -> None:
        from envman.cli._help import print_root_help

        self._listing = True
        try:
            listed = [self.get_command(ctx, name) for name in self.list_commands(ctx)]
            if not print_root_help(self, ctx, [c for c in listed if c is not None]):
                super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx, args):
        """typer's, with its "Did you mean" drawn from every command, built or not."""
        from difflib import get_close_matches

        try:
            return super().resolve_command(ctx, args)
        except typer.TyperException as e:
            if not usage_error(e):
                raise
            suggest = getattr(self, "suggest_commands", True)
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args and suggest else []
            if matches and "Did you mean" not in e.message:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands:
            entry = next((e for e in COMMANDS if e.name == cmd_name), None)
            if entry is None:
                return None
            if self._listing:
                return _listed(entry)
            self.commands[cmd_name] = build_command(entry)
        return self.commands[cmd_name]


def _listed(entry: Command | Group):
    """What the root help shows of an entry: its name, its help (a group's, or the command
    function's docstring, as typer reads it) and whether it is hidden."""
    import inspect

    if isinstance(entry, Group):
        return typer.core.TyperGroup(name=entry.name, help=entry.help)
    return typer.core.TyperCommand(name=entry.name, help=inspect.getdoc(_find(entry.target)), hidden=entry.hidden)


def build_command(entry: Command | Group):
    """The click command of one entry, as typer builds it inside the whole tree."""
    from typer.models import TyperInfo

    if isinstance(entry, Group):
        more = {"suggest_commands": _app.suggest_commands} if hasattr(_app, "suggest_commands") else {}
        return typer.main.get_group_from_info(
            TyperInfo(_group_typer(entry), name=entry.name, help=entry.help),
            pretty_exceptions_short=_app.pretty_exceptions_short, rich_markup_mode=_app.rich_markup_mode, **more)
    one = typer.Typer()
    _add(one, entry)
    return typer.main.get_command_from_info(one.registered_commands[0],
                                            pretty_exceptions_short=_app.pretty_exceptions_short,
                                            rich_markup_mode=_app.rich_markup_mode)


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
    ``TERMINAL_WIDTH`` or ``COLUMNS`` says otherwise (a terminal keeps its own width): through
    ``COLUMNS``, which rich reads when it lays out the help (the process only prints and exits)."""
    import os

    options = argv[:argv.index("--")] if "--" in argv else argv  # after --: a command's words
    if not (not argv or "--help" in options or "-h" in options) or sys.stdout.isatty():
        return
    if os.environ.get("TERMINAL_WIDTH") or os.environ.get("COLUMNS"):
        return
    os.environ["COLUMNS"] = str(PIPED_HELP_WIDTH)


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The root click command (:class:`_LazyGroup`: its commands are built as they are asked for),
    built once per process (a click command keeps no state between invocations; every call gets
    its own context). When ``envman.cli.app`` was asked for, its whole registered tree."""
    if _registered:
        return typer.main.get_command(_app)  # type: ignore[return-value]
    _app.info.cls = _LazyGroup
    try:
        return typer.main.get_command(_app)  # type: ignore[return-value]
    finally:
        _app.info.cls = None


def usage_error(exc: typer.TyperException) -> bool:
    """A usage error (unknown option or command, bad value, missing argument): typer's public
    ``TyperException`` with the usage exit code, 2 (its other errors exit 1). envman uses typer's
    public API only (docs/design.md, Start-up and the CLI)."""
    return exc.exit_code == 2


def _invoke(argv: list[str] | None, invocation: tuple[str, ...] | None = None) -> int:
    """Run the typer app; a usage error (unknown option, bad value, missing argument) becomes the
    same one-line ``UserError`` as every other bad input, not click's framed block."""
    from envman.errors import UserError

    try:
        code = _command()(args=argv, prog_name="envman", standalone_mode=False, obj=invocation)
    except typer.TyperException as exc:
        if not usage_error(exc):  # e.g. a file option that could not be opened
            raise UserError(exc.format_message(), fix="see envman --help") from None
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path if ctx is not None else "envman"
        # the line already starts "envman: error:": a where of "envman" alone would say it twice
        raise UserError(exc.format_message(), where=path if path != "envman" else None,
                        fix=f"see {path} --help") from None
    except typer.Abort:
        raise KeyboardInterrupt from None
    except typer.Exit as exc:
        return exc.exit_code
    return code if isinstance(code, int) else 0
