"""Probe result documents for fake engines, shaped like the real probe's (``envman/probe/app``), and
the real probe as it ships (``probe_pyz``)."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from envman.stack.names import parse_name


def expectations(stack_name: str) -> dict[str, Any]:
    """What the image's ``/opt/envman/stack.json`` says, for a canonical stack name."""
    q = parse_name(stack_name)
    return {"framework": q.framework, "framework_version": q.version, "cuda": None if q.cpu else q.cuda}


def probe_doc(stack_name: str, overall: str, reason: str = "", checks: list | None = None,
              **extra: Any) -> dict[str, Any]:
    """A probe document that ran against ``stack_name``'s expectations."""
    doc = {"probe_version": 1, "overall": overall, "reason": reason, "checks": checks or [],
           "expect": {"path": "/opt/envman/stack.json", "found": True, "stack": expectations(stack_name)}}
    doc.update(extra)
    return doc


@functools.lru_cache(maxsize=1)
def probe_pyz() -> Path:
    """The probe as it ships (``probe.pyz`` built from this checkout), written once per test
    process into a temporary directory that is removed when the process exits."""
    from envman.probe import PROBE_FILE, probe_archive

    d = Path(tempfile.mkdtemp(prefix="envman-probe-"))
    atexit.register(shutil.rmtree, d, True)
    path = d / PROBE_FILE
    path.write_bytes(probe_archive())
    return path
