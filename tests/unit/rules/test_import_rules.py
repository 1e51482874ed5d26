"""Only the ``envman.engine`` package talks to the container engine.

Outside ``envman/engine/`` no module may:

* import an HTTP or engine client library: ``docker``, ``requests``, ``urllib3``, ``http.client``
  (nor ``http`` itself), ``podman``;
* open a Unix-domain socket (``socket.AF_UNIX``), the engine's transport;
* call the raw request functions of :mod:`envman.engine.socket` (``api_get``, ``image_path``);
* hold an Engine API path (``/containers/...``, ``/images/...``, ``/info``, ``/version``,
  ``/libpod/...``, with or without an ``/vX.Y`` prefix) in a string, plain or f-string.

The rules are checked on the syntax tree of every module, so a comment or a docstring that
mentions them is fine, and an import inside a function is caught like one at the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "envman"
ENGINE = PACKAGE / "engine"
BANNED_MODULES = ("docker", "requests", "urllib3", "http", "podman")
RAW_SOCKET_NAMES = {"api_get", "image_path"}
API_PATH = re.compile(r"^(/v\d+(\.\d+)*)?(/libpod)?/(containers|images|info|version|_ping|distribution|build|exec"
                      r"|networks|volumes|events|system)([/?]|$)")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if ENGINE not in p.parents)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _leading_text(node: ast.AST) -> str | None:
    """The start of a string constant or of an f-string (its first literal part)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def violations(source: str, name: str = "<module>") -> list[str]:
    """Every breach of the rules in one module's source (see the module docstring)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    in_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            out += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in BANNED_MODULES:
                out.append(f"{where}: from {node.module} import ...")
            elif node.module == "socket" and any(a.name == "AF_UNIX" for a in node.names):
                out.append(f"{where}: from socket import AF_UNIX")
            elif node.module == "envman.engine.socket" and {a.name for a in node.names} & RAW_SOCKET_NAMES:
                out.append(f"{where}: raw Engine API request from envman.engine.socket")
        elif isinstance(node, ast.Attribute) and node.attr == "AF_UNIX":
            out.append(f"{where}: a Unix-domain socket (AF_UNIX)")
        elif isinstance(node, ast.Attribute) and node.attr in RAW_SOCKET_NAMES:
            out.append(f"{where}: raw Engine API request .{node.attr}")
        elif id(node) not in docs and id(node) not in in_fstring:
            text = _leading_text(node)
            if text is not None and API_PATH.match(text):
                out.append(f"{where}: Engine API path {text[:40]!r}")
    return out


def test_only_the_engine_package_talks_to_the_engine() -> None:
    found = [v for p in _modules() for v in violations(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE)))]
    assert found == []


def test_the_rules_cover_the_engine_package_itself() -> None:
    """The engine package does what the rest may not (so the rule is not vacuous)."""
    found = [v for p in sorted(ENGINE.glob("*.py")) for v in violations(p.read_text(encoding="utf-8"), p.name)]
    assert any("import docker" in v for v in found)
    assert any("AF_UNIX" in v for v in found)
    assert any("Engine API path" in v for v in found)


@pytest.mark.parametrize("source", [
    "import docker",
    "import docker.errors as de",
    "def f():\n    from docker.utils import parse_repository_tag\n",
    "import requests",
    "from urllib3 import PoolManager",
    "import http.client",
    "from http.client import HTTPConnection",
    "import socket\ns = socket.socket(socket.AF_UNIX)",
    "from socket import AF_UNIX, socket",
    "from envman.engine.socket import api_get",
    "import envman.engine.socket as s\ns.api_get(None, '/x')",
    "x = '/containers/json?all=1'",
    "x = f'/containers/{cid}/json'",
    "x = '/v1.41/images/abc/json'",
    "x = '/v4.0.0/libpod/info'",
    "x = '/info'",
])
def test_each_rule_catches_its_breach(source: str) -> None:
    assert violations(source) != []


@pytest.mark.parametrize("source", [
    "import socket\nwith socket.socket() as s:\n    s.bind(('127.0.0.1', 0))",  # a free TCP port
    "from urllib.parse import quote",
    "from envman.engine.socket import local_socket, NoAnswer",
    "'''GET /containers/json is the engine's; callers ask envman.engine.'''",
    "x = '/workspace/containers'",
    "x = 'see /info'",
    "x = f'{root}/images/x'",
])
def test_what_the_rules_allow(source: str) -> None:
    assert violations(source) == []
