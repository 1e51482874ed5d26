"""``envman ci run`` end to end on stand-in bases: a CPU row that passes its CPU checks, a broken
row whose smoke test must fail, and a row on a base image deleted upstream that, under ``--base
pull`` (no rebuild from NVIDIA's recipe, no registry mirror), must be reported not-buildable (never
a pass; the rebuild itself is tests/docker/test_base_rebuild.py). Then the JUnit XML is checked against a JUnit schema and the
results are turned into the support-matrix page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve, resolve_row
from envman.state import stable_ref

from .conftest import STANDIN_MATRIX

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
XSD = ROOT / "tests" / "data" / "junit.xsd"
CPU, BROKEN, DELETED = "torch-2.13.0-cpu", "torch-2.13.0-cuda12.8", "torch-1.0.0-cuda10.0"


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([STANDIN_MATRIX])


@pytest.fixture(scope="module")
def bases(matrix, standin):
    """Stand-ins for exactly the bases the two buildable rows resolve to; none for the deleted one."""
    rows = {b.name: b for b in matrix.builds}
    deleted = resolve_row(matrix, rows[DELETED])
    assert deleted.base_image_status == "deleted", deleted.base_image
    for name in (CPU, BROKEN):
        standin(resolve_row(matrix, rows[name]).base_image)


@pytest.fixture(scope="module")
def run(bases, docker_engine, wheelhouse, ca_bundle, tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    report = tmp_path_factory.mktemp("report")
    env = {**os.environ, "ENVMAN_STATE_DIR": str(state), "ENVMAN_CONFIG_DIR": str(state / "config")}
    env.pop("ENVMAN_MATRIX", None)
    p = subprocess.run(
        [sys.executable, "-m", "envman", "--matrix", str(STANDIN_MATRIX), "ci", "run",
         "--rows", f"{CPU} {BROKEN}", "--rows", DELETED,
         "--wheelhouse", str(wheelhouse), "--ca-bundle", ca_bundle, "--accept-cpu-only", "--base", "pull",
         "--report", str(report)],
        capture_output=True, text=True, env=env, timeout=3000,
    )
    results = json.loads((report / "results.json").read_text()) if (report / "results.json").exists() else None
    try:
        yield p, report, results
    finally:
        for r in results or []:  # envman's own images of this run (stand-ins are cached fixtures)
            stable = r.get("name") and stable_ref(resolve(load_matrix([STANDIN_MATRIX]), r["name"]))
            for ref in filter(None, (r.get("image"), stable)):
                docker_engine.remove_image(ref, force=True)


def test_exit_status_and_results(run):
    p, report, results = run
    assert results is not None, p.stderr[-3000:]
    assert p.returncode == 1, f"the broken row must fail the run\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    by = {r["row"]: r for r in results}
    assert set(by) == {CPU, BROKEN, DELETED}

    cpu = by[CPU]
    # a CPU stack whose CPU checks pass is a pass, GPU or not
    assert cpu["result"] == "pass", (cpu["reason"], cpu["steps"])
    assert cpu["accepted"] and cpu["promoted"]
    assert [cpu["steps"][s]["status"] for s in ("validate", "render", "build")] == ["pass"] * 3
    assert cpu["steps"]["lint"]["status"] in ("pass", "fail")  # it ran (hadolint is installed with the tests)
    assert cpu["probe"]["overall"] == "pass"
    fw = next(c for c in cpu["probe"]["checks"] if c["name"] == "framework")
    assert fw["status"] == "pass", fw
    assert cpu["stack"]["name"] == "torch-2.13.0-cpu-py3.11" and cpu["timings"]["build"] > 0

    broken = by[BROKEN]
    assert broken["result"] == "fail" and broken["steps"]["smoke"]["status"] == "fail"
    assert not broken["promoted"] and not broken["accepted"]
    assert [c for c in broken["probe"]["checks"] if c["status"] == "fail"]

    gone = by[DELETED]
    assert gone["result"] == "not-buildable", gone
    assert "deleted upstream" in gone["reason"] and "--registry-mirror" in gone["reason"]
    assert gone["steps"]["render"]["status"] == "pass" and gone["steps"]["build"]["status"] == "not-buildable"
    assert gone["image"] is None and gone["probe"] is None
    # no GPU here: only the CPU row can honestly pass
    assert {r["row"] for r in results if r["result"] == "pass"} == {CPU}
    assert (report / "dockerfiles" / f"{CPU}.Dockerfile").is_file()
    if not cpu["steps"]["build"]["data"]["cached"]:  # an image left by an earlier run has no new log
        assert (report / "logs" / f"{CPU}.build.log").is_file()


def test_junit_validates_against_the_schema(run):
    xmlschema = pytest.importorskip("xmlschema")
    _, report, results = run
    xml = (report / "junit.xml").read_text()
    xmlschema.XMLSchema(str(XSD)).validate(xml)
    root = ET.fromstring(xml)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {r["row"] for r in results}
    broken = suites[BROKEN]
    failed = [c.get("name") for c in broken.findall("testcase") if c.find("failure") is not None]
    assert "smoke" in failed and any(n.startswith("probe.") for n in failed)
    gone = suites[DELETED]
    assert gone.find("testcase[@name='build']/skipped") is not None
    assert gone.find("testcase[@name='smoke']/skipped") is not None
    cpu = suites[CPU]
    assert cpu.find("testcase[@name='smoke']/failure") is None  # a CPU pass
    # GPU checks the probe skipped are skipped in JUnit too, never passes
    driver = cpu.find("testcase[@name='probe.driver']")
    assert driver is not None and driver.find("skipped") is not None


def test_summary_and_report_page(run, tmp_path):
    _, report, results = run
    summary = (report / "summary.md").read_text()
    assert f"| {BROKEN} |" in summary and "not buildable here" in summary
    env = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    html = tmp_path / "matrix.html"
    p = subprocess.run([sys.executable, "-m", "envman", "--matrix", str(STANDIN_MATRIX), "report", str(report),
                        "--html", str(html)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    page = html.read_text()
    for r in results:
        assert f'data-row="{r["row"]}" data-result="{r["result"]}"' in page
