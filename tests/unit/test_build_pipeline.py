"""Build → smoke → promote logic against a fake engine (no daemon needed)."""

import json
import os
import threading
import time
from dataclasses import dataclass

import pytest

from tests.support.probe_doc import probe_doc

from envman.images import build as B
from envman.engine.docker import BuildEvent, RunResult
from envman.errors import BuildError


@dataclass
class FakeCtx:
    render_hash: str
    secrets: dict = None  # type: ignore[assignment]

    def tar(self):
        return b"tar"


def _from_line(tar: bytes) -> str:
    """The FROM of a real build context's Dockerfile ("" for the fake render's context)."""
    import io
    import tarfile

    try:
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            text = tf.extractfile("Dockerfile").read().decode()
    except (tarfile.TarError, KeyError):
        return ""
    return text.split()[1]


class FakeEngine:
    def __init__(self, probe_overall="pass", fail_build=False):
        self.images = {}  # ref -> {"Id":..., "Config": {"Labels": ...}}
        self.builds = 0
        self.runs = []
        self.probe_overall = probe_overall
        self.fail_build = fail_build
        self.lock = threading.Lock()

    def inspect_image(self, ref):
        found = self.images.get(ref) or next((v for v in self.images.values() if v["Id"] == ref), None)
        if found is None:
            return None
        return {**found, "RepoTags": sorted(t for t, v in self.images.items() if v["Id"] == found["Id"])}

    def image_exists(self, ref):
        return self.inspect_image(ref) is not None

    def list_images(self, label_filter):
        from envman.engine.docker import ImageInfo

        by_id = {v["Id"]: v for v in self.images.values()}
        return [ImageInfo(i, tuple(self.inspect_image(i)["RepoTags"]), v["Config"]["Labels"], 1, 0)
                for i, v in by_id.items() if all(v["Config"]["Labels"].get(k) == x for k, x in label_filter.items())]

    def build(self, tar, tag, *, labels, nocache=False, pull=False, buildargs=None):
        with self.lock:
            self.builds += 1
        time.sleep(0.05)
        yield BuildEvent("step", "FROM x", step="1/2")
        if self.fail_build:
            yield BuildEvent("error", "boom")
            raise BuildError("boom", log_tail="line1\nboom")
        image_id = f"sha256:{tag.split(':')[-1]}{self.builds}"
        base = self.inspect_image(_from_line(tar))
        inherited = dict(base["Config"]["Labels"]) if base else {}
        self.images[tag] = {"Id": image_id, "Config": {"Labels": {**inherited, **labels}}}
        yield BuildEvent("done", "built", image_id=image_id)

    def info(self):
        return {"nvidia_runtime": False}

    def run(self, image, cmd, **kw):
        self.runs.append((image, cmd, kw))
        probe = probe_doc(kw["labels"]["envman.name"], self.probe_overall, "because")
        code = 1 if self.probe_overall == "fail" else 0
        return RunResult(code, "noise\n" + json.dumps(probe) + "\n", "")

    def tag(self, image, ref):
        src = next(v for v in self.images.values() if v["Id"] == image)
        self.images[ref] = src


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(B, "_render", lambda stack, options=None, builder="classic": FakeCtx("ab" * 32))


@pytest.fixture
def stack(mini):
    from envman.stack.resolve import resolve

    return resolve(mini, "torch-2.4-cuda12")


def test_second_build_of_unchanged_stack_does_no_docker_build(stack):
    eng = FakeEngine()
    first = B.build_stack(eng, stack)
    second = B.build_stack(eng, stack)
    assert eng.builds == 1 and not first.cached and second.cached
    assert second.ref == first.ref == f"envman/{stack.name}:{'ab' * 8}"


