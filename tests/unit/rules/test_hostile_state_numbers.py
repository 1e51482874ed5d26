"""Hostile state and engine data, round 8: numbers in a state file or an image's metadata that are
no time this platform can show (NaN, infinite, year 0 or 10000 in the local time zone) never end
a listing with an internal error; a job record that holds one is not believed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from envman.cli._out import local_time
from envman.cluster import slurm as S
from envman.main import main

PACKAGE = Path(__file__).resolve().parents[3] / "envman"
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
        assert out == "-" or re.fullmatch(r"\d{1,4}-\d\d-\d\d", out)
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


# --------------------------------------------------------------------------- cached smoke reports

from envman.images import build as B  # noqa: E402
from envman.images.store import cached_verdict, checks_summary  # noqa: E402
from envman.state import save_report_json  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
                     | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                     max_leaves=8)


def _good_report() -> dict:
    return B.SmokeReport(stack="torch-2.4.1-cpu-py3.10", image="envman/x:c", image_id="sha256:" + "ab" * 32,
                         overall="pass", reason="", gpus_requested=False, probe={"checks": []}, exit_code=0,
                         stderr_tail="", created=1_700_000_000.0).to_json()


def test_every_field_of_a_report_has_a_declared_type():
    assert set(B._REPORT_TYPES) == set(B.SmokeReport.__dataclass_fields__)


#: A field of a cached report, and a value of the wrong kind for it.
WRONG = [("created", float("nan")), ("created", float("inf")), ("created", "today"), ("created", True),
         ("probe", [1, 2]), ("probe", "x"), ("exit_code", 1.5), ("exit_code", True), ("gpus_requested", 1),
         ("overall", {"a": 1}), ("reason", ["x"]), ("stack", None), ("verdict_image_id", 5), ("promoted", "yes")]


@pytest.mark.parametrize("field,value", WRONG, ids=repr)
def test_a_cached_report_with_a_field_of_the_wrong_kind_is_not_believed(field, value, tmp_path, monkeypatch):
    report = {**_good_report(), field: value}
    assert B.report_from_json(report) is None
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path))
    save_report_json(report["image_id"], report)
    verdict = cached_verdict(report["image_id"])  # never an internal error
    assert verdict is None or verdict.status == "pass"


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(B.SmokeReport)
                                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING])
def test_a_cached_report_without_a_field_it_needs_is_not_believed(field):
    report = _good_report()
    del report[field]
    assert B.report_from_json(report) is None


def test_a_good_cached_report_is_read_back_as_it_was():
    assert B.report_from_json(_good_report()) == B.SmokeReport(**_good_report())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(B._REPORT_TYPES)), _JSON, max_size=6), _JSON)
def test_any_cached_report_is_read_back_typed_or_not_at_all(changes, probe):
    report = {**_good_report(), **changes}
    got = B.report_from_json(report)
    if got is not None:
        for k, types in B._REPORT_TYPES.items():
            assert isinstance(getattr(got, k), types)
    assert isinstance(checks_summary(probe), str)


# --------------------------------------------------------------------------- pins and push records

from envman.images import pins as P  # noqa: E402
from envman.images import remote as RM  # noqa: E402


@pytest.mark.parametrize("at", [float("inf"), float("-inf"), float("nan"), 1e400, "x", None, [1], {"a": 1}], ids=repr)
def test_a_pin_whose_time_is_no_number_is_no_pin(at):
    assert P.load_pin("k", {"k": {"stack": "s", "image_id": "sha256:" + "a" * 64, "at": at}}) is None


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_any_pin_entry_is_a_pin_or_none(raw):
    pin = P.load_pin("k", {"k": raw})
    assert pin is None or isinstance(pin.at, int)


@pytest.mark.parametrize("kept", [[1, 2], "x", 5, None, True], ids=repr)
def test_recording_a_push_replaces_a_registry_entry_of_another_shape(kept, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path))
    path = RM.pushed_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"reg.example": kept, "other.example": {"s": {"ref": "x"}}}))
    path.chmod(0o600)
    ref = "reg.example/envman/s@sha256:" + "c" * 64
    RM._record_push(RM.Pushed("reg.example", "s", ref, "sha256:" + "c" * 64, "sha256:" + "d" * 64, "pass"))
    data = json.loads(path.read_text())
    assert data["reg.example"]["s"]["ref"] == ref and data["other.example"] == {"s": {"ref": "x"}}


# --------------------------------------------------------------------------- every state file's consumer

def _consumers():
    """(name, path of the state file, a believable content, what reads it as a command does)."""
    from envman.cluster import slurm
    from envman.engine import builder
    from envman.images import store
    from envman.project import trust
    from envman.render import rendercache, wheelfacts
    from envman.run import fastpath
    from envman.stack import origins
    from envman import state

    image = "sha256:" + "a" * 64
    reg = RM.parse_registry("reg.example", where="test")
    return [
        ("runs.json", lambda: Path(fastpath.cache_file()),
         {"format": fastpath.CACHE_FORMAT, "runs": {"k": {"deps": [], "images": [], "sources": [], "argv": ["x"],
                                                          "home": "/nonexistent/h", "warnings": ["w"]}}},
         lambda: fastpath.lookup("k")),
        ("renders.json", lambda: Path(rendercache.cache_path()),
         {"format": rendercache.CACHE_FORMAT, "renders": {"k": {"text": "t", "sha256": "s"}}},
         lambda: rendercache.lookup("k")),
        ("pins.json", P.pins_file, {"k": {"stack": "s", "image_id": "i", "at": 1}}, lambda: P.load_pin("k")),
        ("trust.json", trust.trust_path, {"schema": 1, "files": {"/x/envman.toml": {"sha256": "a", "roots": ["/x"]}}},
         lambda: (trust.records(), trust.trusted_entry("/x/envman.toml", "a", "/x"))),
        ("pushed.json", RM.pushed_path, {"reg.example": {"s": {"ref": "reg.example/envman/s@sha256:" + "c" * 64, "time": 1}}},
         lambda: (RM.pushed_digest(reg, "s"), RM.digest_ref("s"), RM.digest_ref("s", registry=reg))),
        ("report", lambda: state.report_path(image), _good_report(), lambda: store.cached_verdict(image)),
        ("slurm job", lambda: slurm._jobs_dir() / "7.json",
         {"id": "7", "project": "p", "stack": "s", "runtime": "docker", "log": "/l", "script": "/s", "submitted": 1.0},
         slurm.load_records),
        ("matrix-origins.json", origins._path, {"q": {"stack": "s", "files": ["/m.toml"]}},
         lambda: origins.missing_files_hint("q")),
        ("wheels.json", lambda: Path(wheelfacts._path()),
         {"format": wheelfacts.CACHE_FORMAT, "wheels": {"/w": {"sig": [1, 2], "sha256": "x"}}},
         lambda: wheelfacts.WheelFacts()._all()),
        ("buildkit-cli.json", lambda: Path(builder._probe_path()),
         {"format": builder.PROBE_FORMAT, "probes": {"k": {"docker": "d", "buildx": True}}},
         lambda: builder._kept_probe("k")),
    ]


CONSUMERS = _consumers()


def _paths(doc, prefix=()):
    """Every key path in ``doc`` (tables and lists), the root first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _replaced(doc, path, value):
    if not path:
        return value
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[path[0]] = _replaced(doc[path[0]], path[1:], value)
    return out


