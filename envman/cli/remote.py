"""``envman push`` and ``envman pull``: promoted images through a registry (envman.images.remote)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from envman.cli.complete import complete_stack_or_project

from envman.cli._out import emit_json, emit_line
from envman.errors import printable

Target = Annotated[str, typer.Argument(help="A stack name, or a project (registered name or path): its stack.",
                                       autocompletion=complete_stack_or_project)]
RegistryOpt = Annotated[Optional[str], typer.Option("--registry", help="HOST[:PORT]\\[/PREFIX] (default: \\[registry] default in config.toml).", show_default=False)]
AllowHttp = Annotated[bool, typer.Option("--allow-http", help="Allow a non-loopback registry the engine reaches over plain HTTP.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def target_stack(target: str):
    """``(Stack, ProjectConfig | None)`` for a STACK|PROJECT argument.

    A path (``./x``, ``/x``, ``.``) or a registered project name is a project (its effective
    stack); anything else must be a stack name."""
    from envman.errors import ResolveError, UserError
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.file import PROJECT_FILE
    from envman.project.registry import locate, read_registry
    from envman.stack.names import parse_name
    from envman.cli import matrix_source

    resolve_name = matrix_source().resolve
    is_path = "/" in target or target in (".", "..") or target.endswith(PROJECT_FILE)
    if is_path or target in read_registry():
        project = locate(target)
        settings = merge_settings(project, load_user_config(), CliOverrides(),
                                  stack_is_cpu=lambda s: resolve_name(s).is_cpu)
        return resolve_name(settings.stack), project
    try:
        parse_name(target)
    except ResolveError:
        raise UserError(f"{target!r} is neither a stack name nor a registered project", where="STACK|PROJECT",
                        fix="give a stack (envman matrix ls), a project name (envman project ls) or a project path") from None
    return resolve_name(target), None


def _registry_and_stack(registry: str | None, target: str):
    """The ``[registry]`` settings, the registry to use (``--registry`` or the config's) and the
    stack a target names."""
    from envman.images.remote import choose_registry, load_registry_settings

    settings = load_registry_settings()
    reg = choose_registry(registry, settings)
    stack, _project = target_stack(target)
    return settings, reg, stack


def push(
    target: Target,
    registry: RegistryOpt = None,
    allow_http: AllowHttp = False,
    as_json: JsonOpt = False,
) -> None:
    """Push a stack's promoted image with its smoke verdict; prints the digest reference."""
    from envman.engine.docker import Engine
    from envman.images.remote import push_stack

    settings, reg, stack = _registry_and_stack(registry, target)
    with Engine.connect() as engine:
        started: list[bool] = []

        def progress(line: str) -> None:  # a heading once the upload starts (checks may refuse first)
            if not started:
                started.append(True)
                emit_line(f"pushing {stack.name} to {reg}", err=True)
            emit_line(f"  {line}", err=True)

        pushed = push_stack(engine, stack, reg, allow_http=allow_http or settings.allow_http,
                            on_progress=None if as_json else progress)
    if as_json:
        emit_json(pushed.__dict__)
        return
    emit_line(f"pushed {stack.name} (smoke: {pushed.smoke}) to {reg}", err=True)
    emit_line(pushed.ref)


def pull(
    target: Target,
    registry: RegistryOpt = None,
    digest: Annotated[Optional[str], typer.Option("--digest", help="Pull exactly this manifest digest (sha256:...), as the pusher's envman push printed it.", show_default=False)] = None,
    trust_registry: Annotated[bool, typer.Option("--trust-registry", help="Without --digest or a push of yours: take the tag's current image, vouched for only by labels anyone who can push there writes.")] = False,
    allow_http: AllowHttp = False,
    as_json: JsonOpt = False,
) -> None:
    """Pull a stack's image by a digest you vouch for (--digest, or your own push), check it, and promote it here."""
    from envman.engine.docker import Engine
    from envman.images.remote import pull_stack
    from envman.state import stable_ref

    from envman.images.remote import check_digest

    check_digest(digest)  # bad input is exit 2 before the engine is asked anything
    settings, reg, stack = _registry_and_stack(registry, target)
    with Engine.connect() as engine:
        pulled = pull_stack(engine, stack, reg, digest=digest, allow_http=allow_http or settings.allow_http,
                            trust_registry=trust_registry or settings.trust_registry)
    if as_json:
        emit_json(pulled.__dict__)
        return
    if pulled.note:
        emit_line(f"envman: warning: {printable(pulled.note)}", err=True)
    emit_line(f"pulled {pulled.ref} (smoke: {pulled.smoke}; digest: {pulled.vouched_by}); promoted as "
               f"{stable_ref(stack)}", err=True)
    emit_line(pulled.ref)

