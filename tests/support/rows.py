"""Matrix files of one CPU torch row, written by tests that need a stack of their own."""

from __future__ import annotations


def cpu_torch_matrix(version: str, source: str, packages: str | None = None) -> str:
    """A framework matrix file with one ``torch`` CPU build for Python 3.11. ``packages`` is the
    body of its ``packages`` array (TOML strings), ``torch==VERSION`` when not given; ``source``
    says what the row is for (it is never installed from an index)."""
    if packages is None:
        packages = f'"torch=={version}"'
    return f"""schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "{version}"
variant = "cpu"
python = ["3.11"]
packages = [{packages}]
source = ["{source}"]
status = "confirmed"
"""