@pytest.mark.parametrize("entry", CONSUMERS, ids=[c[0] for c in CONSUMERS])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_state_file_of_any_shape_is_read_without_an_internal_error(entry, data, tmp_path_factory, monkeypatch):
    """Every value of a believable state file replaced by any JSON (NaN and infinities included,
    which Python's reader gives): what a command reads from it never raises."""
    name, path_fn, good, consume = entry
    tmp = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp / "config"))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp / "cache"))
    paths = list(_paths(good))
    where = data.draw(st.sampled_from(paths))
    doc = _replaced(good, where, data.draw(_JSON))
    path = Path(path_fn())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    consume()


# --------------------------------------------------------------------------- what validates renders

from dataclasses import replace as _replace  # noqa: E402

from envman.errors import RenderError  # noqa: E402
from envman.matrix.validate import validate  # noqa: E402
from envman.render.dockerfile import check_stack  # noqa: E402
from envman.stack.resolve import resolve  # noqa: E402

ROW = "torch-2.4.1-cuda12.4"
_PACKAGES = st.one_of(st.sampled_from(["torch==2.4.1", "torch==2.4.1\n", "torch[cuda]==2.4.1", "torch==2.4.1 ",
                                       " torch==2.4.1", "torch==2.4.1; os_name=='posix'", "torch>=2", "-e x",
                                       "torch==2.4.1+cu124", "torch @ https://x.example/t.whl"]),
                      st.text(st.characters(codec="ascii"), min_size=1, max_size=20).map(lambda t: "torch==" + t))
