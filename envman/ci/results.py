"""What ``envman ci run`` finds: one :class:`RowResult` per row, one :class:`StepResult` per step,
their statuses, and the files written from them (``results.json``, JUnit XML, ``summary.md``)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from envman.matrix.model import Matrix

#: Row results, best first. ``not-buildable`` means "could not be validated on this runner".
PASS, CPU_ONLY, FAIL, NOT_BUILDABLE = "pass", "cpu-only", "fail", "not-buildable"
RESULTS = (PASS, CPU_ONLY, FAIL, NOT_BUILDABLE)
#: Step statuses: the row results plus ``skip`` (did not run because an earlier step failed,
#: or its tool is missing). A skip is never counted as a pass.
SKIP = "skip"
STEPS = ("validate", "render", "lint", "build", "smoke")

RESULTS_FILE = "results.json"
JUNIT_FILE = "junit.xml"
SUMMARY_FILE = "summary.md"


def now_utc() -> str:
    """Now, in UTC to the second (ISO 8601): when a row started and finished."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


@dataclass
class StepResult:
    status: str  # pass | fail | skip | not-buildable | cpu-only
    seconds: float = 0.0
    message: str = ""
    detail: str = ""  # a log tail or findings, several lines
    data: dict[str, Any] = field(default_factory=dict)  # step-specific facts (image, hash, findings)


@dataclass
class RowResult:
    row: str
    framework: str
    framework_version: str
    variant: str
    cuda: str | None
    name: str | None = None  # the stack name, None when the row does not resolve
    result: str = FAIL
    reason: str = ""
    steps: dict[str, StepResult] = field(default_factory=dict)
    stack: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    image: str | None = None
    image_id: str | None = None
    render_hash: str | None = None
    promoted: bool = False
    accepted: bool = False  # counts as success for the run's exit code and JUnit
    shard: str | None = None
    runner: dict[str, Any] = field(default_factory=dict)
    started: str = ""
    finished: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def failed(results: Iterable[RowResult | dict]) -> list[str]:
    """Rows that make ``envman ci run`` exit 1: failures, and cpu-only ones not accepted."""
    out = []
    for r in results:
        d = r if isinstance(r, dict) else r.to_json()
        if not d.get("accepted"):
            out.append(d["row"])
    return out


# --- reports written by ci run -----------------------------------------------------------------


def write_report(results: Sequence[RowResult], directory: Path, matrix: Matrix | None = None) -> dict[str, Path]:
    """``results.json`` (a list of row results), ``junit.xml`` and ``summary.md`` in ``directory``."""
    from envman.state import atomic_write
    from envman.ci.report import markdown_summary

    directory.mkdir(parents=True, exist_ok=True)
    data = [r.to_json() for r in results]
    paths = {"results": directory / RESULTS_FILE, "junit": directory / JUNIT_FILE, "summary": directory / SUMMARY_FILE}
    atomic_write(paths["results"], json.dumps(data, indent=2, sort_keys=False) + "\n")
    atomic_write(paths["junit"], junit_xml(data))
    atomic_write(paths["summary"], markdown_summary(data, matrix=matrix))
    for p in paths.values():
        os.chmod(p, 0o644)  # CI artifacts to share; atomic_write's temporary file was private
    return paths


def _classname(row: str) -> str:
    # JUnit consumers (Jenkins, GitLab) split classname at dots into package and class:
    # keep a row's version dots out of it so "torch-2.4.1-cpu" stays one class.
    return "envman." + row.replace(".", "_")


def _xml_char(ch: str) -> bool:
    """Whether XML 1.0 can carry ``ch`` (its Char production)."""
    n = ord(ch)
    return ch in "\t\n\r" or 0x20 <= n <= 0xD7FF or 0xE000 <= n <= 0xFFFD or 0x10000 <= n <= 0x10FFFF


