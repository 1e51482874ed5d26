"""The in-container smoke-test probe.

``probe.py`` beside this file is a self-contained, standard-library-only script (Python 3.6+)
that envman copies into every image as ``/opt/envman/probe.py`` and runs there; it prints
one JSON document as the last line of stdout. This package gives the host side its path and
a parser for its output; the script itself is documented in its module docstring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The script on the host (inside the installed package or the source checkout).
PROBE_PATH = Path(__file__).resolve().with_name("probe.py")

#: Where the script and the resolved stack live inside a built image.
IN_IMAGE_PROBE = "/opt/envman/probe.py"
IN_IMAGE_STACK = "/opt/envman/stack.json"

PROBE_VERSION = 1
CHECKS = ("driver", "runtime", "kernel", "framework", "bench")
OVERALL = ("pass", "cpu-only", "fail")
STATUSES = ("pass", "fail", "skip")

#: Exit statuses of the script.
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def probe_source() -> str:
    """The script's text (to copy into a build context)."""
    return PROBE_PATH.read_text(encoding="utf-8")


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
