"""envman.images.build by rule (docs/security.md, "Mutation testing"): what a build asks of the
engine, every failure line whole, the smoke run's isolation, each verdict the probe's document
can give, when a stable tag moves, which kept report is believed (what prune takes: test_prune.py)."""

from __future__ import annotations

import json

import pytest

from envman.engine.values import GpuRequest
from envman import labels as L
from envman.engine.api import BuildEvent, ContainerInfo, EngineInfo, RunResult
from envman.errors import BuildError
from envman.images import build as B
from envman.images import smokerun as S
from envman.state import load_report, locks_dir, stable_ref
from tests.support.fake_engine import FakeContext, FakeEngine
from tests.support.probe_doc import probe_doc
from tests.support.refusal import refusal

HASH = "ab" * 32


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(B, "_render", lambda stack, options=None, builder="classic", base=None: FakeContext(HASH))


@pytest.fixture
def stack(mini):
    from envman.stack.resolve import resolve

    return resolve(mini, "torch-2.4-cuda12")


def _probe(overall="pass", **extra):
    def run(image, cmd, kw):
        doc = probe_doc(kw["labels"]["envman.name"], overall, "because", **extra)
        return RunResult(1 if overall == "fail" else 0, "noise\n" + json.dumps(doc) + "\n", "e1\ne2")
    return run


# --------------------------------------------------------------------------- build


def test_a_build_asks_for_the_candidate_tag_with_cleared_smoke_labels(stack, monkeypatch):
    from envman.images import store

    monkeypatch.setattr(store, "current_user", lambda: (1001, "alice"))
    engine = FakeEngine()
    b = B.build_stack(engine, stack)
    call = engine.build_calls[0]
    assert call["tag"] == b.ref == f"envman/{stack.name}:{HASH[:16]}"
    assert call["labels"] == {**L.candidate_labels(stack.name, HASH, 1001, "alice"), **L.cleared_smoke_labels()}
    assert (call["nocache"], call["pull"], call["platform"]) == (False, False, None)
    assert (b.render_hash, b.cached, b.image_id) == (HASH, False, engine.inspect_image(b.ref).id)
    log = B.logs_dir() / f"{stack.name}-{HASH[:16]}.log"
    assert b.log_path == str(log) and log.read_text() == "Step 1/2 : FROM base\nbuilt " + b.image_id + "\n"


@pytest.mark.parametrize("nocache,label,recorded,rebuilds", [
    (False, HASH, "", False), (True, HASH, "", True), (False, "cd" * 32, "", True), (False, None, "", True),
    (False, HASH, None, True), (False, HASH, "sha256:" + "e" * 64, True)])
def test_a_candidate_is_reused_only_when_its_render_hash_label_matches_this_user_built_it_and_no_cache_was_not_asked(
        stack, nocache, label, recorded, rebuilds):
    from envman.images.provenance import record_built

    engine = FakeEngine()
    image = engine.add_image(f"envman/{stack.name}:{HASH[:16]}", labels={L.RENDER_HASH: label} if label else {})
    if recorded is not None:  # this user built it (on that base: "" for none)
        record_built(image, f"envman/{stack.name}:{HASH[:16]}", base=recorded)
    b = B.build_stack(engine, stack, nocache=nocache, pull=True)
    assert (len(engine.builds), b.cached) == ((1, False) if rebuilds else (0, True))
    if rebuilds:
        assert (engine.build_calls[0]["nocache"], engine.build_calls[0]["pull"]) == (nocache, True)


def test_a_non_default_platform_is_asked_of_the_engine(stack):
    from dataclasses import replace

    engine = FakeEngine()
    B.build_stack(engine, replace(stack, platform="linux/arm64"))
    assert engine.build_calls[0]["platform"] == "linux/arm64"
    assert B._platform_kw(stack) == {} and B._platform_kw(replace(stack, platform="linux/arm64")) == {"platform": "linux/arm64"}


def test_a_failed_build_says_which_stack_where_the_log_is_and_which_step(stack):
    engine = FakeEngine(fail_build=True, build_error=BuildError("exit 1", log_tail="t"))
    with pytest.raises(BuildError) as e:
        B.build_stack(engine, stack)
    log = B.logs_dir() / f"{stack.name}-{HASH[:16]}.log"
    assert (e.value.what, e.value.where, e.value.fix, e.value.log_tail, e.value.step) == (
        f"build of {stack.name} failed: exit 1", str(log),
        "the failing step and its error lines follow (the full log is this file); fix the matrix row or network options and rerun",
        "t", "Step 1/2 : FROM base")
    assert log.read_text() == "Step 1/2 : FROM base\nexit 1\n\nenvman: build failed: exit 1\n"


