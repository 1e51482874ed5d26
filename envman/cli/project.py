"""``envman project ...``, ``envman run`` / ``exec`` / ``shell``, ``envman lock``: projects on stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from envman.errors import counted

from envman.cli.complete import complete_stack, complete_gpu, complete_project
from envman.cli._help import Command, help_columns

from envman.cli._out import console, emit_json, emit_line, tagged
from envman.run import grammar as _grammar

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
_META_CMD = "envman.run.command"
_META_ARGS = "envman.run.args"


# --------------------------------------------------------------------------- shared helpers


def _matrix():
    from envman.cli import matrix_source

    return matrix_source()


def _detect_host():
    from envman.run.command import detect_host

    return detect_host(_matrix())


# --------------------------------------------------------------------------- envman project ...


def init(
    env: Annotated[Optional[str], typer.Option("--env", "--stack", autocompletion=complete_stack, help="The stack, e.g. torch-2.4-cuda12 (default: the one the repository's own pins call for, see envman project detect).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Project name (default: the directory name).")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", autocompletion=complete_gpu, help="Detect for this GPU (matrix GPU name) instead of this host's.")] = None,
    driver: Annotated[Optional[str], typer.Option("--driver", help="Detect for this NVIDIA driver version instead of this host's.")] = None,
) -> None:
    """Write envman.toml in the current directory, register the project and trust the file. Without --stack,
    the stack is the one the repository's own pins call for (envman project detect)."""
    import os

    from envman.project.init import init_project

    result = init_project(Path(os.getcwd()), _matrix(), stack=env, name=name, host=lambda: _host_for(gpu, driver),
                          confirm=_ask if _interactive() else None)
    c = console()
    for line in () if result.asked else result.summary:
        c.print(line, markup=False, highlight=False, soft_wrap=True)
    c.print(result.message, markup=False, highlight=False, soft_wrap=True)


def _interactive() -> bool:
    import sys

    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask(summary: list[str]) -> bool:
    """On a terminal, where the repository contradicts itself: show what was decided, and ask."""
    c = console()
    for line in summary:
        c.print(line, markup=False, highlight=False, soft_wrap=True)
    return typer.confirm(f"the repository contradicts itself (set aside above); use {summary[0].split()[0]}?", default=True)


def _host_for(gpu: Optional[str], driver: Optional[str], sm: Optional[str] = None):
    """This host's GPUs and driver, or the what-if host --gpu/--driver/--sm describe."""
    from envman.run.doctor import what_if_host

    real = _detect_host()
    return what_if_host(real, _matrix(), driver=driver, gpu=gpu, sm=sm) if any((gpu, driver, sm)) else real


