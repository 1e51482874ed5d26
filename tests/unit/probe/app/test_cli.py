"""The probe's command line (``envman/probe/app/cli.py``), in process and as the ``probe.pyz`` script run here."""

from __future__ import annotations

import json

import pytest

from envman.probe import EXIT_USAGE, parse_output
from envman.probe.app import cli as cli_mod
from envman.probe.app import expect as expect_mod
from tests.support.probe_app import DOC_KEYS, check, host_has_gpu, make_ctx, run_script


def test_parse_args():
    o = cli_mod.parse_args(["--require-gpu", "--timeout", "5", "--only", "kernel,driver"])
    assert o.require_gpu and o.timeout == 5.0 and o.only == ["kernel", "driver"] and not o.bench
    assert cli_mod.parse_args(["--only", "bench"]).bench
    assert cli_mod.parse_args([]).expect_path == "/opt/envman/stack.json"
    for bad in (["--bogus"], ["--only", "kernel,nope"], ["--timeout", "-1"], ["--timeout", "x"],
                ["--only", ""]):
        with pytest.raises(expect_mod.UsageError):
            cli_mod.parse_args(bad)


def test_document_contract_in_process(tmp_path):
    import io

    buf = io.StringIO()
    code = cli_mod.main(["--no-expect"], out=buf, ctx=make_ctx())
    doc = parse_output(buf.getvalue())
    assert code == 0
    assert set(doc) == DOC_KEYS
    assert doc["probe_version"] == 1
    assert doc["host"]["hostname"]
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "reason", "seconds", "data"}
        assert c["status"] in ("pass", "fail", "skip")
        assert isinstance(c["seconds"], float)
    assert [c["name"] for c in doc["checks"]] == ["driver", "runtime", "kernel", "framework"]


def test_script_runs_here_and_prints_cpu_only_json(tmp_path):
    r = run_script(["--no-expect"])
    doc = parse_output(r.stdout)
    assert len([ln for ln in r.stdout.splitlines() if ln.strip()]) == 1
    assert set(doc) == DOC_KEYS
    if host_has_gpu():
        pytest.skip("this machine has a GPU: tests/gpu covers it")
    assert doc["overall"] == "cpu-only", doc["reason"]
    assert r.returncode == 0
    assert check(doc, "driver")["status"] == "skip"


def test_script_require_gpu_without_gpu_exits_1(tmp_path):
    if host_has_gpu():
        pytest.skip("this machine has a GPU")
    r = run_script(["--require-gpu", "--no-expect"])
    doc = parse_output(r.stdout)
    assert r.returncode == 1
    assert doc["overall"] == "fail"


@pytest.mark.parametrize("args", [["--bogus"], ["--only", "nope"], ["--timeout", "0"]])
def test_script_bad_usage_exits_2(args):
    r = run_script(args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error" in r.stderr
    doc = parse_output(r.stdout)
    assert doc["overall"] == "fail" and doc["reason"].startswith("bad usage")


def test_script_bad_expect_file_exits_2(tmp_path):
    f = tmp_path / "stack.json"
    f.write_text("{oops")
    r = run_script(["--expect", str(f)])
    assert r.returncode == 2
    assert "cannot read JSON" in parse_output(r.stdout)["reason"]


def test_script_help_exits_0():
    r = run_script(["--help"])
    assert r.returncode == 0 and "--require-gpu" in r.stdout


FAKE_TORCH = '''
import os, sys
print("fake torch: chatter on sys.stdout")
os.write(1, b"fake torch: chatter on fd 1\\n")
__version__ = "2.7.1+cpu"
class version:
    cuda = None
class _Cudnn:
    @staticmethod
    def is_available():
        return False
class backends:
    cudnn = _Cudnn
class cuda:
    @staticmethod
    def is_available():
        return False
float32 = "float32"
class _T:
    def __init__(self, rows):
        self.rows = rows
    def tolist(self):
        return self.rows
def tensor(rows, dtype=None):
    return _T([[float(v) for v in r] for r in rows])
def matmul(a, b):
    cols = list(zip(*b.rows))
    return _T([[sum(x * y for x, y in zip(r, c)) for c in cols] for r in a.rows])
'''


def _fake_torch_env(tmp_path):
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_TORCH)
    return {"PYTHONPATH": str(tmp_path / "fake")}


def test_script_framework_cpu_path_and_stdout_isolation(tmp_path):
    env = _fake_torch_env(tmp_path)
    f = tmp_path / "stack.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.7.1", "cuda": None}))
    r = run_script(["--expect", str(f), "--only", "framework"], env=env)
    # the framework's chatter went to stderr; stdout holds the document alone
    assert [ln for ln in r.stdout.splitlines() if ln.strip()] == [r.stdout.strip()]
    assert "chatter on sys.stdout" in r.stderr and "chatter on fd 1" in r.stderr
    doc = parse_output(r.stdout)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    assert fw["data"]["device"] == "cpu"
    assert fw["data"]["cpu_matmul"]["ok"]
    # a CPU stack ("cuda": null) that passes its CPU checks is a pass, GPU or not
    assert doc["overall"] == "pass" and r.returncode == 0 and "CPU stack" in doc["reason"]


def test_script_framework_version_mismatch_exits_1(tmp_path):
    env = _fake_torch_env(tmp_path)
    f = tmp_path / "stack.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.6.0", "cuda": None}))
    r = run_script(["--expect", str(f), "--only", "framework"], env=env)
    doc = parse_output(r.stdout)
    assert r.returncode == 1 and doc["overall"] == "fail"
    assert "the stack expects 2.6.0" in check(doc, "framework")["reason"]


def test_missing_expectations_file_fails_the_probe(tmp_path):
    r = run_script(["--expect", str(tmp_path / "none.json")])
    assert r.returncode == EXIT_USAGE, r.stderr
    doc = parse_output(r.stdout)
    assert doc["overall"] == "fail"
    assert "expectations are missing" in doc["reason"]
    assert doc["checks"] == []


def test_no_expect_is_an_explicit_state_in_the_document():
    r = run_script(["--no-expect", "--only", "runtime"])
    doc = parse_output(r.stdout)
    assert doc["expect"] == {"path": None, "found": False, "stack": {}}


def test_no_expect_and_expect_exclude_each_other(tmp_path):
    f = tmp_path / "s.json"
    f.write_text("{}")
    r = run_script(["--no-expect", "--expect", str(f)])
    assert r.returncode == EXIT_USAGE and "exclude each other" in r.stderr


def test_found_expectations_are_reported(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"name": "x", "framework": None, "cuda": None}))
    doc = parse_output(run_script(["--expect", str(f), "--only", "runtime"]).stdout)
    assert doc["expect"]["found"] is True and doc["expect"]["path"] == str(f)
    assert doc["expect"]["stack"]["name"] == "x"
