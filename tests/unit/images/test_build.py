"""Build → smoke → promote logic against a fake engine (no daemon needed)."""

import json
import os
import threading

import pytest
from pathlib import Path

from tests.support.fake_engine import FakeContext, FakeEngine
from tests.support.probe_doc import probe_doc

from envman.engine.values import GpuRequest
from envman.images import build as B, prune as P
from envman.engine.api import EngineInfo, RunResult
from envman.errors import BuildError


def pipeline_engine(probe_overall: str = "pass", *, fail_build: bool = False, gpu: bool = False) -> FakeEngine:
    """The shared fake engine whose probe says ``probe_overall`` (``engine.outcome["overall"]``, changeable)."""
    outcome = {"overall": probe_overall}

    def probe(image, cmd, kw):
        doc = probe_doc(kw["labels"]["envman.name"], outcome["overall"], "because")
        return RunResult(1 if outcome["overall"] == "fail" else 0, "noise\n" + json.dumps(doc) + "\n", "")

    info = EngineInfo(server_version="fake", version="fake", runtimes=("nvidia", "runc") if gpu else ("runc",))
    engine = FakeEngine(engine_info=info, fail_build=fail_build, on_run=probe, build_delay=0.05)
    engine.outcome = outcome  # type: ignore[attr-defined]
    return engine


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(B, "_render", lambda stack, options=None, builder="classic", base=None: FakeContext("ab" * 32))


@pytest.fixture
def stack(mini):
    from envman.stack.resolve import resolve

    return resolve(mini, "torch-2.4-cuda12")


def test_second_build_of_unchanged_stack_does_no_docker_build(stack):
    eng = pipeline_engine()
    first = B.build_stack(eng, stack)
    second = B.build_stack(eng, stack)
    assert len(eng.builds) == 1 and not first.cached and second.cached
    assert second.ref == first.ref == f"envman/{stack.name}:{'ab' * 8}"


def test_a_no_op_build_of_a_promoted_stack_writes_nothing(stack):
    from envman.state import report_path

    eng = pipeline_engine()
    first = B.build_smoke_promote(eng, stack)
    assert first.promoted
    report = report_path(first.build.image_id)
    before = (report.read_bytes(), report.stat().st_mtime_ns)
    tags = []
    eng.tag = lambda image, ref: tags.append(ref)
    again = B.build_smoke_promote(eng, stack)
    assert again.promoted and again.build.cached and again.smoke.overall == "pass"
    assert tags == [] and len(eng.runs) == 1  # no re-tag, no second probe
    assert (report.read_bytes(), report.stat().st_mtime_ns) == before