def detect(
    path: Annotated[Path, typer.Argument(help="The repository (default: the current directory).")] = Path("."),
    gpu: Annotated[Optional[str], typer.Option("--gpu", autocompletion=complete_gpu, help="Judge for this GPU (matrix GPU name) instead of this host's.")] = None,
    driver: Annotated[Optional[str], typer.Option("--driver", help="Judge for this NVIDIA driver version instead of this host's.")] = None,
    sm: Annotated[Optional[str], typer.Option("--sm", help="Judge for a GPU of this compute capability (e.g. 8.6).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a repository's own pins (requirements, conda, setup/pyproject, Dockerfile, README, imports) and name
    the stack that serves it and runs here, with the evidence. Exit 2 with one line when no stack fits."""
    from envman.errors import UserError
    from envman.project.detect import detect as run_detect, summary_lines

    result = run_detect(path, _matrix().matrix, host=_host_for(gpu, driver, sm))
    if as_json:
        emit_json(result.to_json())
    elif result.problem is None:
        for line in summary_lines(result):
            console().print(line, markup=False, highlight=False, soft_wrap=True)
    if result.problem is not None:
        if as_json:
            raise typer.Exit(2)
        raise UserError(result.problem.what, where=str(path), fix=result.problem.fix)


def add(path: Annotated[Path, typer.Argument(help="The project's root (or its envman.toml).")] = Path(".")) -> None:
    """Register an existing project (and trust its file as it is now) so that `envman run NAME` works from anywhere."""
    from envman.project.file import load_project
    from envman.project.registry import register
    from envman.project.settings import load_user_config, user_for_project
    from envman.project.trust import trust_asks
    from envman.project.trust import trust

    project = load_project(path)
    new = register(project)
    trust(project.real_file, project.digest, root=project.root)
    asks = trust_asks(project)
    gets = user_for_project(load_user_config(), False)[2]  # what trust now gives it from the user config
    said = [f"it asks for {'; '.join(asks)}"] if asks else []
    said += [f"it gets your config's [run] {' and '.join(gets)}"] if gets else []
    console().print(f"{'registered' if new else 'already registered:'} {project.name} → {project.root.resolve()}"
                    + (f" (trusted, {'; '.join(said)})" if said else " (trusted)"),
                    markup=False, highlight=False, soft_wrap=True)


def trust_cmd(path: Annotated[Path, typer.Argument(help="The project file (or its directory).")] = Path(".")) -> None:
    """Trust a project file as it is now (its real path and content hash); any edit needs trust again."""
    from envman.project.file import load_project, unsafe_reason
    from envman.project.trust import trust_asks
    from envman.project.trust import trust

    project = load_project(path)
    trust(project.real_file, project.digest, root=project.root)
    asks = trust_asks(project)
    foreign = unsafe_reason(project.file)
    console().print(f"trusted {project.real_file} (sha256 {project.digest[:16]})"
                    + (f"; it asks for {'; '.join(asks)}" if asks else "")
                    + (f"; note: {foreign}, re-check it when it changes" if foreign else ""),
                    markup=False, highlight=False, soft_wrap=True)


def untrust_cmd(path: Annotated[Path, typer.Argument(help="The project file (or its directory).")] = Path(".")) -> None:
    """Forget the trust in a project file."""
    import os

    from envman.project.file import project_file_path
    from envman.project.trust import untrust

    real = os.path.realpath(project_file_path(path))
    removed = untrust(real)
    console().print(f"{'untrusted' if removed else 'was not trusted:'} {real}", markup=False, highlight=False)


def trusted_cmd(as_json: JsonOpt = False) -> None:
    """List the project files you trust, and whether each is still the content you trusted."""
    import hashlib

    from envman.errors import EnvmanError
    from envman.safefile import read_file
    from envman.project.trust import owner_changed, records

    rows = []
    for real, rec in records().items():
        try:
            state = "current" if hashlib.sha256(read_file(real, what="project file")).hexdigest() == rec["sha256"] else "changed"
            if state == "current" and owner_changed(real, rec):
                state = "new owner"
        except FileNotFoundError:
            state = "missing"
        except EnvmanError:
            state = "unreadable"
        rows.append({"file": real, "sha256": rec["sha256"], "trusted": rec.get("trusted"), "state": state})
    if as_json:
        emit_json(rows)
        return
    if not rows:
        console().print("no trusted project files (envman project trust PATH)")
        return
    for r in rows:
        console().print(f"{r['state']:<10} {r['trusted'] or '':<20} {r['file']}", markup=False, highlight=False)


def project_ls(as_json: JsonOpt = False) -> None:
    """List registered projects (name, root, stack as written in the project file)."""
    from envman.errors import EnvmanError
    from envman.project.file import load_project
    from envman.project.registry import read_registry

    rows = []
    for name, root in read_registry().items():
        row: dict[str, Any] = {"name": name, "root": str(root), "stack": None, "error": None}
        try:
            row["stack"] = load_project(root).stack
        except EnvmanError as exc:
            row["error"] = exc.line()
        rows.append(row)
    if as_json:
        emit_json(rows)
        return
    from envman.cli._out import PlainTable

    console().print(PlainTable(("project", "root", "stack"), (
        (r["name"], r["root"], r["stack"] if r["stack"] else (r["error"], "red")) for r in rows), overflow="fold"))


def show(
    name: Annotated[Optional[str], typer.Argument(help="Registered name or path (default: the project of the current directory).", autocompletion=complete_project)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a project's file, its effective run settings and where each came from."""
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.registry import locate
    from envman.project.image import home_dir
    from envman.project.trust import project_trusted, trust_asks

    project = locate(name)
    matrix = _matrix()
    trusted = project_trusted(project)
    settings = merge_settings(project, load_user_config(), CliOverrides(), trusted=trusted,
                              stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    stack = matrix.resolve(settings.stack)
    doc = {
        "project": project.to_json(),
        "stack": stack.name,
        "settings": settings.to_json(),
        "home": str(home_dir(project)),
        "trusted": trusted,
        "asks": trust_asks(project),
    }
    if as_json:
        emit_json(doc)
        return
    _print_show(doc, project, settings, stack)


def _print_show(doc: dict, project: Any, settings: Any, stack: Any) -> None:
    """``project show``'s lines: the file, each effective setting and its origin, image, HOME, trust."""
    from envman.paths import CONTAINER_HOME
    from envman.state import stable_ref

    c = console()
    p = doc["project"]
    c.print(f"{p['name']}  {p['root']}", markup=False, highlight=False)
    c.print(f"  stack       {settings.stack} → {stack.name}", markup=False, highlight=False)
    origin = dict(settings.origin)
    for k in ("gpus", "shm_size", "command"):
        v = doc["settings"][k]
        c.print(f"  {k:<11} {v if v not in ([], '') else '(image default)'}  [{origin.get(k, '')}]", markup=False, highlight=False)
    if doc["settings"]["environment"]:  # names only: values may be secrets (--json too)
        c.print(f"  {'environment':<11} {', '.join(doc['settings']['environment'])}", markup=False, highlight=False)
    for k in ("mounts", "ports"):
        if doc["settings"][k]:
            c.print(f"  {k:<11} {', '.join(map(str, doc['settings'][k]))}", markup=False, highlight=False)
    if settings.withheld:  # the user config's environment and mounts reach trusted files only
        c.print(f"  {'withheld':<11} your config's [run] {' and '.join(settings.withheld)} (the file is not trusted)",
                markup=False, highlight=False)
    if project.needs_image:
        c.print(f"  image       own image (apt: {', '.join(project.apt) or '-'}; requirements: "
                f"{counted(len(p['requirements']), 'line')})", markup=False, highlight=False)
    else:
        c.print(f"  image       {stable_ref(stack)} (no own image)", markup=False, highlight=False)
    c.print(f"  HOME        {doc['home']} → {CONTAINER_HOME}", markup=False, highlight=False)
    if doc["asks"]:
        state = "trusted" if doc["trusted"] else f"NOT trusted (envman project trust {project.file})"
        c.print(f"  trust       {state}; the file asks for {'; '.join(doc['asks'])}", markup=False, highlight=False)
    else:
        c.print(f"  trust       {'trusted' if doc['trusted'] else 'not needed'} (the file asks for nothing beyond a stack)",
                markup=False, highlight=False)


def rm(name: Annotated[str, typer.Argument(help="Registered project name.", autocompletion=complete_project)]) -> None:
    """Unregister a project (its files and images are left alone; `envman prune` ignores project images)."""
    from envman.project.registry import unregister

    root = unregister(name)
    console().print(f"unregistered {name} ({root})", markup=False, highlight=False)


# --------------------------------------------------------------------------- envman run
#
# `envman run` is the one command whose start-up is the product: it should cost about what
# `docker run` costs. typer coerces every declared parameter when a command runs, so run, exec
# and shell declare none to typer: their words are read with their grammar (envman.run.grammar,
# one table per command: argparse, one-line errors with exit 2). The console script (envman.main)
# serves them without typer at all; these commands are reached only by other forms, such as
# calls of envman.cli.main(). Their --help is made from the same table.

class _PassThroughCommand(Command):
    """Hands every word to the command's grammar (:mod:`envman.run.grammar`); the first ``--``
    starts the command. Its help parameters, made from that grammar by :func:`_help_params`,
    exist only to draw ``--help``."""

    #: the command's name in :data:`envman.run.grammar.GRAMMARS`; set by each subclass
    grammar_name = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = {"ignore_unknown_options": True, "allow_extra_args": True, **(kwargs.get("context_settings") or {})}
        super().__init__(*args, **{**kwargs, "context_settings": settings})

    def parse_args(self, ctx, args):
        from envman.run import grammar

        words = grammar.GRAMMARS[self.grammar_name]
        if grammar.asks_help(words, args):
            self.params = _help_params(words)  # only now: envman --help stays fast
            help_columns(self.params)
            return super().parse_args(ctx, ["--help"])
        from envman.cli._words import keep_command_words

        ctx.meta[_META_ARGS] = list(keep_command_words(ctx, args, _META_CMD))
        return super().parse_args(ctx, [])


def _sentence(text: str) -> str:
    """Help in sentence case, like every other command's: ``run on ...`` -> ``Run on ....``."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _help_signature(words):
    """A signature typer turns into the same help panels as every other command's, from the
    grammar (:class:`envman.run.grammar.Grammar`) that really parses the command."""
    import inspect

    def param(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)

    params = [param(words.target_dest, Annotated[Optional[str], typer.Argument(
        metavar=words.target, help=_sentence(words.target_help), show_default=False)],
        ... if words.target_required else None)]
    for o in words.options:
        if not o.takes_value:
            params.append(param(o.dest, Annotated[bool, typer.Option(*o.flags, help=_sentence(o.help))], False))
        else:
            kind = Optional[list[str]] if o.repeat else Optional[str]
            params.append(param(o.dest, Annotated[kind, typer.Option(
                *o.flags, help=_sentence(o.help), metavar=o.metavar, show_default=False)], None))
    if words.command_help:
        params.append(param("cmd", Annotated[Optional[list[str]], typer.Argument(
            metavar="CMD", help=_sentence(words.command_help), show_default=False)], None))
    return inspect.Signature(params)


def _help_params(words) -> list:
    """The click parameters typer makes of :func:`_help_signature` (for the help panels only)."""
    def show(**_: Any) -> None:
        pass

    show.__signature__ = _help_signature(words)  # type: ignore[attr-defined]
    one = typer.Typer(add_completion=False)
    one.command()(show)
    return list(typer.main.get_command(one).params)


def run(ctx: typer.Context) -> None:
    from envman.run.command import run_cli

    run_cli(ctx.meta.get(_META_ARGS, []), ctx.meta.get(_META_CMD, []), _matrix())


def exec_(ctx: typer.Context) -> None:
    from envman.run.envs import exec_cli

    exec_cli(ctx.meta.get(_META_ARGS, []), ctx.meta.get(_META_CMD, []))


def shell(ctx: typer.Context) -> None:
    from envman.run.command import shell_cli

    shell_cli(ctx.meta.get(_META_ARGS, []), ctx.meta.get(_META_CMD, []), _matrix())


# Their help (the line in envman --help, the summary in their own) is the grammar's.
run.__doc__, exec_.__doc__, shell.__doc__ = (_grammar.GRAMMARS[n].summary for n in ("run", "exec", "shell"))


class RunCommand(_PassThroughCommand):
    grammar_name = "run"


class ExecCommand(_PassThroughCommand):
    grammar_name = "exec"


class ShellCommand(_PassThroughCommand):
    grammar_name = "shell"


def lock(
    project: Annotated[Optional[str], typer.Argument(help="Project: registered name or path (default: the one here).",
                                                     autocompletion=complete_project, show_default=False)] = None,
    upgrade: Annotated[bool, typer.Option("--upgrade", help="Re-resolve the requirements, ignoring the current lock.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write envman.lock: the exact versions and sha256 hashes of the project image's packages."""
    from envman.engine.docker import Engine
    from envman.errors import UserError
    from envman.project.lock import lock_path, lock_text, read_lock
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.image import build_project_image
    from envman.errors import printable
    from envman.project.registry import locate
    from envman.run.command import print_step
    from envman.state import stable_ref

    p = locate(project)
    if not p.requirements.strip():
        raise UserError(f"project {p.name} has no requirements to lock", where=str(p.file),
                        fix='add requirements = "requirements.txt" (or a list) to the project file')
    if not upgrade:
        read_lock(p.root)  # a malformed lock is refused before any build; --upgrade replaces it
    matrix = _matrix()
    settings = merge_settings(p, load_user_config(), CliOverrides(), stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    stack = matrix.resolve(settings.stack)
    with Engine.connect() as engine:
        base = engine.inspect_image(stable_ref(stack))
        if base is None:
            raise UserError(f"no promoted image {stable_ref(stack)} to lock {p.name} on", where=str(p.file),
                            fix=f"envman build {stack.name} (or envman pull {stack.name})")
        before = _lock_or_none(p.root)
        ref = build_project_image(engine, p, stack.name, base.id, on_event=print_step, relock=upgrade,
                                  on_warning=lambda line: emit_line(printable(line), err=True))
    current = read_lock(p.root)
    if current is None:  # never say "written" when nothing was: a read-only checkout warned above
        raise UserError(f"{lock_path(p.root)} was not written", where=str(p.file),
                        fix="make the project folder writable by you, then envman lock again")
    packages = [pin.line() for pin in current.packages]
    kept = before is not None and lock_text(before) == lock_text(current)
    if as_json:
        emit_json({"project": p.name, "lock": str(lock_path(p.root)), "image": ref, "stack": stack.name,
                   "changed": not kept, "packages": packages})
        return
    state = "up to date" if kept else "written"
    what = counted(len(packages), "package") if packages else "0 packages (the stack image already satisfies every requirement)"
    emit_line(printable(f"{lock_path(p.root)}: {state}, {what} on {stack.name} ({ref})"))


def _lock_or_none(root: Path):
    """The project's lock as it is now, or None (absent, or malformed: --upgrade replaces it)."""
    from envman.errors import EnvmanError
    from envman.project.lock import read_lock

    try:
        return read_lock(root)
    except EnvmanError:
        return None