def test_a_no_op_build_of_a_promoted_stack_writes_nothing(stack):
    from envman.state import report_path

    eng = FakeEngine()
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
    eng = FakeEngine()
    results = []
    threads = [threading.Thread(target=lambda: results.append(B.build_stack(eng, stack))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert eng.builds == 1 and sorted(r.cached for r in results) == [False, True, True, True]


def test_passing_smoke_promotes(stack):
    eng = FakeEngine("pass")
    res = B.build_smoke_promote(eng, stack)
    assert res.promoted and B.stable_ref(stack.name) in eng.images
    assert "--require-gpu" not in eng.runs[0][1] and eng.runs[0][2]["gpus"] is None
    assert eng.runs[0][2]["network"] == "none"


def test_cpu_only_promotes_only_when_accepted(stack):
    eng = FakeEngine("cpu-only")
    assert not B.build_smoke_promote(eng, stack).promoted
    assert B.stable_ref(stack.name) not in eng.images
    assert B.build_smoke_promote(eng, stack, accept_cpu_only=True).promoted


def test_failing_smoke_leaves_previous_stable_untouched_and_keeps_report(stack, monkeypatch):
    eng = FakeEngine("pass")
    B.build_smoke_promote(eng, stack)
    before = eng.images[B.stable_ref(stack.name)]
    monkeypatch.setattr(B, "_render", lambda s, o=None, builder="classic": FakeCtx("cd" * 32))
    eng.probe_overall = "fail"
    res = B.build_smoke_promote(eng, stack)
    assert not res.promoted and res.smoke.overall == "fail"
    assert eng.images[B.stable_ref(stack.name)] is before
    saved = B.load_report(res.build.image_id)
    assert saved["overall"] == "fail" and saved["promoted"] is False


def test_require_gpu_is_passed_to_probe_and_engine(stack):
    eng = FakeEngine("pass")
    B.build_smoke_promote(eng, stack, require_gpu=True)
    image, cmd, kw = eng.runs[0]
    assert "--require-gpu" in cmd and kw["gpus"] == "all"


def test_build_failure_names_log(stack):
    eng = FakeEngine(fail_build=True)
    with pytest.raises(BuildError) as e:
        B.build_stack(eng, stack)
    assert e.value.log_tail.endswith("boom") and ".log" in e.value.line()


def test_probe_without_json_is_a_failure(stack):
    eng = FakeEngine()
    eng.run = lambda image, cmd, **kw: RunResult(127, "", "python: not found\n")
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


class ImageStore:
    """Images by tag with labels, as list_images / inspect_image / remove_image see them."""

    def __init__(self, containers=()):
        self.tags = {}  # tag -> (id, labels)
        self.removed = []
        self.containers = list(containers)  # ContainerInfo

    def add(self, tag, image_id, uid=None, **labels):
        import os

        owner = {"envman.built-by.uid": str(os.getuid() if uid is None else uid)} if uid != "none" else {}
        self.tags[tag] = (image_id, {"envman.managed": "true", **owner, **labels})

    def list_containers(self, labels):
        return list(self.containers)

    def inspect_image(self, ref):
        return {"Id": self.tags[ref][0]} if ref in self.tags else None

    def list_images(self, label_filter):
        from envman.engine.docker import ImageInfo

        by_id = {}
        for tag, (image_id, labels) in self.tags.items():
            by_id.setdefault(image_id, (labels, []))[1].append(tag)
        return [ImageInfo(i, tuple(t), labels, 1000, 0) for i, (labels, t) in by_id.items()]

    def remove_image(self, ref, force=False):
        self.removed.append(ref)
        del self.tags[ref]
        return True


def test_prune_keeps_what_registered_projects_run_on_and_nothing_stale(tmp_path, monkeypatch, mini):
    from envman.project.file import load_project
    from envman.project.image import project_image_ref, project_images_in_use
    from envman.project.registry import register
    from envman.stack.resolve import resolve

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    stack = resolve(mini, "torch-2.4-cuda12")
    store = ImageStore()
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
    scope = B.PruneScope(uid=os.getuid(), keep=frozenset(refs), keep_projects=frozenset(unsure))
    would = B.prune(store, scope, dry_run=True)
    assert store.removed == []
    gone = B.prune(store, scope)
    assert {r.image_id for r in gone} == {r.image_id for r in would} == {"sha256:old", "sha256:live-before", "sha256:gone"}
    assert set(store.tags) == {f"envman/{stack.name}:latest", current, "envman/project-broken:0123456789abcdef"}
