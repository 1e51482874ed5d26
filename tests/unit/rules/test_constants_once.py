"""Each value that several modules must agree on is written once, in the module that owns it, and
imported everywhere else: a second spelling is a value that can drift.

Checked on the syntax tree of every envman module (docstrings left out, f-strings read piece by
piece): outside its owner, no string may be the value itself, and for file names and tags, no
string may spell it inside a longer one either (``f"{d}/envman.lock.txt"``). Prose that mentions a
path in a help text or a message is left alone: it names the place, it does not decide it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "envman"


def _value(module: str, name: str) -> str:
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            assert isinstance(node.value, ast.Constant), f"{module}: {name} is not a literal"
            return str(node.value.value)
    raise AssertionError(f"{module} defines no {name}")


#: (owner, constant, how another module may not spell it: "whole" = as a whole string,
#: "inside" = anywhere in a string, "suffix" = at the end of a string or of an f-string's literal piece)
OWNED = [
    ("envman/paths.py", "CONTAINER_HOME", "whole"),
    ("envman/paths.py", "WORKSPACE", "whole"),
    ("envman/stack/names.py", "STACK_NAME_PATTERN", "inside"),
    ("envman/stack/names.py", "PROJECT_NAME_PATTERN", "inside"),
    ("envman/stack/names.py", "APT_PACKAGE_PATTERN", "inside"),
    ("envman/render/imagepaths.py", "LOCK_CONTEXT_FILE", "inside"),
]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def strings(source: str) -> list[tuple[int, str, bool]]:
    """(line, text, is the last literal piece of an f-string or a whole string) for every string
    constant that is not a docstring."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            pieces = [v for v in node.values if isinstance(v, ast.Constant)]
            for v in pieces:
                docs.add(id(v))
                out.append((node.lineno, str(v.value), v is node.values[-1]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            out.append((node.lineno, node.value, True))
    return out


def spellings(source: str, value: str, how: str) -> list[int]:
    """The lines of ``source`` that spell ``value`` in the way ``how`` forbids."""
    hits = []
    for line, text, last in strings(source):
        if how == "whole" and text == value or how == "inside" and value in text \
                or how == "suffix" and last and text.endswith(value):
            hits.append(line)
    return hits


@pytest.mark.parametrize("owner, name, how", OWNED, ids=[n for _, n, _ in OWNED])
def test_a_shared_value_is_spelled_only_by_its_owner(owner: str, name: str, how: str) -> None:
    value = _value(owner, name)
    found = [f"{f.relative_to(ROOT)}:{line}" for f in sorted(PACKAGE.rglob("*.py")) if f.relative_to(ROOT).as_posix() != owner
             for line in spellings(f.read_text(encoding="utf-8"), value, how)]
    assert not found, f"{name} ({value!r}) is spelled again; import it from {owner}: " + ", ".join(found)


def test_the_stable_tag_is_spelled_only_by_the_state_module() -> None:
    """``envman/<stack>:latest`` comes from :func:`envman.state.stable_ref` (or ``STABLE_TAG``)."""
    tag = ":" + _value("envman/state.py", "STABLE_TAG")
    found = [f"{f.relative_to(ROOT)}:{line}" for f in sorted(PACKAGE.rglob("*.py")) if f.name != "state.py"
             for line in spellings(f.read_text(encoding="utf-8"), tag, "suffix")]
    assert not found, "the stable tag is spelled again; use envman.state.stable_ref: " + ", ".join(found)


@pytest.mark.parametrize("source, value, how, lines", [
    ('x = "/home/envman"\n', "/home/envman", "whole", [1]),
    ('"""/home/envman"""\nx = 1\n', "/home/envman", "whole", []),  # a docstring
    ('x = "HOME at /home/envman"\n', "/home/envman", "whole", []),  # prose
    ('x = f"{d}/envman.lock.txt"\n', "envman.lock.txt", "inside", [1]),
    ('x = f"envman/{s}:latest"\n', ":latest", "suffix", [1]),
    ('x = f"envman/{s}:latest-{n}"\n', ":latest", "suffix", []),
    ('x = "a :latest tag changes"\n', ":latest", "suffix", []),
    ('def f():\n    """doc"""\n    return "/workspace"\n', "/workspace", "whole", [3]),
])
def test_what_counts_as_a_second_spelling(source: str, value: str, how: str, lines: list[int]) -> None:
    assert spellings(source, value, how) == lines