def test_a_build_that_reports_no_id_is_read_from_its_tag(stack):
    engine = FakeEngine()
    real = engine.build
    engine.build = lambda *a, **kw: (ev for ev in real(*a, **kw) if ev.kind != "done")
    b = B.build_stack(engine, stack)
    assert b.image_id == engine.inspect_image(b.ref).id


def test_a_lock_held_too_long_is_one_line(stack):
    from filelock import FileLock

    path = locks_dir()
    path.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path / f"{stack.name}.lock")):
        got = refusal(lambda: B.build_stack(FakeEngine(), stack, lock_timeout=0.01))
    assert got == ("EnvmanError", f"another envman build of {stack.name} has held its lock for 0 s",
                   str(path / f"{stack.name}.lock"),
                   "wait for it to finish, or remove the lock file if no envman process is running")


def test_events_reach_the_caller(stack):
    seen = []
    B.build_stack(FakeEngine(), stack, on_event=seen.append)
    assert [e.kind for e in seen] == ["step", "done"]


def test_a_rebuilt_base_comes_first_and_the_stack_then_pulls_nothing(stack, monkeypatch):
    from envman.images import base as basemod

    calls = []
    engine = FakeEngine()
    ensured = basemod.BaseResult("envman/base:t", engine.add_image("envman/base:t"), True, 0.0)
    monkeypatch.setattr(basemod, "ensure_base", lambda engine, builder, base, **kw: calls.append((base, kw)) or ensured)
    monkeypatch.setattr(B, "_render", lambda *a, **kw: FakeContext(HASH, dockerfile="FROM envman/base:t\nRUN x\n"))
    b = B.build_stack(engine, stack, pull=True, nocache=True, base="RECIPE")
    assert calls == [("RECIPE", {"nocache": True, "pull": True, "on_event": None})] and b.base == ensured
    assert engine.build_calls[0]["pull"] is False


# --------------------------------------------------------------------------- smoke


@pytest.mark.parametrize("gpu_engine,require_gpu,bench", [(False, False, False), (True, False, True), (False, True, False)])
def test_the_probe_runs_without_network_with_gpus_only_when_there_are_any(stack, gpu_engine, require_gpu, bench):
    info = EngineInfo(server_version="f", version="f", runtimes=("nvidia", "runc") if gpu_engine else ("runc",))
    engine = FakeEngine(engine_info=info, on_run=_probe())
    if require_gpu and not gpu_engine:
        engine.engine_info = EngineInfo(server_version="f", version="f", runtimes=("nvidia", "runc"))
        engine.info = lambda: info  # the engine says none; the user insists
    image = engine.add_image("envman/x:cand")
    rep = B.smoke_image(engine, stack, "envman/x:cand", require_gpu=require_gpu, bench=bench, timeout=33)
    img, cmd, kw = engine.runs[0]
    assert img == image  # by its ID: the tag is anyone's to move
    assert cmd == ["python", B.IN_IMAGE_PROBE, "--expect", B.IN_IMAGE_STACK, *(["--require-gpu"] if require_gpu else []),
                   *(["--bench"] if bench else [])]
    gpus = gpu_engine or require_gpu
    assert (kw["gpus"], kw["network"], kw["timeout"]) == (GpuRequest("all") if gpus else None, "none", 33)
    assert kw["labels"]["envman.role"] == "smoke" and kw["labels"]["envman.name"] == stack.name
    assert (rep.image_id, rep.gpus_requested, rep.overall, rep.exit_code, rep.stderr_tail) == (image, gpus, "pass", 0, "e1\ne2")


def test_the_smoke_test_runs_the_image_it_judges_not_whatever_its_tag_names_now(stack):
    """Attack (issue 35 item 2, verdicts on a shared engine): ``run_pipeline`` smoke-tests
    ``smoke_image(engine, stack, b.ref, b.image_id)`` and the probe container is started from
    ``b.ref``, the candidate *tag*, while the report (and the verdict label with its
    ``envman.smoke.rootfs``) is written for ``b.image_id``. A neighbour who re-tags the candidate
    ``envman/<stack>:<render hash>`` between the build and the probe has the probe run in their
    image, and the verdict of that run is bound to the victim's layers: a broken (or tampered)
    build is promoted on a test it never took, or a good one fails. The probe must start from the
    image ID it judges."""
    engine = FakeEngine(on_run=_probe())
    ref = f"envman/{stack.name}:{'ab' * 8}"
    mine = engine.add_image(ref, labels={})
    theirs = engine.add_image("neighbour/other:1", labels={})
    engine.tag(theirs, ref)  # re-tagged after the build, before the probe
    rep = B.smoke_image(engine, stack, ref, mine)
    ran_on = engine.inspect_image(engine.runs[-1][0])
    assert ran_on is not None and ran_on.id == mine, "the probe ran in the neighbour's image; the verdict is for mine"
    assert (rep.image, rep.image_id) == (ref, mine)  # the tag stays in the report, for messages
    verdict = engine.inspect_image(rep.verdict_image_id)
    assert verdict.layers == engine.inspect_image(mine).layers  # the verdict image is on my layers


