"""Imports inside functions are the exception: a domain module imports at module level, unless a
start-up reason keeps an import in the function that needs it (``envman --help`` loads only the
CLI; ``envman run`` never loads typer, the matrix, jinja2 or the Docker SDK; a heavy library loads
in the command that uses it). The CLI (``envman/cli/``, ``main.py``, ``boundary.py``) defers what
its commands need, by design. Every deferred import of a domain module is listed in
``deferred_imports.txt`` beside this file (``module: imported``): a new one fails here until it is
listed (with the reason in review), and one moved to module level must leave the list too, so the
list only shrinks. Start-up is measured with ``python -X importtime -m envman --help``."""

from __future__ import annotations

import ast
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


def listed() -> set[str]:
    return {ln.strip() for ln in LISTED.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")}


def test_every_deferred_import_of_a_domain_module_is_listed():
    new = sorted(deferred_imports() - listed())
    assert not new, "imports inside functions of domain modules: move them to module level, or list them " \
                    f"(with the start-up reason) in {LISTED.name}:\n" + "\n".join(new)


def test_the_list_names_only_imports_that_are_still_deferred():
    stale = sorted(listed() - deferred_imports())
    assert not stale, f"no longer deferred: remove from {LISTED.name}:\n" + "\n".join(stale)


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
    LISTED.write_text("\n".join([*head, *sorted(deferred_imports())]) + "\n", encoding="utf-8")