def _xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry (most controls, U+FFFE/U+FFFF, lone
    surrogates) as ``?``: a build log or an image's probe output may contain them."""
    return text if all(map(_xml_char, text)) else "".join(ch if _xml_char(ch) else "?" for ch in text)


def _xml_clean(root: ET.Element) -> None:
    """Every text, tail and attribute value of the tree through :func:`_xml_text` (names of rows
    and probe checks, host names and reasons come from images and runners)."""
    for el in root.iter():
        if el.text:
            el.text = _xml_text(el.text)
        if el.tail:
            el.tail = _xml_text(el.tail)
        for k, v in el.attrib.items():
            el.set(k, _xml_text(v))


def _case(suite: ET.Element, row: str, name: str, seconds: float, status: str, message: str, detail: str,
          accepted_cpu_only: bool) -> str:
    """One testcase; returns the JUnit outcome it recorded (passed/failure/skipped)."""
    case = ET.SubElement(suite, "testcase", name=name, classname=_classname(row), time=f"{max(seconds, 0):.3f}")
    message = _xml_text(message)
    if status == FAIL or (status == CPU_ONLY and not accepted_cpu_only):
        msg = message if status == FAIL else f"cpu-only (not accepted: add --accept-cpu-only): {message}"
        el = ET.SubElement(case, "failure", message=msg[:1000], type=status)
        el.text = _xml_text(detail) or msg
        return "failure"
    if status in (SKIP, NOT_BUILDABLE):
        ET.SubElement(case, "skipped", message=(f"{status}: {message}")[:1000])
        return "skipped"
    if message or detail:
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text(f"{status}: {message}" + (f"\n{detail}" if detail else ""))
    return "passed"


def junit_xml(results: Sequence[dict]) -> str:
    """JUnit XML (the Jenkins/Ant/Surefire dialect, see tests/data/junit.xsd): one testsuite per
    row, one testcase per step and one per probe check (``probe.<check>``)."""
    root = ET.Element("testsuites", name="envman ci")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for r in results:
        row = r["row"]
        suite = ET.SubElement(root, "testsuite", name=row, tests="0", failures="0", errors="0", skipped="0",
                              time="0", timestamp=(r.get("started") or now_utc())[:19],
                              hostname=str((r.get("runner") or {}).get("hostname") or platform.node()))
        props = ET.SubElement(suite, "properties")
        for k in ("name", "result", "reason", "shard", "image", "render_hash"):
            if r.get(k) is not None:
                ET.SubElement(props, "property", name=k, value=_xml_text(str(r[k]))[:1000])
        if r.get("stack"):
            ET.SubElement(props, "property", name="base_image", value=str(r["stack"].get("base_image")))
        counts = {"tests": 0, "failure": 0, "skipped": 0}
        seconds = 0.0
        accepted_cpu = bool(r.get("accepted")) and r.get("result") == CPU_ONLY
        for step in STEPS:
            s = (r.get("steps") or {}).get(step)
            if s is None:
                continue
            outcome = _case(suite, row, step, s.get("seconds", 0.0), s["status"], s.get("message", ""),
                            s.get("detail", ""), accepted_cpu)
            counts["tests"] += 1
            counts[outcome] = counts.get(outcome, 0) + 1
            seconds += s.get("seconds", 0.0)
        for chk in ((r.get("probe") or {}).get("checks") or []):
            st = {"pass": PASS, "fail": FAIL}.get(chk.get("status"), SKIP)
            outcome = _case(suite, row, f"probe.{chk.get('name', '?')}", float(chk.get("seconds") or 0.0), st,
                            str(chk.get("reason") or ""), "", True)
            counts["tests"] += 1
            counts[outcome] = counts.get(outcome, 0) + 1
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failure"]))
        suite.set("skipped", str(counts["skipped"]))
        suite.set("time", f"{seconds:.3f}")
        totals["tests"] += counts["tests"]
        totals["failures"] += counts["failure"]
        totals["skipped"] += counts["skipped"]
        total_time += seconds
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    _xml_clean(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
