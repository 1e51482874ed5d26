"""Reading imports from a module's syntax tree, for the tests that check the import graph
(tests/unit/rules/test_import_cycles.py) and private names (tests/unit/rules/test_private_names.py)."""

from __future__ import annotations

import ast


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The dotted module a ``from ... import`` statement in ``module`` reads from, relative
    imports resolved (``is_package``: ``module`` is a package's ``__init__``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    pkg = ".".join(base[: len(base) - node.level + 1])
    return f"{pkg}.{node.module}" if node.module else pkg