def test_a_tag_moved_while_the_probe_runs_changes_neither_the_image_judged_nor_the_verdict_s_layers(stack):
    """The same race one step later: the candidate's tag moves during the probe. The verdict is
    for the image the probe ran in, and it goes on that image's layers, not the tag's new one."""
    engine = FakeEngine()
    ref = f"envman/{stack.name}:{'ab' * 8}"
    mine = engine.add_image(ref, labels={})
    theirs = engine.add_image("neighbour/other:1", labels={})
    probe = _probe()

    def run(image, cmd, kw):
        engine.tag(theirs, ref)
        return probe(image, cmd, kw)

    engine.on_run = run
    rep = B.smoke_image(engine, stack, ref, mine)
    assert engine.runs[0][0] == mine and rep.image_id == mine
    assert engine.inspect_image(rep.verdict_image_id).layers == engine.inspect_image(mine).layers


def test_a_smoke_test_named_by_tag_alone_runs_and_judges_the_one_image_the_tag_names_when_it_starts(stack):
    """``envman smoke <stack>`` gives the tag only: envman reads its ID once and both runs the
    probe from that ID and writes the verdict for it (one image, whatever the tag does next)."""
    engine = FakeEngine()
    ref = f"envman/{stack.name}:cand"
    first = engine.add_image(ref, labels={})
    theirs = engine.add_image("neighbour/other:1", labels={})
    probe = _probe()
    engine.on_run = lambda image, cmd, kw: (engine.tag(theirs, ref), probe(image, cmd, kw))[1]
    rep = B.smoke_image(engine, stack, ref)
    assert engine.runs[0][0] == first and rep.image_id == first


def test_a_pipeline_whose_candidate_tag_is_moved_after_the_build_smoke_tests_and_promotes_its_own_build(stack,
                                                                                                        monkeypatch):
    """End to end: the neighbour re-tags the candidate between ``build_stack`` and the probe; the
    probe runs in this user's build and the stable tag moves to (a verdict image on) its layers."""
    engine = FakeEngine(on_run=_probe())
    theirs = engine.add_image("neighbour/other:1", labels={})
    real_build = B.build_stack

    def build_then_retag(*a, **kw):
        got = real_build(*a, **kw)
        engine.tag(theirs, got.ref)
        return got

    monkeypatch.setattr(B, "build_stack", build_then_retag)
    run = B.run_pipeline(engine, stack)
    assert run.error is None and run.promoted
    assert engine.runs[0][0] == run.build.image_id != theirs
    stable = engine.inspect_image(stable_ref(stack))
    assert stable.layers == engine.inspect_image(run.build.image_id).layers


def test_the_stderr_kept_is_its_last_20_lines(stack):
    engine = FakeEngine(on_run=lambda i, c, kw: RunResult(1, "", "\n".join(f"l{n}" for n in range(50)) + "\n\n"))
    engine.add_image("envman/x:cand")
    rep = B.smoke_image(engine, stack, "envman/x:cand")
    assert rep.stderr_tail == "\n".join(f"l{n}" for n in range(30, 50)) and rep.overall == "fail"


def test_a_new_candidate_s_verdict_goes_on_an_image_a_promoted_one_s_only_in_the_report(stack):
    engine = FakeEngine(on_run=_probe())
    cand = engine.add_image(f"envman/{stack.name}:cand")
    rep = B.smoke_image(engine, stack, f"envman/{stack.name}:cand", cand)
    assert rep.verdict_image_id and rep.verdict_image_id != cand
    assert L.parse_smoke(engine.inspect_image(rep.verdict_image_id).labels).status == "pass"
    assert load_report(cand)["verdict_image_id"] == rep.verdict_image_id == load_report(rep.verdict_image_id)["verdict_image_id"]
    engine.tag(cand, stable_ref(stack.name))
    builds = len(engine.builds)
    rep = B.smoke_image(engine, stack, stable_ref(stack.name))
    assert rep.verdict_image_id is None and len(engine.builds) == builds and rep.image_id == cand


@pytest.mark.parametrize("change,overall,reason", [
    ({}, "pass", "because"),
    ({"expect": {"found": False, "path": "/x.json"}}, "fail",
     "the probe ran without the stack's expectations (/x.json): nothing was checked against the stack; rebuild the image"),
    ({"expect": {"found": False}}, "fail",
     "the probe ran without the stack's expectations (none given): nothing was checked against the stack; rebuild the image"),
    ({"expect": "not a table"}, "fail",
     "the probe ran without the stack's expectations (none given): nothing was checked against the stack; rebuild the image"),
])
def test_each_verdict_the_probe_s_document_gives(stack, change, overall, reason):
    doc = {**probe_doc(stack.name, "pass", "because"), **change}
    got = B.judge_probe(stack, json.dumps(doc), "", 0)
    assert got[:2] == (overall, reason) and got[2]["overall"] == "pass"


