"""The in-container smoke-test probe, seen from the host.

The probe is the package ``envman.probe.app``: small standard-library-only modules that run
on Python 3.6+ (documented in its ``__init__``). ``envman.probe.pyz`` packs them into one
deterministic zipapp, ``probe.pyz``, which render puts in every build context and the image
carries at ``IN_IMAGE_PROBE``; the probe prints one JSON document as the last line of
stdout. This module gives the host that archive, the in-image paths, and the one parser of
the probe's output.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from envman.probe.app.contract import (CHECK_ORDER, EXIT_FAIL, EXIT_OK, EXIT_USAGE, IMAGE_DIR, IN_IMAGE_PROBE,
                           IN_IMAGE_STACK, OVERALL, PROBE_FILE, PROBE_VERSION, STACK_FILE, STATUSES)
from envman.probe.pyz import ProbeSourceMissing, build_pyz

#: The probe package on the host (inside the installed package or the source checkout).
APP_DIR = Path(__file__).resolve().with_name("app")
CHECKS = CHECK_ORDER


@functools.lru_cache(maxsize=1)
def probe_archive() -> bytes:
    """``probe.pyz`` built from this installation's probe package (once per process).

    Raises ``ProbeSourceMissing`` when the package or one of its required modules is missing.
    """
    return build_pyz(APP_DIR)


def parse_output(stdout: str) -> dict[str, Any]:
    """The probe's result document from its stdout (the last non-empty line).

    Raises ``ValueError`` naming what was wrong when there is no JSON document, or it is not
    a probe result.
    """
    lines = [ln for ln in (stdout or "").splitlines() if ln.strip()]
    if not lines:
        raise ValueError("the probe printed nothing on stdout")
    try:
        doc = json.loads(lines[-1])
    except ValueError as e:
        raise ValueError(f"the probe's last stdout line is not JSON ({e}): {lines[-1][:200]!r}") from e
    if not isinstance(doc, dict) or "overall" not in doc or "checks" not in doc:
        raise ValueError(f"not a probe result document: {lines[-1][:200]!r}")
    if doc["overall"] not in OVERALL:
        raise ValueError(f"probe result has an unknown overall status {doc['overall']!r}")
    return doc


__all__ = ["APP_DIR", "CHECKS", "EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "IMAGE_DIR", "IN_IMAGE_PROBE",
           "IN_IMAGE_STACK", "PROBE_FILE", "PROBE_VERSION", "STACK_FILE", "STATUSES", "OVERALL",
           "ProbeSourceMissing", "parse_output", "probe_archive"]