def test_concurrent_builds_of_one_stack_build_once(stack):
    eng = pipeline_engine()
    results = []
    threads = [threading.Thread(target=lambda: results.append(B.build_stack(eng, stack))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(eng.builds) == 1 and sorted(r.cached for r in results) == [False, True, True, True]


def test_passing_smoke_promotes(stack):
    eng = pipeline_engine("pass")
    res = B.build_smoke_promote(eng, stack)
    assert res.promoted and eng.image_exists(B.stable_ref(stack.name))
    assert "--require-gpu" not in eng.runs[0][1] and eng.runs[0][2]["gpus"] is None
    assert eng.runs[0][2]["network"] == "none"


def test_cpu_only_promotes_only_when_accepted(stack):
    eng = pipeline_engine("cpu-only")
    assert not B.build_smoke_promote(eng, stack).promoted
    assert not eng.image_exists(B.stable_ref(stack.name))
    assert B.build_smoke_promote(eng, stack, accept_cpu_only=True).promoted


def test_failing_smoke_leaves_previous_stable_untouched_and_keeps_report(stack, monkeypatch):
    eng = pipeline_engine("pass")
    B.build_smoke_promote(eng, stack)
    before = eng.inspect_image(B.stable_ref(stack.name))
    monkeypatch.setattr(B, "_render", lambda s, o=None, builder="classic", base=None: FakeContext("cd" * 32))
    eng.outcome["overall"] = "fail"
    res = B.build_smoke_promote(eng, stack)
    assert not res.promoted and res.smoke.overall == "fail"
    assert eng.inspect_image(B.stable_ref(stack.name)) == before
    saved = B.load_report(res.build.image_id)
    assert saved["overall"] == "fail" and saved["promoted"] is False


def test_require_gpu_is_passed_to_probe_and_engine(stack):
    eng = pipeline_engine("pass", gpu=True)
    B.build_smoke_promote(eng, stack, require_gpu=True)
    image, cmd, kw = eng.runs[0]
    assert "--require-gpu" in cmd and kw["gpus"] == GpuRequest("all")


def test_build_failure_names_log(stack):
    eng = pipeline_engine(fail_build=True)
    with pytest.raises(BuildError) as e:
        B.build_stack(eng, stack)
    assert e.value.log_tail.endswith("boom") and ".log" in e.value.line()


def test_probe_without_json_is_a_failure(stack):
    eng = pipeline_engine()
    eng.add_image("img", "sha256:x")
    eng.on_run = lambda image, cmd, kw: RunResult(127, "", "python: not found\n")
    rep = B.smoke_image(eng, stack, "img", "sha256:x")
    assert rep.overall == "fail" and "python: not found" in rep.reason


def test_atomic_write_never_leaves_partial_file(tmp_path, monkeypatch):
    import envman.state as S

    p = tmp_path / "f.json"
    S.atomic_write(p, "one")

    def crash(src, dst):
        raise KeyboardInterrupt  # killed between write and rename

    monkeypatch.setattr(S.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        S.atomic_write(p, "two")
    assert p.read_text() == "one" and [x.name for x in tmp_path.iterdir()] == ["f.json"]


def image_store(containers=()) -> FakeEngine:
    """The shared fake engine with ``add(tag, image_id, uid=None, **labels)`` for envman's images."""
    engine = FakeEngine()
    for c in containers:
        engine.add_container(c)

    def add(tag, image_id, uid=None, **labels):
        owner = {"envman.built-by.uid": str(os.getuid() if uid is None else uid)} if uid != "none" else {}
        engine.add_image(tag, image_id, labels={"envman.managed": "true", **owner, **labels}, size=1000)

    engine.add = add  # type: ignore[attr-defined]
    return engine


@pytest.mark.parametrize("projects", [1, 3, 12])
def test_prune_reads_each_image_and_each_state_file_once_however_many_projects(tmp_path, monkeypatch, mini, projects):
    """Working out what the registered projects use asks the engine once per stack image (not
    once per project), reads the pins and the render cache once and writes the cache at most once."""
    from collections import Counter

    import envman.images.pins as P
    import envman.render.rendercache as RC
    import envman.state as S
    from envman.project.file import load_project
    from envman.project.image import project_images_in_use
    from envman.project.registry import register
    from envman.stack.resolve import resolve

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    store = image_store()
    stacks = ["torch-2.4-cuda12", "torch-2.4-cpu"]
    for name in stacks:
        store.add(f"envman/{resolve(mini, name).name}:latest", f"sha256:{name}")
    for i in range(projects):
        root = tmp_path / f"p{i}"
        root.mkdir()
        (root / "envman.toml").write_text(f'name = "p{i}"\nstack = "{stacks[i % 2]}"\nrequirements = ["six=={i}"]\n')
        register(load_project(root))
    reads = Counter()
    real_pins, real_load, real_write = P.read_pins, RC._load, S.atomic_write
    monkeypatch.setattr(P, "read_pins", lambda: reads.update(["pins"]) or real_pins())
    monkeypatch.setattr(RC, "_load", lambda path: reads.update(["renders"]) or real_load(path))
    monkeypatch.setattr(S, "atomic_write", lambda path, text: reads.update([Path(path).name]) or real_write(path, text))
    for attempt in ("cold cache", "warm cache"):
        reads.clear()
        store.inspected.clear()
        refs, unsure = project_images_in_use(store, lambda n: resolve(mini, n))
        assert len(refs) == projects and unsure == set()
        assert sorted(Counter(store.inspected).values()) == [1] * min(projects, 2), attempt
        assert reads["pins"] == 1 and reads["renders"] == 1 and reads[RC.RENDER_CACHE] <= 1, (attempt, reads)


def test_prune_keeps_what_registered_projects_run_on_and_nothing_stale(tmp_path, monkeypatch, mini):
    from envman.project.file import load_project
    from envman.project.image import project_image_ref, project_images_in_use
    from envman.project.registry import register
    from envman.stack.resolve import resolve

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    stack = resolve(mini, "torch-2.4-cuda12")
    store = image_store()
    store.add(f"envman/{stack.name}:latest", "sha256:stable", **{"envman.name": stack.name})
    store.add(f"envman/{stack.name}:old0candidate", "sha256:old", **{"envman.name": stack.name})
    roots = {}
    for name, extra in (("live", 'requirements = ["einops"]\n'), ("plain", ""), ("broken", "")):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        (roots[name] / "envman.toml").write_text(f'name = "{name}"\nstack = "torch-2.4-cuda12"\n{extra}')
        register(load_project(roots[name]))
    current = project_image_ref(load_project(roots["live"]), stack.name, "sha256:stable")
    labels = lambda p: {"envman.project": p, "envman.role": "project", "envman.name": stack.name}  # noqa: E731
    store.add(current, "sha256:live-now", **labels("live"))
    store.add("envman/project-live:0ldrequirement5", "sha256:live-before", **labels("live"))
    store.add("envman/project-gone:0123456789abcdef", "sha256:gone", **labels("gone"))  # no longer registered
    store.add("envman/project-broken:0123456789abcdef", "sha256:broken", **labels("broken"))
    (roots["broken"] / "envman.toml").write_text('name = "broken"\nstack = 3\n')  # halfway through an edit

    refs, unsure = project_images_in_use(store, lambda n: resolve(mini, n))
    assert refs == {current} and unsure == {"broken"}
    scope = P.PruneScope(uid=os.getuid(), keep=frozenset(refs), keep_projects=frozenset(unsure))
    would = P.prune(store, scope, dry_run=True)
    assert store.removed == []
    gone = P.prune(store, scope)
    assert {r.image_id for r in gone} == {r.image_id for r in would} == {"sha256:old", "sha256:live-before", "sha256:gone"}
    assert store.tag_names() == {f"envman/{stack.name}:latest", current, "envman/project-broken:0123456789abcdef"}


# --- the pipeline, stage by stage (run_pipeline) ----------------------------------------------------


def test_run_pipeline_records_where_it_stopped_and_what_ran_before(stack, monkeypatch):
    from envman.errors import EngineError

    run = B.run_pipeline(pipeline_engine(fail_build=True), stack)
    assert run.stage == "build" and run.build is None and isinstance(run.error, BuildError)
    assert run.seconds["build"] >= 0 and "smoke" not in run.seconds
    with pytest.raises(BuildError) as raised:
        run.result()
    assert raised.value is run.error

    broken = EngineError("the probe's container did not start", where="engine")
    monkeypatch.setattr(B, "smoke_image", lambda *a, **k: (_ for _ in ()).throw(broken))
    run = B.run_pipeline(pipeline_engine(), stack)
    assert run.stage == "smoke" and run.error is broken and run.build is not None and run.smoke is None
    with pytest.raises(EngineError):  # build_smoke_promote raises what stopped it, as before
        B.build_smoke_promote(pipeline_engine(), stack)


def test_run_pipeline_keeps_the_smoke_verdict_when_the_promotion_fails(stack, monkeypatch):
    from envman.errors import EngineError

    monkeypatch.setattr(B, "promote", lambda *a, **k: (_ for _ in ()).throw(EngineError("tag refused", where="e")))
    run = B.run_pipeline(pipeline_engine(), stack)
    assert run.stage == "promote" and run.smoke is not None and run.smoke.overall == "pass" and not run.promoted


def test_run_pipeline_retest_runs_the_probe_on_a_cached_image_with_the_timeout(stack):
    eng = pipeline_engine()
    first = B.run_pipeline(eng, stack)
    assert first.error is None and first.stage is None and first.promoted and len(eng.runs) == 1
    kept = B.run_pipeline(eng, stack)
    assert kept.build.cached and len(eng.runs) == 1 and "smoke" not in kept.seconds  # the kept verdict holds
    again = B.run_pipeline(eng, stack, retest=True, smoke_timeout=7)
    assert again.build.cached and len(eng.runs) == 2 and eng.runs[-1][2]["timeout"] == 7
    assert again.seconds["smoke"] >= 0