_URLS = st.one_of(st.none(), st.sampled_from([
    "https://download.pytorch.org/whl/cu124", "http://evil.example/simple", "https://x.example/s --trusted-host y",
    "https://x.example/s\n", "https://x.example/s?token=1", "http://127.0.0.1:9/s", "ftp://x.example/s",
    "https://x.example/aB3kF9xQ2mZ7pL4wR8tYqW/simple", "https://user:pw@x.example/s"]))


def _row_matrix(mini, **kw):
    return _replace(mini, builds=tuple(_replace(b, **kw) if b.name == ROW else b for b in mini.builds))


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(package=_PACKAGES, key=st.sampled_from(["index_url", "extra_index_url", "find_links"]), url=_URLS)
def test_a_row_validates_exactly_when_its_stack_renders(mini, package, key, url):
    """Packages and URLs of a matrix row: ``matrix validate`` reports a problem exactly when render
    would refuse the row (a row that validates but fails at render was issue 23's item 9)."""
    m = _row_matrix(mini, packages=(package,), **{key: url})
    problems = [p for p in validate(m) if p.where.startswith("torch 2.4.1 cu124")]
    try:
        check_stack(resolve(m, ROW))
        renders = True
    except RenderError:
        renders = False
    except Exception:  # the resolver refuses some rows itself: then validation must say so too
        renders = False
    assert renders == (not problems), (package, key, url, problems)


# --------------------------------------------------------------------------- bad input before the engine

@pytest.mark.parametrize("digest", ["x", "", "sha256:" + "a" * 63, "-x", "\x1b[31m", "a" * 10_000], ids=range(6))
def test_pull_refuses_a_malformed_digest_as_bad_input_before_asking_the_engine(digest, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no engine: its error would come first
    with pytest.raises(SystemExit) as e:
        main(["pull", "torch-2.4-cuda12.4", "--registry", "reg.example", "--digest", digest])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--digest" in err and "engine" not in err.lower(), err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400


# --------------------------------------------------------------------------- a registered project's file

@pytest.mark.parametrize("kind,said", [("fifo", "FIFO"), ("directory", "directory"), ("device", "device"),
                                       ("missing", "is gone")])
def test_a_registered_project_whose_file_is_not_a_file_is_named_for_what_it_is(kind, said, tmp_path, monkeypatch, capsys):
    """A FIFO, a folder or a device where the project file was is said to be one, not "gone"."""
    root = tmp_path / "p"
    root.mkdir()
    f = root / "envman.toml"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "directory":
        f.mkdir()
    elif kind == "device":
        f.symlink_to("/dev/zero")
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "projects.json").write_text(json.dumps({"schema": 1, "projects": {"p": {"root": str(root)}}}))
    (cfg / "projects.json").chmod(0o600)
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as e:
        main(["project", "show", "p"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and said in err and len(err.strip().splitlines()) == 1, err
