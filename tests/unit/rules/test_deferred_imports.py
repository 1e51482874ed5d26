"""Imports inside functions are the exception: a domain module imports at module level, unless a
start-up reason keeps an import in the function that needs it (``envman --help`` loads only the
CLI; ``envman run`` never loads typer, the matrix, jinja2 or the Docker SDK; a heavy library loads
in the command that uses it). The CLI (``envman/cli/``, ``main.py``, ``boundary.py``) defers what
its commands need, by design. Every deferred import of a domain module is listed in
``deferred_imports.txt`` beside this file (``module: imported``), under the reason it stays in its
function (a ``[group] reason`` line: :data:`GROUPS`): a new one fails here until it is listed under
its reason, and one moved to module level must leave the list too, so the list only shrinks.
Start-up is measured with ``python -X importtime -m envman --help``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "envman"
LISTED = Path(__file__).with_name("deferred_imports.txt")
#: The CLI defers by design; the probe's in-image package and the lock's closure check run in images.
NOT_DOMAIN = ("envman/cli/", "envman/main.py", "envman/boundary.py", "envman/probe/app/", "envman/project/lockcheck.py")


def deferred_imports() -> set[str]:
    """``module: imported`` for each import inside a function of a domain module."""
    found = set()
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_DOMAIN):
            continue
        for fn in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    found |= {f"{rel}: {a.name}" for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found.add(f"{rel}: {'.' * node.level}{node.module}")
    return found


#: Why an import stays in its function: the groups of the list, each named on a ``[group] reason``
#: line that says it in one line.
GROUPS = ("start-up", "cycle", "optional", "split")
#: The group the list's rewrite puts a new import in, until a person names its reason.
UNSORTED = "unsorted"
_HEADER = re.compile(r"^\[(?P<group>[^\]]*)\]\s*(?P<reason>.*)$")


def grouped(text: str | None = None) -> dict[str, tuple[str, list[str]]]:
    """The list by group: ``{group: (its reason, its imports)}``, in the file's order. An import
    before any group line is under the group ``""``."""
    out: dict[str, tuple[str, list[str]]] = {}
    group = ""
    for ln in (LISTED.read_text(encoding="utf-8") if text is None else text).splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        m = _HEADER.match(ln)
        if m:
            group = m.group("group")
            out.setdefault(group, (m.group("reason").strip(), []))
        else:
            out.setdefault(group, ("", []))[1].append(ln.strip())
    return out


def listed() -> set[str]:
    return {entry for _, entries in grouped().values() for entry in entries}


def problems(groups: dict[str, tuple[str, list[str]]]) -> list[str]:
    """What is wrong with the list's groups: an import under no group or an unknown one, a group
    without its one-line reason, an import listed twice."""
    out, seen = [], set()
    for group, (reason, entries) in groups.items():
        if group not in GROUPS:
            out += [f"{e}: under {'no group' if not group else f'[{group}]'} (one of {', '.join(GROUPS)})" for e in entries]
        if group and len(reason.split()) < 5:
            out.append(f"[{group}] has no reason (a line that says why these stay in their function)")
        out += [f"{e}: listed twice" for e in entries if e in seen]
        seen.update(entries)
    return out


def test_every_deferred_import_of_a_domain_module_is_listed():
    new = sorted(deferred_imports() - listed())
    assert not new, "imports inside functions of domain modules: move them to module level, or list them " \
                    f"(with the start-up reason) in {LISTED.name}:\n" + "\n".join(new)


def test_the_list_names_only_imports_that_are_still_deferred():
    stale = sorted(listed() - deferred_imports())
    assert not stale, f"no longer deferred: remove from {LISTED.name}:\n" + "\n".join(stale)


def test_every_listed_import_sits_under_a_group_with_its_reason():
    assert not problems(grouped()), "\n".join(problems(grouped()))
    assert set(grouped()) <= set(GROUPS)


def test_the_group_check_catches_what_it_must():
    ok = "[cycle] the imported module imports this one, directly or not\nenvman/a.py: envman.b\n"
    assert problems(grouped(ok)) == []
    assert problems(grouped("envman/a.py: json\n" + ok)) == ["envman/a.py: json: under no group (one of start-up, "
                                                             "cycle, optional, split)"]
    assert problems(grouped("[cycle]\nenvman/a.py: envman.b\n")) == [
        "[cycle] has no reason (a line that says why these stay in their function)"]
    assert problems(grouped(ok + "[unsorted] the rewrite put these here for review\nenvman/c.py: re\n")) == [
        "envman/c.py: re: under [unsorted] (one of start-up, cycle, optional, split)"]
    assert problems(grouped(ok + "[start-up] not loaded when this module is, so deferred\nenvman/a.py: envman.b\n")) \
        == ["envman/a.py: envman.b: listed twice"]


def test_the_scan_sees_a_deferred_import_and_skips_the_cli(tmp_path, monkeypatch):
    import tests.unit.rules.test_deferred_imports as me

    pkg = tmp_path / "envman"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "dom.py").write_text("import os\n\ndef f():\n    import json\n    from envman import paths\n")
    (pkg / "cli" / "c.py").write_text("def g():\n    import docker\n")
    monkeypatch.setattr(me, "ROOT", tmp_path)
    monkeypatch.setattr(me, "PACKAGE", pkg)
    assert me.deferred_imports() == {"envman/dom.py: json", "envman/dom.py: envman"}


if __name__ == "__main__":  # python -m tests.unit.rules.test_deferred_imports: rewrite the list as the code is
    head = [ln for ln in LISTED.read_text(encoding="utf-8").splitlines() if ln.startswith("#")]
    now, body = deferred_imports(), []
    kept: set[str] = set()
    for group, (reason, entries) in grouped().items():
        still = sorted(e for e in entries if e in now)
        kept.update(still)
        if still:
            body += ["", f"[{group}] {reason}".rstrip(), *still]
    new = sorted(now - kept)
    if new:  # for review: each moves to module level, or under the group that says why it stays
        body += ["", f"[{UNSORTED}] new since the last rewrite: move each to module level, or under its reason", *new]
    LISTED.write_text("\n".join([*head, *body]) + "\n", encoding="utf-8")
