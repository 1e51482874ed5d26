"""The command-line grammar of ``envman run``, ``envman exec`` and ``envman shell``: one table.

These three commands hand the terminal to ``docker``, so they are parsed without the CLI
framework (its start-up is most of a run's own cost; see :mod:`envman.main`). Each is declared
once here, as a :class:`Grammar` (its positional word, its options, its help), and everything
that reads their words is generated from that declaration through public APIs only:

- :func:`parser`: the ``argparse`` parser that parses the options (no abbreviations: an option is
  accepted exactly as the table spells it, as every other envman command does); :func:`parse`
  reads the plain words of everyday use (``--opt``, ``--opt=V``, ``--opt V``, ``-x``, ``-x V``, one
  positional word) without it, as it would read them, and hands every other line to it;
- :func:`split`: where the options stop and the command starts (``envman run P python -V``), and
  :func:`asks_help`, from the same table (which options take a value);
- the ``--help`` of the three commands, which :mod:`envman.cli.project` builds from the same
  table into the same help panels as every other command's.

Standard library only, and nothing but this module's own code at import: :mod:`envman.main`
reads it before any other part of envman is loaded.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace
    from typing import Iterator, NoReturn, Sequence

#: The options that print the help; every grammar accepts them.
HELP_FLAGS = ("-h", "--help")


class Option:
    """One option: its spellings (``-p``, ``--port``), where the parser stores it (``dest``), its
    help, and what it takes: nothing (a flag, when ``metavar`` is ``None``), one value, or one
    value each time it is given (``repeat``)."""

    __slots__ = ("flags", "dest", "help", "metavar", "repeat")

    def __init__(self, *flags: str, help: str, metavar: str | None = None, repeat: bool = False,
                 dest: str | None = None) -> None:
        self.flags = flags
        self.dest = dest or next(f for f in flags if f.startswith("--"))[2:].replace("-", "_")
        self.help = help
        self.metavar = metavar
        self.repeat = repeat

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None


class Grammar:
    """A command's words: ``envman NAME [OPTIONS] TARGET [CMD ARGS...]``.

    ``target`` is the positional word (its metavar, parser ``dest`` and help; ``required`` or
    not), ``command_help`` the help of the command words (``None``: the command takes none).
    """

    __slots__ = ("name", "summary", "description", "target", "target_dest", "target_help", "target_required",
                 "command_help", "options")

    def __init__(self, name: str, *, summary: str, description: str, target: str, target_dest: str,
                 target_help: str, target_required: bool, command_help: str | None,
                 options: tuple[Option, ...]) -> None:
        self.name = name
        self.summary = summary
        self.description = description
        self.target = target
        self.target_dest = target_dest
        self.target_help = target_help
        self.target_required = target_required
        self.command_help = command_help
        self.options = options

    @property
    def usage(self) -> str:
        target = self.target if self.target_required else f"[{self.target}]"
        return f"envman {self.name} [OPTIONS] {target}" + (" [CMD ARGS...]" if self.command_help else "")

    def option(self, flag: str) -> Option | None:
        """The option spelled ``flag`` exactly (``--port``, ``-p``), else ``None``."""
        for o in self.options:
            if flag in o.flags:
                return o
        return None

    def flags(self) -> list[str]:
        """Every option spelling the command accepts, help included."""
        return [f for o in self.options for f in o.flags] + list(HELP_FLAGS)


_ENV_VAR = Option("-e", "--env-var", metavar="NAME=VALUE", repeat=True,
                  help="environment variable NAME=VALUE, or NAME to pass its value from your environment")

RUN_OPTIONS = (
    Option("--stack", metavar="STACK", help="run on this stack instead of the project's"),
    Option("--gpus", metavar="GPUS",
           help='"all", a count, "device=0,2", or "slurm" (exactly the GPUs Slurm allocated to the job this runs in) '
                "(default: all for a CUDA stack, none for a CPU stack)"),
    Option("--no-gpu", help="run on the CPU only (skips the GPU preflight)"),
    Option("--shm-size", metavar="SIZE", help="size of /dev/shm (default: 8g, at most half the RAM)"),
    Option("-p", "--port", metavar="PORT", repeat=True,
           help="publish PORT or HOST:CONTAINER on 127.0.0.1 (the service must listen on 0.0.0.0 inside)"),
    Option("-v", "--mount", metavar="MOUNT", repeat=True, help="extra bind mount SOURCE:TARGET[:ro]"),
    Option("--network", metavar="MODE",
           help='"project" (default: a network only this project\'s runs of yours share) or "none" (no network)'),
    Option("--allow-dangerous-mount",
           help="let --mount give the container a protected path (engine socket, system directory, home, "
                "credentials); never possible from a file"),
    _ENV_VAR,
    Option("--name", metavar="NAME",
           help="name this environment and its container (letters, digits, _.-): envman exec NAME, "
                "envman stop NAME; envman submit's jobs name theirs after the job"),
    Option("--rebuild", help="rebuild the project image without the cache"),
    Option("--ca-bundle", metavar="FILE",
           help="PEM bundle that apt and pip trust while the project image builds (default: ca_bundle of "
                "config.toml's network table)"),
    Option("--update", help="move the project to the stack's current stable image (runs stay on the image id "
                            "they were pinned to when another user promotes a newer one)"),
    Option("--dry-run", help="preflight, then print the docker command instead of running it (builds and pulls nothing)"),
    Option("--json", dest="as_json", help="with --dry-run: the plan and argv as JSON"),
    Option("-d", "--detach", help="start in the background (named after the project unless --name) and print "
                                  "the container's id; without a command it waits for envman exec"),
)

RUN = Grammar(
    "run",
    summary="Run a command in a project's stack: envman run [OPTIONS] [PROJECT] [CMD ARGS...] (or ... -- CMD ARGS...).",
    description="Run a command in a project's stack. PROJECT is a registered name or a path; without it, the "
                "envman.toml in the current directory or a parent. Everything after PROJECT (or after --) is the "
                "command (default: the project's command, else the image's). The command starts in the directory "
                "under /workspace that matches the current one when that is inside the project.",
    target="PROJECT", target_dest="project", target_help="registered project name or path", target_required=False,
    command_help="the command and its arguments (or after --); default: the project's command, else the image's",
    options=RUN_OPTIONS,
)

SHELL = Grammar(
    "shell",
    summary="An interactive shell (bash, else sh) in a project's stack; every option of envman run.",
    description="An interactive shell (bash, else sh) in a project's stack, with every option of envman run.",
    target="PROJECT", target_dest="project", target_help="registered project name or path", target_required=False,
    command_help=None, options=RUN_OPTIONS,
)

EXEC = Grammar(
    "exec",
    summary="Run a command (default: a shell) in a running named environment, as you, in the matching directory.",
    description="Run a command (default: a shell) in a running environment (envman run --detach or --name) as "
                "you, with HOME at /home/envman, starting in the directory under /workspace that matches the "
                "current one.",
    target="NAME|PROJECT", target_dest="target",
    target_help="the environment's name, or its project's when it has one environment", target_required=True,
    command_help="the command and its arguments (or after --); default: a shell",
    options=(_ENV_VAR, Option("--dry-run", help="print the docker command instead of running it")),
)

#: Every grammar, by command name.
GRAMMARS = {g.name: g for g in (RUN, EXEC, SHELL)}


def parser(grammar: Grammar) -> argparse.ArgumentParser:
    """The ``argparse`` parser of ``grammar``'s options and positional word (not its command
    words: :func:`split` takes those off first). A bad word is one :class:`UserError` line."""
    import argparse

    from envman.errors import UserError

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:  # one line and exit 2, like every other bad input
            fix = f"see envman {grammar.name} --help"
            close = closest_option(grammar, message)
            raise UserError(message, where=f"envman {grammar.name}",
                            fix=f"did you mean {close}? ({fix})" if close else fix)

    def formatter(prog: str) -> argparse.HelpFormatter:  # the terminal's width, without importing shutil
        return argparse.HelpFormatter(prog, width=terminal_columns() - 2)

    p = Parser(prog=f"envman {grammar.name}", usage=grammar.usage, description=grammar.description,
               allow_abbrev=False, formatter_class=formatter)
    p.add_argument(grammar.target_dest, metavar=grammar.target, nargs=None if grammar.target_required else "?",
                   help=grammar.target_help)
    for o in grammar.options:
        if not o.takes_value:
            p.add_argument(*o.flags, dest=o.dest, action="store_true", help=o.help)
        elif o.repeat:
            p.add_argument(*o.flags, dest=o.dest, metavar=o.metavar, action="append", default=[], help=o.help)
        else:
            p.add_argument(*o.flags, dest=o.dest, metavar=o.metavar, help=o.help)
    return p


def terminal_columns(fallback: int = 80) -> int:
    """The columns ``shutil.get_terminal_size`` gives (``COLUMNS`` when a positive number, else the
    terminal on standard output's, else ``fallback``), without importing ``shutil`` and the
    compression modules it loads: argparse asks on every parse, not only for ``--help``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


def closest_option(grammar: Grammar, message: str) -> str | None:
    """The option of ``grammar`` a mistyped one in argparse's "unrecognized arguments: ..."
    ``message`` most likely meant (``--stak`` → ``--stack``), else ``None``."""
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return None
    import difflib

    for word in message[len(prefix):].split():
        if word.startswith("--") and len(word) <= 100:
            close = difflib.get_close_matches(word.split("=", 1)[0], grammar.flags(), n=1, cutoff=0.6)
            if close:
                return close[0]
    return None


#: The most option words one command line may give (``-e K=V`` is two). Far above any real use;
#: the parser's cost grows with the square of their number (20,000 ``-e`` took 8 s), so more is
#: one line, at once.
MAX_OPTION_WORDS = 4096


def parse(grammar: Grammar, words: Sequence[str]) -> SimpleNamespace:
    """``grammar``'s options and positional word, from ``words`` (the command words taken off):
    one attribute per option's ``dest`` and the positional word's, as :func:`parser` sets them."""
    words = list(words)
    if len(words) > MAX_OPTION_WORDS:
        from envman.errors import UserError

        raise UserError(f"{len(words)} option words, more than the {MAX_OPTION_WORDS} one command line may give",
                        where=f"envman {grammar.name}",
                        fix="put the values in the project's envman.toml ([environment], mounts, ports)")
    from types import SimpleNamespace

    plain = parse_plain(grammar, words)
    if plain is not None:
        return plain
    return SimpleNamespace(**vars(parser(grammar).parse_args(words)))


def parse_plain(grammar: Grammar, words: Sequence[str]) -> SimpleNamespace | None:
    """What :func:`parser` makes of ``words`` when every word is plain, without loading
    ``argparse`` (about 4 ms of a run's start): an option spelled exactly as the table spells it,
    as ``--opt``, ``--opt=VALUE``, ``--opt VALUE``, ``-x`` or ``-x VALUE``, whose value (if it takes
    one) starts with no ``-``, and at most one positional word that starts with no ``-``; a
    required positional word given. ``None`` for anything else (help, a short cluster, an unknown
    option, a missing value, a value or word starting with ``-``): the parser reads those and says
    what is wrong."""
    from types import SimpleNamespace

    out: dict[str, object] = {o.dest: None if o.takes_value else False for o in grammar.options if not o.repeat}
    lists: dict[str, list[str]] = {o.dest: [] for o in grammar.options if o.repeat}
    out[grammar.target_dest] = None
    positional = False
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            if positional:
                return None
            out[grammar.target_dest], positional = w, True
            i += 1
            continue
        name, eq, attached = w.partition("=") if w.startswith("--") else (w, "", "")
        o = grammar.option(name)  # the table's exact spellings only: -x or --long
        if o is None:
            return None
        if not o.takes_value:
            if eq:
                return None
            out[o.dest] = True
            i += 1
            continue
        if eq:
            value, i = attached, i + 1
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            value, i = words[i + 1], i + 2
        else:
            return None
        if o.repeat:
            lists[o.dest].append(value)
        else:
            out[o.dest] = value
    if grammar.target_required and not positional:
        return None
    return SimpleNamespace(**out, **lists)


def split_dashdash(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """The words before the first ``--`` (options, positional word, maybe a bare command) and after it."""
    words = list(words)
    if "--" in words:
        i = words.index("--")
        return words[:i], words[i + 1:]
    return words, []


def _scan(grammar: Grammar, words: Sequence[str]) -> Iterator[tuple[int, str | None]]:
    """Walk ``words`` (no ``--`` among them) as the parser reads them: ``(index, flag)`` for each
    option given (a short cluster such as ``-dp80`` gives each of its flags), ``(index, None)``
    for each positional word. An option's value is skipped; a word the table does not know counts
    as an option without a value (the parser rejects it)."""
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            name, attached, _ = w.partition("=")
            yield i, name
            o = grammar.option(name)
            i += 2 if o is not None and o.takes_value and not attached else 1
        elif w.startswith("-") and w != "-":
            step = 1
            for k in range(1, len(w)):
                flag = "-" + w[k]
                yield i, flag
                o = grammar.option(flag)
                if o is None or o.takes_value:
                    if o is not None and k == len(w) - 1:
                        step = 2  # -p 8888: the value is the next word
                    break  # -p8888: the rest is the value; an unknown letter ends the cluster
            i += step
        else:
            yield i, None
            i += 1


def split(grammar: Grammar, words: Sequence[str]) -> tuple[list[str], list[str]]:
    """``envman run [OPTIONS] PROJECT CMD ARGS...``: (the options and PROJECT, the bare command).

    The command starts at the second positional word (the first is PROJECT, or NAME for exec);
    which options take a value comes from ``grammar``. ``words`` are those before ``--``."""
    words = list(words)
    positionals = 0
    for i, flag in _scan(grammar, words):
        if flag is None:
            positionals += 1
            if positionals == 2:
                return words[:i], words[i:]
    return words, []


def asks_help(grammar: Grammar, words: Sequence[str]) -> bool:
    """``-h``/``--help`` among the options (not in the command, not after ``--``)."""
    options, _ = split(grammar, split_dashdash(words)[0])
    return any(flag in HELP_FLAGS for _, flag in _scan(grammar, options))