def test_expectations_for_another_stack_name_each_differing_key(stack):
    doc = probe_doc(stack.name, "pass")
    found = dict(doc["expect"]["stack"])
    want = stack.to_json()
    found.update({"framework_version": "0.0", "cuda": "9.9"})
    doc["expect"]["stack"] = found
    assert B.judge_probe(stack, json.dumps(doc), "", 0)[:2] == (
        "fail", f"the probe's expectations are for another stack: framework_version '0.0' (not {want['framework_version']!r}), "
                f"cuda '9.9' (not {want['cuda']!r}); rebuild the image")
    doc["expect"]["stack"] = "not a table"
    assert B.judge_probe(stack, json.dumps(doc), "", 0)[1].startswith(
        f"the probe's expectations are for another stack: framework None (not {want['framework']!r})")


def test_a_probe_that_timed_out_or_printed_nothing_fails(stack):
    assert B.judge_probe(stack, "", "", 0, timed_out=True, timeout=12.6) == ("fail", "probe timed out after 13 s", None)
    assert B.judge_probe(stack, "", "a\nlast\n\n", 3) == (
        "fail", "probe printed no result (exit 3): the probe printed nothing on stdout; stderr: last", None)
    assert B.judge_probe(stack, "", "  ", 3)[1].endswith("; stderr: no output")


def test_report_from_json_takes_only_the_report_s_fields():
    rep = B.SmokeReport("s", "i", "sha256:i", "pass", "r", False, None, 0, "")
    assert B.report_from_json({**rep.to_json(), "unknown": 1}) == rep
    assert rep.promotable_id == "sha256:i" and B.SmokeReport(**{**rep.to_json(), "verdict_image_id": "v"}).promotable_id == "v"


# --------------------------------------------------------------------------- promote


@pytest.mark.parametrize("overall,accept,moves", [("pass", False, True), ("pass", True, True), ("cpu-only", True, True),
                                                  ("cpu-only", False, False), ("fail", True, False), ("fail", False, False)])
def test_the_stable_tag_moves_only_for_a_pass_or_an_accepted_cpu_only(overall, accept, moves):
    engine = FakeEngine()
    image = engine.add_image("envman/s:cand")
    rep = B.SmokeReport("s", "envman/s:cand", image, overall, "", False, None, 0, "")
    assert B.promote(engine, rep, accept_cpu_only=accept) is moves
    assert (engine.inspect_image(stable_ref("s")) is not None) is moves and rep.promoted is moves
    assert (load_report(image) or {}).get("promoted", False) is moves


def test_promoting_what_is_already_stable_writes_only_what_changed():
    engine = FakeEngine()
    image = engine.add_image(stable_ref("s"))
    tags = []
    engine.tag = lambda i, r: tags.append(r)
    rep = B.SmokeReport("s", "x", image, "pass", "", False, None, 0, "")
    assert B.promote(engine, rep) and rep.promoted and load_report(image)["promoted"] is True and tags == []
    B.save_report(B.SmokeReport("s", "x", image, "pass", "changed", False, None, 0, ""))
    assert B.promote(engine, rep) and load_report(image)["reason"] == "changed"  # promoted already: nothing rewritten


@pytest.mark.parametrize("overall,ok", [("pass", True), ("cpu-only", True), ("fail", False)])
def test_a_pipeline_is_ok_unless_its_smoke_failed(stack, overall, ok):
    b = B.BuildResult(stack, "r", "i", HASH, True, 0.0)
    assert B.PipelineResult(b, B.SmokeReport("s", "i", "i", overall, "", False, None, 0, ""), False).ok is ok
    assert B.PipelineResult(b, None, False).ok is False


@pytest.mark.parametrize("kept,require_gpu,smokes", [("pass", False, False), ("cpu-only", False, False),
                                                     ("cpu-only", True, True), ("fail", False, True), (None, False, True),
                                                     ("pass", True, False)])
def test_a_cached_candidate_is_smoke_tested_again_only_when_its_kept_verdict_does_not_do(stack, kept, require_gpu, smokes):
    engine = FakeEngine(engine_info=EngineInfo(server_version="f", version="f", runtimes=("nvidia", "runc")),
                        on_run=_probe("pass"))
    B.build_stack(engine, stack)
    cand = engine.inspect_image(f"envman/{stack.name}:{HASH[:16]}").id
    if kept:
        B.save_report(B.SmokeReport(stack.name, "r", cand, kept, "", False, None, 0, ""))
    phases = []
    res = B.build_smoke_promote(engine, stack, require_gpu=require_gpu, on_phase=phases.append)
    assert phases == ["build", "cached", *(["smoke"] if smokes else [])] and len(engine.runs) == int(smokes)
    assert res.smoke.overall == ("pass" if smokes else kept)


