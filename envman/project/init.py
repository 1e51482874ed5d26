"""``envman project init``: a project file for the folder, its stack given or detected from the
repository's own pins, its requirements as a layer on that stack, registered and trusted."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from envman.errors import UserError

if TYPE_CHECKING:
    from envman.host import HostFacts
    from envman.matrix.source import MatrixSource
    from envman.project.detect import Detection
    from envman.project.detect.layer import Layer
    from envman.stack.names import Stack


@dataclass(frozen=True)
class InitResult:
    summary: tuple[str, ...]  # detection's short form (empty when the stack was given)
    message: str  # what was written
    asked: bool = False  # the short form was shown already, with the question


def init_project(cwd: Path, matrix: "MatrixSource", *, stack: str | None, name: str | None,
                 host: Callable[[], "HostFacts"], confirm: Callable[[list[str]], bool] | None = None) -> InitResult:
    """Write ``cwd/envman.toml`` and register the project. ``stack`` (``--stack``) wins; else the
    repository's own pins decide (:func:`envman.project.detect.detect`, judged on ``host()``); a
    repository that names no framework takes the user config's ``[project] stack``. Where the
    repository contradicts itself, ``confirm`` (the short form's lines) may still say no: nothing
    is written then."""
    from envman.project.detect import detect, summary_lines
    from envman.project.detect.layer import requirements_layer, requirements_refusal
    from envman.project.detect.repo import Repository
    from envman.project.file import PROJECT_FILE, check_stack_name
    from envman.project.settings import load_user_config

    file = cwd / PROJECT_FILE
    if os.path.lexists(file):
        raise UserError("already exists", where=str(file), fix="edit it, and register it with: envman project add .")
    if name is not None and ("\n" in name or "\0" in name or not 1 <= len(name) <= 63):
        raise UserError(f"{name[:80]!r} is not a project name", where="--name",
                        fix="1-63 lowercase letters, digits or ._- (starting with a letter or digit)")
    summary: tuple[str, ...] = ()
    detected: str | None = None
    asked = False
    typed = stack
    if stack is not None:
        check_stack_name(stack, where="--env", key="stack")
        # the file gets the pinned name the stack resolves to today, so a newer matrix does not move the project
        resolved = matrix.resolve(stack)
        layer = requirements_layer(Repository.scan(cwd), resolved)
    else:
        found = detect(cwd, matrix.matrix, host=host())
        resolved, layer, summary, detected = _from_detection(found, load_user_config().stack, matrix, cwd)
        if found.decision is not None:
            summary = tuple(summary_lines(found))
            asked = bool(found.decision.conflicts and confirm is not None)
            if asked and confirm is not None and not confirm(list(summary)):
                raise UserError("nothing written: the repository contradicts itself and the detected stack was declined",
                                where=str(cwd), fix="give the stack: envman project init --stack NAME "
                                "(envman project detect --json lists the alternatives)")
    refusal = requirements_refusal(layer)
    if refusal:
        raise UserError(refusal, where=str(cwd), fix="drop or relax that pin in the repository's requirements, or give a "
                        "stack that has it: envman project init --stack NAME")
    return InitResult(summary, _write(cwd, file, resolved.name, name, typed, layer, detected), asked)


def _from_detection(found: "Detection", default: str | None, matrix: "MatrixSource",
                    cwd: Path) -> tuple["Stack", "Layer", tuple[str, ...], str | None]:
    from envman.project.detect.layer import requirements_layer
    from envman.project.detect.repo import Repository

    if found.decision is not None:
        top = found.decided_by(1)
        detected = f"{top[0].where} {top[0].fact.means()}" if top else None
        assert found.layer is not None  # a decision comes with its layer
        return found.decision.stack, found.layer, (), detected
    assert found.problem is not None
    if default is not None and found.problem.what.startswith("nothing in the repository names"):
        resolved = matrix.resolve(default)
        return resolved, requirements_layer(Repository.scan(cwd), resolved), (), None
    raise UserError(found.problem.what, where=str(cwd), fix=found.problem.fix)


def _readable_as_is(cwd: Path, rel: str) -> bool:
    """Whether the project file may name the requirements file as it is: the image build reads
    it with the project file's own rules (UTF-8, no coding line pip would obey, every line one it
    takes)."""
    from envman.project.requirements import check_requirements, read_requirements

    try:
        check_requirements(read_requirements(cwd, rel, where=rel), where=rel)
    except UserError:
        return False
    return True


def _write(cwd: Path, file: Path, stack: str, name: str | None, typed: str | None, layer: "Layer",
           detected: str | None) -> str:
    from envman.project.detect.layer import KEPT
    from envman.project.file import load_project, parse_project
    from envman.project.registry import init_text, register
    from envman.project.trust import trust
    from envman.safefile import toml_module
    from envman.state import atomic_write

    plain = layer.source is not None and "/" not in layer.source and layer.source.endswith(".txt") \
        and all(ln.outcome == KEPT and ln.file == layer.source for ln in layer.lines) \
        and _readable_as_is(cwd, layer.source)
    if plain:
        text = init_text(stack, name, requirements=layer.source, typed=typed, detected=detected)
    elif layer.source is not None:
        text = init_text(stack, name, requirements=layer.source, typed=typed, requirement_list=layer.kept, detected=detected)
    else:
        text = init_text(stack, name, typed=typed, detected=detected)
    parse_project(toml_module().loads(text), file)  # validates --name and the requirements before anything is written
    # 0644: colleagues who run the same project must be able to read it.
    atomic_write(file, text, mode=0o644)
    try:
        project = load_project(file)
        register(project)
    except BaseException:
        file.unlink(missing_ok=True)  # nothing half-done: no file without its registration
        raise
    trust(project.real_file, project.digest, root=project.root)
    if plain:
        uses = f", requirements from {layer.source}"
    elif layer.source is not None:
        uses = f", {len(layer.kept)} requirement{'s' if len(layer.kept) != 1 else ''} from {layer.source}"
    else:
        uses = ""
    return f"wrote {file} and registered project {project.name} (stack {stack}{uses}); run it: envman run {project.name} -- CMD"
