"""`envman ci plan` and `envman ci run` on the command line (envman/cli/ci.py): the GitHub matrix on
one line, --json and --github and their contradiction, a bad --shard one line with exit 2, an
empty shard an empty report without an engine."""

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_envman
from tests.unit.conftest import DATA

ROOT = Path(__file__).resolve().parents[3]


def envman(*args, env=None):
    e = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    e.update(env or {})
    return run_envman(args, env=e, cwd=ROOT)


@pytest.mark.skipif(not (ROOT / "matrices" / "torch.toml").exists(), reason="shipped matrix files are not present")
def test_cli_plan_github_format_is_one_line_of_valid_matrix_json():
    p = envman("ci", "plan", "--framework", "torch", "--shards", "4", "--format", "github")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("\n") == 1  # fits `echo "matrix=$(...)" >> $GITHUB_OUTPUT`
    gh = json.loads(p.stdout)
    assert set(gh) == {"include"} and 1 <= len(gh["include"]) <= 4
    for job in gh["include"]:
        assert set(job) == {"shard", "rows", "count"}
        assert job["count"] == len(job["rows"].split())
    full = json.loads(envman("ci", "plan", "--framework", "torch", "--shards", "4").stdout)
    assert sum(s["count"] for s in full["include"]) == full["rows"]
    bases = [b for s in full["include"] for b in s["bases"]]
    assert len(bases) == len(set(bases))  # each base image in exactly one shard


def test_cli_run_bad_shard_is_one_line_exit_2():
    p = envman("--matrix", str(DATA / "standin-torch.toml"), "ci", "run", "--shard", "5/2", "--rows", "torch-2.13.0-cpu")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--shard" in p.stderr


def test_cli_run_of_an_empty_shard_writes_an_empty_report_without_docker(tmp_path):
    p = envman("--matrix", str(DATA / "standin-torch.toml"), "ci", "run", "--rows", "torch-2.13.0-cpu",
               "--shard", "2/2", "--report", str(tmp_path / "rep"), env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "rep" / "results.json").read_text()) == []
    assert "no rows to validate" in p.stdout


@pytest.mark.skipif(not (ROOT / "matrices" / "torch.toml").exists(), reason="shipped matrix files are not present")
def test_cli_plan_json_and_github_flags_and_the_hidden_format_alias():
    full = envman("ci", "plan", "--framework", "torch", "--shards", "2", "--json")
    assert full.returncode == 0 and json.loads(full.stdout)["shards"] == 2
    assert envman("ci", "plan", "--framework", "torch", "--shards", "2", "--format", "json").stdout == full.stdout
    gh = envman("ci", "plan", "--framework", "torch", "--shards", "2", "--github")
    assert gh.stdout == envman("ci", "plan", "--framework", "torch", "--shards", "2", "--format", "github").stdout
    assert set(json.loads(gh.stdout)) == {"include"}
    helptext = envman("ci", "plan", "--help").stdout
    assert "--json" in helptext and "--format" not in helptext
    bad = envman("ci", "plan", "--json", "--github")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
