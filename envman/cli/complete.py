"""Shell completion of values for the typer declarations: the functions live in
:mod:`envman.run.complete` (which also answers a Tab without typer)."""

from __future__ import annotations

from envman.run.complete import (  # noqa: F401 - the names the CLI modules declare
    MAX_ITEMS, cached_names, complete_flavour, complete_gpu, complete_project, complete_stack, complete_stack_or_project,
    names_from_matrix,
)