def test_a_fresh_build_s_phases(stack):
    phases = []
    res = B.build_smoke_promote(FakeEngine(on_run=_probe("cpu-only")), stack, accept_cpu_only=True, on_phase=phases.append)
    assert phases == ["build", "built", "smoke"] and res.promoted and res.smoke.overall == "cpu-only"


# --------------------------------------------------------------------------- kept reports


def _cached_candidate(engine, stack):
    image = engine.add_image(f"envman/{stack.name}:{HASH[:16]}")
    return image, B.BuildResult(stack, f"envman/{stack.name}:{HASH[:16]}", image, HASH, True, 0.0)


def test_no_verdict_keeps_no_report(stack):
    engine = FakeEngine()
    _, b = _cached_candidate(engine, stack)
    assert B.kept_report(engine, b) is None


def test_a_verdict_on_the_labels_alone_becomes_a_report(stack):
    engine = FakeEngine()
    image, b = _cached_candidate(engine, stack)
    from envman.images.store import rootfs_digest

    v = L.SmokeVerdict(status="fail", reason="r", gpus_requested=True, image_id="sha256:tested", at=1,
                       rootfs=rootfs_digest(engine.inspect_image(image)))
    engine._images[image].labels.update(v.to_labels())
    rep = B.kept_report(engine, b)
    assert (rep.stack, rep.image, rep.image_id, rep.overall, rep.reason, rep.gpus_requested, rep.probe, rep.exit_code,
            rep.stderr_tail, rep.verdict_image_id) == (stack.name, b.ref, "sha256:tested", "fail", "r", True, None, 1, "",
                                                       image)  # the candidate carries the verdict of sha256:tested


def test_a_cached_report_with_the_same_outcome_is_kept_whole(stack):
    engine = FakeEngine()
    image, b = _cached_candidate(engine, stack)
    B.save_report(B.SmokeReport(stack.name, "x", image, "cpu-only", "cached reason", False, {"k": 1}, 0, "tail"))
    rep = B.kept_report(engine, b)
    assert (rep.overall, rep.reason, rep.probe, rep.stderr_tail, rep.exit_code) == ("cpu-only", "cached reason", {"k": 1},
                                                                                     "tail", 0)


def test_a_verdict_image_s_report_names_the_candidate_it_came_from(stack):
    engine = FakeEngine()
    tested = engine.add_image()
    image, b = _cached_candidate(engine, stack)  # the candidate tag now holds the verdict image
    B.save_report(B.SmokeReport(stack.name, "x", tested, "pass", "", False, None, 0, "", verdict_image_id=image))
    from envman.state import save_report_json

    save_report_json(image, load_report(tested))
    rep = B.kept_report(engine, b)
    assert (rep.image_id, rep.verdict_image_id, rep.promotable_id) == (tested, image, image)


# --------------------------------------------------------------------------- what the build is given


class ScriptedBuilder:
    """A builder that records what it is asked and yields the events it is given."""

    kind = "buildkit"

    def __init__(self, events):
        self.events, self.calls = events, []

    def build(self, context_tar, tag, **kw):
        self.calls.append((tag, kw))
        yield from self.events


def test_the_render_gets_the_stack_options_dialect_and_base(stack, monkeypatch):
    from envman.images import base as basemod

    seen = []
    monkeypatch.setattr(B, "_render", lambda *a: seen.append(a) or FakeContext(HASH, secrets={"idx": b"tok"}))
    monkeypatch.setattr(basemod, "ensure_base", lambda *a, **kw: None)
    builder = ScriptedBuilder([BuildEvent("done", "built", image_id="sha256:x")])
    B.build_stack(FakeEngine(), stack, "OPTIONS", builder=builder, base="BASE")
    assert seen == [(stack, "OPTIONS", "buildkit", "BASE")]
    assert builder.calls == [(f"envman/{stack.name}:{HASH[:16]}", {
        "labels": builder.calls[0][1]["labels"], "nocache": False, "pull": False, "secrets": {"idx": b"tok"}})]


def test_render_asks_the_stack_render_with_default_options(stack, monkeypatch):
    import envman.render.dockerfile as D
    from envman.render.dockerfile import RenderOptions

    monkeypatch.undo()  # the real _render
    seen = []
    monkeypatch.setattr(D, "render_stack", lambda s, o, builder, base: seen.append((s, o, builder, base)) or "CTX")
    assert B._render(stack, None) == "CTX" and B._render(stack, "O", "buildkit", "BASE") == "CTX"
    assert seen == [(stack, RenderOptions(), "classic", None), (stack, "O", "buildkit", "BASE")]


