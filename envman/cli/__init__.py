"""The ``envman`` command line: a thin typer layer over the domain modules.

One sub-app per noun, each in its own module, imported only when its command runs, so
``envman --help`` stays fast. The console script is :func:`envman.main.main`, which sends a plain
``envman run`` past this module; errors go through its one boundary, :func:`envman.boundary.guarded`.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from envman import __version__

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
    """Options of the root command, shared with sub-commands through ``ctx.obj``."""

    matrix_files: list[Path] = []


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
    STATE.matrix_files = list(matrix or [])


def get_matrix():
    """The matrix for this invocation: shipped files + ENVMAN_MATRIX + --matrix."""
    from envman.matrix.load import get_matrix as _get

    return _get(STATE.matrix_files)


def _register() -> None:
    # Sub-apps are small modules of typer declarations; the heavy domain modules they call are
    # imported inside the command functions.
    from envman.cli import matrix as matrix_cli

    app.add_typer(matrix_cli.app, name="matrix", help="The compatibility matrix: list, show, explain, validate.")
    for mod in _optional_modules():
        if hasattr(mod, "register"):
            mod.register(app)
        else:  # a module with one command named after it
            name = mod.__name__.rsplit(".", 1)[-1]
            app.command(name, help=(getattr(mod, name).__doc__ or "").strip().split("\n")[0])(getattr(mod, name))


def _optional_modules():
    """Command modules added by later features; each exposes ``register(app)``."""
    import importlib

    for name in ("render", "build", "project", "envs", "ci", "registry", "export", "slurm"):
        try:
            yield importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # pragma: no cover - only while a feature is absent
            if exc.name != f"{__name__}.{name}":
                raise


_register()


def main(argv: list[str] | None = None, *, invocation: tuple[str, ...] | None = None) -> None:
    """The typer CLI behind the one error boundary (:func:`envman.boundary.guarded`).
    ``invocation`` is the console script's words as given, for commands that key a cache on
    them (handed to the commands as the click context's ``obj``)."""
    from envman.boundary import guarded

    sys.exit(guarded(lambda: _invoke(argv, invocation)))


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
