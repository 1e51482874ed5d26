"""Hostile state and engine data, round 8: numbers in a state file or an image's metadata that are
no time this platform can show (NaN, infinite, year 0 or 10000 in the local time zone) never end
a listing with an internal error; a job record that holds one is not believed."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.cli._out import local_time
from envman.cluster import slurm as S
from envman.main import main

PACKAGE = Path(__file__).resolve().parents[2] / "envman"
#: Unix times no local clock shows (year 1 is what the engine reports for an image whose config
#: has no creation time), and values of the wrong kind.
BAD_TIMES = (float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 1e18, 10**400, "x", None, True)
#: Times at the ends of the calendar that fall outside it in some zones: (seconds, zone).
EDGES = ((-62135596800, "America/New_York"), (253402300799, "Asia/Tokyo"), (253402300800, "UTC"))
ZONES = ("UTC", "America/New_York", "Asia/Tokyo", "Pacific/Kiritimati", "Etc/GMT+12")


@pytest.fixture(params=ZONES)
def zone(request, monkeypatch):
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("value", BAD_TIMES, ids=repr)
def test_local_time_shows_a_dash_for_no_time(zone, value):
    assert local_time(value, "%Y-%m-%d %H:%M") == "-"


@pytest.mark.parametrize("value,tz", EDGES)
def test_local_time_shows_a_dash_past_the_ends_of_the_calendar_in_the_zone(value, tz, monkeypatch):
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        assert local_time(value, "%Y-%m-%d") == "-"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**30), max_value=10**30)))
def test_local_time_never_raises(value):
    for tz in ZONES:
        os.environ["TZ"] = tz
        time.tzset()
        out = local_time(value, "%Y-%m-%d")
        assert out == "-" or re.fullmatch(r"\d{4}-\d\d-\d\d", out)
    os.environ.pop("TZ")
    time.tzset()


def test_every_time_the_commands_print_goes_through_local_time():
    """A rule over the code: no command module formats a timestamp itself."""
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "fromtimestamp(" in p.read_text() and p.name != "_out.py" and "probe" not in p.parts]
    assert offenders == []


def _record(**kw):
    doc = {"id": "123", "project": "p", "stack": "s", "runtime": "docker", "log": "/nonexistent/x.log",
           "script": "/x", "submitted": 1_700_000_000, "gpus": 1}
    doc.update(kw)
    return doc


@pytest.mark.parametrize("field,value", [("submitted", v) for v in BAD_TIMES] + [("submitted", v) for v, _ in EDGES if v < 0 or v > S.MAX_SUBMITTED]
                         + [("gpus", -1), ("gpus", 10**30), ("gpus", True), ("submitted", -1)], ids=repr)
def test_a_job_record_with_no_time_or_an_absurd_gpu_count_is_not_believed(field, value):
    assert S._job_record(_record(**{field: value})) is None


def test_a_job_record_at_the_bounds_is_believed():
    assert S._job_record(_record(submitted=0, gpus=0)) is not None
    assert S._job_record(_record(submitted=S.MAX_SUBMITTED, gpus=S.MAX_GPUS)) is not None


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e300", "1e18", "-62135596800", "253402300799"])
@pytest.mark.parametrize("words", [["jobs"], ["jobs", "--json"], ["logs", "123"]])
def test_jobs_and_logs_with_a_record_of_no_time_end_cleanly(text, words, tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    jobs = state / "slurm" / "jobs"
    jobs.mkdir(parents=True)
    f = jobs / "123.json"
    f.write_text(json.dumps(_record()).replace("1700000000", text))
    f.chmod(0o600)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("squeue", "sacct"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(state))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        try:
            main(words)
            code = 0
        except SystemExit as e:
            code = e.code
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    err = capsys.readouterr().err
    assert "internal error" not in err and code in (0, 2), err