def test_the_build_s_own_id_wins_over_its_tag_and_a_build_without_one_is_its_ref(stack):
    engine = FakeEngine()
    engine.add_image(f"envman/{stack.name}:{HASH[:16]}", "sha256:tag")  # with no render-hash label: rebuilt
    b = B.build_stack(engine, stack, builder=ScriptedBuilder([BuildEvent("step", "s1"), BuildEvent("done", "d", image_id="sha256:own")]))
    assert b.image_id == "sha256:own"
    b = B.build_stack(FakeEngine(), stack, builder=ScriptedBuilder([BuildEvent("step", "s1")]))
    assert b.image_id == f"envman/{stack.name}:{HASH[:16]}"  # nothing reported, nothing tagged: the ref


def test_a_build_that_fails_before_any_step_names_no_step(stack):
    class Failing(ScriptedBuilder):
        def build(self, context_tar, tag, **kw):
            raise BuildError("no daemon", log_tail="")
            yield
    with pytest.raises(BuildError) as e:
        B.build_stack(FakeEngine(), stack, builder=Failing([]))
    assert e.value.step is None


def test_the_log_keeps_each_event_s_text_on_one_line(stack):
    B.build_stack(FakeEngine(), stack, builder=ScriptedBuilder([BuildEvent("step", "\nStep 1\n\n"), BuildEvent("log", "x  "),
                                                                BuildEvent("log", "endX\n"),
                                                                BuildEvent("done", "ok\n", image_id="sha256:i")]))
    assert (B.logs_dir() / f"{stack.name}-{HASH[:16]}.log").read_text() == "\nStep 1\nx  \nendX\nok\n"


def test_a_build_result_s_fields_and_time(stack, monkeypatch):
    import time
    from types import SimpleNamespace

    ticks = iter([100.0, 103.5, 200.0, 201.25])
    monkeypatch.setattr(B, "time", SimpleNamespace(perf_counter=lambda: next(ticks), time=time.time))
    engine = FakeEngine()
    b = B.build_stack(engine, stack)
    assert (b.stack, b.seconds, b.base, b.render_hash) == (stack, 3.5, None, HASH)
    c = B.build_stack(engine, stack)
    assert (c.stack, c.seconds, c.cached, c.render_hash, c.image_id, c.log_path) == (stack, 1.25, True, HASH, b.image_id, None)


def test_ensure_base_gets_this_engine_and_builder(stack, monkeypatch):
    from envman.images import base as basemod

    engine, builder, events = FakeEngine(), ScriptedBuilder([BuildEvent("done", "d", image_id="sha256:i")]), []
    seen = []
    monkeypatch.setattr(basemod, "ensure_base", lambda e, bld, base, **kw: seen.append((e, bld, base, kw["on_event"])))
    B.build_stack(engine, stack, builder=builder, base="BASE", on_event=events.append)
    assert seen == [(engine, builder, "BASE", events.append)]


def test_smoke_defaults_and_what_the_report_keeps(stack):
    engine = FakeEngine(on_run=_probe())
    image = engine.add_image("envman/x:cand")
    rep = B.smoke_image(engine, stack, "envman/x:cand")
    _, cmd, kw = engine.runs[0]
    assert "--bench" not in cmd and kw["timeout"] == 900
    assert (rep.stack, rep.image, rep.image_id, rep.probe["overall"], rep.reason) == (
        stack.name, "envman/x:cand", image, "pass", "because")


def test_the_probe_s_exit_code_and_time_out_reach_the_verdict(stack):
    engine = FakeEngine(on_run=lambda i, c, kw: RunResult(7, "", "boom", timed_out=False))
    engine.add_image("envman/x:cand")
    assert B.smoke_image(engine, stack, "envman/x:cand").reason == (
        "probe printed no result (exit 7): the probe printed nothing on stdout; stderr: boom")
    engine = FakeEngine(on_run=lambda i, c, kw: RunResult(137, "", "", timed_out=True))
    engine.add_image("envman/x:cand")
    assert B.smoke_image(engine, stack, "envman/x:cand", timeout=41).reason == "probe timed out after 41 s"


def test_a_verdict_that_could_not_be_put_on_an_image_names_no_verdict_image(stack, monkeypatch):
    from envman.images import store

    engine = FakeEngine(on_run=_probe())
    image = engine.add_image("envman/x:cand")
    monkeypatch.setattr(store, "record_verdict", lambda engine, name, report: image)  # nothing built
    assert B.smoke_image(engine, stack, "envman/x:cand").verdict_image_id is None


def test_a_probe_document_without_a_reason_has_an_empty_one(stack):
    doc = probe_doc(stack.name, "pass")
    del doc["reason"]
    assert B.judge_probe(stack, json.dumps(doc), "", 0)[:2] == ("pass", "")


def test_cpu_only_is_not_accepted_unless_asked():
    engine = FakeEngine()
    image = engine.add_image("envman/s:cand")
    assert not B.promote(engine, B.SmokeReport("s", "envman/s:cand", image, "cpu-only", "", False, None, 0, ""))


def test_stable_image_is_the_stable_tag_s_image():
    engine = FakeEngine()
    image = engine.add_image(stable_ref("s"))
    assert B.stable_image(engine, "s").id == image and B.stable_image(engine, "t") is None


def test_the_pipeline_passes_every_option_to_the_build_and_smoke_tests_the_candidate(stack, monkeypatch):
    seen = {}
    engine = FakeEngine(on_run=_probe())
    real_build, real_smoke, real_kept = B.build_stack, B.smoke_image, B.kept_report

    def build(e, s, options, **kw):
        seen["build"] = (e, s, options, kw)
        return real_build(e, s)

    def smoke(e, s, ref, image_id, **kw):
        seen["smoke"] = (ref, image_id, kw)
        return real_smoke(e, s, ref, image_id, **kw)
    monkeypatch.setattr(B, "build_stack", build)
    monkeypatch.setattr(B, "smoke_image", smoke)
    monkeypatch.setattr(B, "kept_report", lambda *a: pytest.fail("a fresh candidate has no kept report"))
    events = []
    res = B.build_smoke_promote(engine, stack, "OPT", nocache=True, pull=True, on_event=events.append, builder="BLD",
                                base="BASE")
    assert seen["build"] == (engine, stack, "OPT", {"nocache": True, "pull": True, "on_event": events.append,
                                                    "builder": "BLD", "base": "BASE"})
    assert seen["smoke"] == (res.build.ref, res.build.image_id, {"require_gpu": False})
    monkeypatch.setattr(B, "kept_report", real_kept)  # a cached one has
    B.build_smoke_promote(engine, stack)
    assert seen["build"][3] == {"nocache": False, "pull": False, "on_event": None, "builder": None, "base": None}


def test_expected_render_hashes_are_the_renders_of_both_dialects(stack, monkeypatch):
    seen = []
    monkeypatch.setattr(B, "_render", lambda s, o, kind: seen.append((s, o, kind)) or FakeContext(f"h-{kind}"))
    assert B.expected_render_hashes(stack, "OPT") == {"h-classic", "h-buildkit"}
    assert seen == [(stack, "OPT", "classic"), (stack, "OPT", "buildkit")]


@pytest.mark.parametrize("status,exit_code", [("pass", 0), ("cpu-only", 0), ("fail", 1)])
def test_a_report_made_from_labels_has_the_exit_code_of_its_outcome(stack, status, exit_code):
    from envman.images.store import rootfs_digest

    engine = FakeEngine()
    image, b = _cached_candidate(engine, stack)
    v = L.SmokeVerdict(status=status, image_id=image, at=1, rootfs=rootfs_digest(engine.inspect_image(image)))
    engine._images[image].labels.update(v.to_labels())
    rep = B.kept_report(engine, b)
    assert (rep.exit_code, rep.image_id, rep.verdict_image_id) == (exit_code, image, None)


def test_a_cached_report_naming_a_removed_verdict_image_is_not_kept(stack):
    engine = FakeEngine()
    image, b = _cached_candidate(engine, stack)
    B.save_report(B.SmokeReport(stack.name, "x", image, "pass", "", False, None, 0, "", verdict_image_id="sha256:" + "e" * 64))
    assert B.kept_report(engine, b) is None
    verdict_image = engine.add_image()
    B.save_report(B.SmokeReport(stack.name, "x", image, "pass", "", False, None, 0, "", verdict_image_id=verdict_image))
    assert B.kept_report(engine, b).verdict_image_id == verdict_image


_REPORT = {"stack": "s", "image": "i", "image_id": "sha256:x", "overall": "pass", "reason": "r", "gpus_requested": True,
           "probe": None, "exit_code": 0, "stderr_tail": "", "created": 1.0, "promoted": False, "verdict_image_id": None}


@pytest.mark.parametrize("missing", ["created", "promoted", "verdict_image_id"])
def test_a_cached_report_without_a_field_that_has_a_default_is_read_with_the_default(missing):
    from envman.images.build import SmokeReport, report_from_json

    data = {k: v for k, v in _REPORT.items() if k != missing}
    got = report_from_json(data)
    assert isinstance(got, SmokeReport) and all(getattr(got, k) == v for k, v in data.items())


@pytest.mark.parametrize(("missing", "field", "bad"), [
    (m, f, b) for m in ("created", "promoted") for f, b in (("promoted", "yes"), ("verdict_image_id", 3), ("created", "now"))
    if f != m])
def test_a_missing_field_never_stops_the_check_of_the_fields_after_it(missing, field, bad):
    from envman.images.build import report_from_json

    data = {k: v for k, v in _REPORT.items() if k != missing}
    data[field] = bad
    assert report_from_json(data) is None


def test_a_cached_report_whose_outcome_is_not_the_labels_is_not_kept(stack):
    """A verdict on the labels newer than this user's cached report of another outcome: the
    cached report is stale and is not shown in its place."""
    engine = FakeEngine()
    image, b = _cached_candidate(engine, stack)
    from envman.images.store import rootfs_digest

    B.save_report(B.SmokeReport(stack.name, "x", image, "pass", "stale cached reason", False, {"k": 1}, 0, "tail"))
    v = L.SmokeVerdict(status="fail", reason="r", gpus_requested=True, image_id=image, at=4_000_000_000,
                       rootfs=rootfs_digest(engine.inspect_image(image)))
    engine._images[image].labels.update(v.to_labels())
    rep = B.kept_report(engine, b)
    assert (rep.overall, rep.reason, rep.probe, rep.stderr_tail, rep.exit_code) == ("fail", "r", None, "", 1)


def test_a_smoke_test_first_removes_the_smoke_containers_this_user_s_finished_builds_left(stack):
    """kill -9 during a smoke test leaves its container (the killed process removes it after the
    probe): the next smoke test of this user removes those of this user whose build is over, and
    none whose build still runs."""
    import os

    from filelock import FileLock

    me, other = str(os.getuid()), str(os.getuid() + 4242)
    engine = FakeEngine(on_run=_probe())
    engine.add_image("envman/x:cand")
    live = "a" * 32
    locks_dir().mkdir(parents=True, exist_ok=True)
    held = FileLock(str(S.run_lock_path(live)))
    held.acquire()

    def leftover(cid, state, uid, role=L.ROLE_SMOKE, token=None):
        labels = {L.MANAGED: L.TRUE, L.ROLE: role, L.NAME: stack.name, L.BUILT_BY_UID: uid,
                  **({L.SMOKE_RUN: token} if token else {})}
        engine.add_container(ContainerInfo(cid, cid, "envman/x:cand", state, labels))
    leftover("mine-exited", "exited", me)
    leftover("mine-created", "created", me)
    leftover("mine-running", "running", me)  # untokened and of 1970: far past any time limit
    leftover("mine-live", "running", me, token=live)  # another build of mine, still probing
    leftover("mine-live-exited", "exited", me, token=live)  # ... whose logs it has still to read
    leftover("mine-killed", "running", me, token="b" * 32)  # its build is gone: no lock held
    leftover("theirs-exited", "exited", other)
    leftover("mine-run", "exited", me, role="run")  # not a smoke container
    try:
        B.smoke_image(engine, stack, "envman/x:cand")
    finally:
        held.release()
    left = {c.id for c in engine.list_containers({}, all=True)}
    assert left == {"mine-live", "mine-live-exited", "theirs-exited", "mine-run"}
    labels = engine.runs[0][2]["labels"]
    assert labels[L.BUILT_BY_UID] == me  # its own container says whose it is
    assert S.RUN_TOKEN.fullmatch(labels[L.SMOKE_RUN]) and not S.run_lock_path(labels[L.SMOKE_RUN]).exists()


def test_a_build_s_sweep_inside_another_build_s_probe_window_leaves_that_probe_s_container(stack):
    """End to end: a second build of this user starts its smoke test while the first build's probe
    container has exited but its logs are not yet read; the first container stays."""
    import os

    engine = FakeEngine()
    engine.add_image("envman/x:cand")
    probe, seen = _probe(), []

    def run(image, cmd, kw):
        S.remove_smoke_leftovers(engine, str(os.getuid()))  # the other build's sweep, in the window
        seen.append({c.id for c in engine.list_containers({L.ROLE: L.ROLE_SMOKE}, all=True)})
        return probe(image, cmd, kw)

    engine.on_run = run
    rep = B.smoke_image(engine, stack, "envman/x:cand")
    assert rep.overall == "pass" and len(seen[0]) == 1


@pytest.mark.parametrize("ref, stable", [
    ("envman/torch-2.4.1-cuda12.4-py3.10:latest", True), ("envman/x:latest-0123456789ab", True),
    ("localhost:5000/envman/x:latest", True), ("envman/x:latest-0123456789", False), ("envman/x:latest-XYZ", False),
    ("envman/x:0123456789abcdef", False), ("localhost:5000/envman/x", False), ("envman/x:latest-0123456789abc", False),
])
def test_a_stable_tag_is_latest_or_latest_and_a_content_key(ref, stable):
    """A user row's promoted image (latest-<key>) is as stable as a shipped stack's: prune keeps it."""
    from envman.state import is_stable_tag

    assert is_stable_tag(ref) is stable

