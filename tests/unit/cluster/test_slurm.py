"""envman.cluster.slurm without a cluster: GPU mapping, squeue/sacct parsing, submission and job records with a
fake ``sbatch``, and the specs it builds. The batch scripts themselves: ``test_batch.py``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envman.errors import EnvmanError, UserError
from envman.project.file import GpuRequest
from envman.run.plan import RunPlan, docker_argv
from envman.run.command import check_container_name
from envman.run.prepare import allocated_gpus
from envman.project.file import cluster_gpu_count
from envman.cluster.batch import job_environment
from envman.cluster.slurm import (RUNTIMES, SCRIPT_RUNTIMES, Resources, job_states, load_records, parse_sacct,
                                  parse_squeue, read_log, render_script, submit)
from tests.support.cli import run_envman
from tests.support.jobspec import spec


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))


# --------------------------------------------------------------------------- validation


def test_container_name():
    assert check_container_name("envman-job-12") == "envman-job-12"
    for bad in ("", "-x", "a b", "a/b", "x\n", "a" * 129):
        with pytest.raises(UserError):
            check_container_name(bad)


# --------------------------------------------------------------------------- GPUs


def test_allocated_gpus_prefers_the_step_then_the_job_then_cuda_visible_devices():
    assert allocated_gpus({"SLURM_JOB_GPUS": "1,3", "CUDA_VISIBLE_DEVICES": "0,1"}).devices == ("1", "3")
    assert allocated_gpus({"SLURM_STEP_GPUS": "2", "SLURM_JOB_GPUS": "1,2"}).devices == ("2",)
    assert allocated_gpus({"CUDA_VISIBLE_DEVICES": "0"}) == GpuRequest("devices", devices=("0",))


@pytest.mark.parametrize("env", [{}, {"SLURM_JOB_GPUS": ""}, {"CUDA_VISIBLE_DEVICES": "NoDevFiles"},
                                 {"SLURM_JOB_GPUS": "0,$(id)"}, {"SLURM_JOB_GPUS": "all"}])
def test_allocated_gpus_never_means_all(env):
    with pytest.raises(UserError) as e:
        allocated_gpus(env)
    assert e.value.exit_code == 2


def test_docker_argv_for_a_slurm_allocation():
    plan = RunPlan(image="img", project="p", stack="s", root="/r", home="/h", uid=1, gid=1,
                   gpus=allocated_gpus({"SLURM_JOB_GPUS": "0,1"}), container_name="envman-job-7")
    argv = docker_argv(plan)
    assert argv[argv.index("--gpus") + 1] == '"device=0,1"'
    assert argv[argv.index("--name") + 1] == "envman-job-7" and "--init" in argv
    assert "--name" not in docker_argv(RunPlan(image="img", project="p", stack="s", root="/r", home="/h", uid=1, gid=1))


def test_default_gpu_count():
    assert cluster_gpu_count(None) == 0
    assert cluster_gpu_count(GpuRequest("all")) == 1
    assert cluster_gpu_count(GpuRequest("count", count=3)) == 3
    assert cluster_gpu_count(GpuRequest("devices", devices=("0", "2"))) == 2


# --------------------------------------------------------------------------- scripts


# --------------------------------------------------------------------------- squeue / sacct


def test_parse_squeue_and_sacct():
    q = parse_squeue("5|RUNNING|None\n6|PENDING|Resources\njunk\n")
    assert q["5"].state == "RUNNING" and q["6"].reason == "Resources"
    s = parse_sacct("3|CANCELLED by 0|0:15\n1|FAILED|3:0\n1.batch|FAILED|3:0\n1|COMPLETED|0:0\n")
    assert (s["3"].state, s["3"].exit_code, s["3"].signal) == ("CANCELLED", 0, 15)
    assert (s["1"].state, s["1"].exit_code) == ("COMPLETED", 0)  # the last record of a reused id wins


class FakeSlurm:
    """sinfo/sbatch/squeue/sacct as a cluster without slurmdbd answers them."""

    def __init__(self, partitions="debug*\ngpu\n", sbatch_rc=0, sbatch_err=""):
        self.calls: list[list[str]] = []
        self.partitions, self.sbatch_rc, self.sbatch_err = partitions, sbatch_rc, sbatch_err

    def __call__(self, argv):
        self.calls.append(argv)
        out, rc, err = "", 0, ""
        if argv[0] == "sinfo":
            out = self.partitions
        elif argv[0] == "sbatch":
            out, rc, err = ("41\n" if not self.sbatch_rc else ""), self.sbatch_rc, self.sbatch_err
        elif argv[0] == "squeue":
            out = "41|RUNNING|None\n"
        elif argv[0] == "sacct" and "--completion" not in argv:
            rc, err = 1, "Slurm accounting storage is disabled"
        elif argv[0] == "sacct":
            out = "40|FAILED|3:0\n"
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_submit_records_the_job_and_reads_its_state(tmp_path):
    fake = FakeSlurm()
    rec = submit(spec("docker", resources=Resources(partition="gpu", gpus=2)), fake)
    assert rec.id == "41" and rec.log.endswith("/slurm/logs/job-41.log") and rec.gpus == 2
    sbatch = next(c for c in fake.calls if c[0] == "sbatch")
    assert sbatch[:2] == ["sbatch", "--parsable"] and sbatch[-1].endswith(".sh")
    log = Path(rec.log).with_name("job-%j.log")  # the job id in the file name only: the tmp path may hold "41"
    assert sbatch[2:4] == [f"--output={log}", f"--error={log}"]
    assert rec.script.endswith("/job-41.sh") and Path(rec.script).is_file()
    assert "--gres=gpu:2" in Path(rec.script).read_text()
    assert [r.id for r in load_records()] == ["41"]
    states = job_states(["41", "40", "39"], fake)
    assert states["41"].state == "RUNNING"
    assert (states["40"].state, states["40"].exit_code) == ("FAILED", 3)  # from sacct -c (no slurmdbd)
    assert states["39"].state == "UNKNOWN"
    assert not any(a.startswith("--starttime") for c in fake.calls for a in c)
    from envman.cluster.slurm import jobs

    fake.calls.clear()
    assert [(r.id, s.state) for r, s in jobs(fake)] == [("41", "RUNNING")]
    job_states(["40"], fake, since=rec.submitted)
    sacct = [c for c in fake.calls if c[0] == "sacct"]
    assert sacct and all(any(a.startswith("--starttime=") for a in c) for c in sacct)
    Path(rec.log).write_text("hello\n")
    assert read_log("41")[1] == "hello\n"
    with pytest.raises(UserError, match="not one of your envman jobs"):
        read_log("40")


def test_submit_to_a_missing_partition_is_a_clean_error_and_submits_nothing():
    fake = FakeSlurm()
    with pytest.raises(UserError) as e:
        submit(spec("docker", resources=Resources(partition="nope")), fake)
    assert e.value.exit_code == 2 and "partition 'nope' does not exist" in e.value.line()
    assert "debug, gpu" in e.value.line()
    assert not any(c[0] == "sbatch" for c in fake.calls) and load_records() == []


def test_sbatch_refusal():
    fake = FakeSlurm(sbatch_rc=1, sbatch_err="sbatch: error: Batch job submission failed: Requested node "
                                              "configuration is not available\n")
    with pytest.raises(UserError, match="Requested node configuration is not available"):
        submit(spec("docker", resources=Resources(gpus=9)), fake)
    assert load_records() == [] and not list(Path(tmp_scripts()).glob("*.sh"))
    down = FakeSlurm(sbatch_rc=1, sbatch_err="sbatch: error: Batch job submission failed: Unable to contact slurm controller\n")
    with pytest.raises(EnvmanError) as e:
        submit(spec("docker", resources=Resources()), down)
    assert e.value.exit_code == 1


def tmp_scripts() -> Path:
    from envman.cluster.slurm import slurm_dir

    return slurm_dir() / "scripts"


def test_records_ignore_garbage(tmp_path):
    from envman.cluster.slurm import slurm_dir

    d = slurm_dir() / "jobs"
    d.mkdir(parents=True)
    (d / "1.json").write_text("{not json")
    (d / "2.json").write_text(json.dumps({"id": "2"}))
    assert load_records() == []


def test_follow_log_prints_as_the_log_grows_until_the_job_ends():
    from envman.cluster.slurm import follow_log

    rec = submit(spec("docker", resources=Resources()), FakeSlurm())
    log = Path(rec.log)
    growth = iter(["epoch 1\n", "epoch 2\n", None])
    states = iter(["RUNNING", "RUNNING", "RUNNING", "COMPLETED"])
    out: list[str] = []

    def runner(argv):
        if argv[0] == "squeue":
            st = next(states, "COMPLETED")
            return subprocess.CompletedProcess(argv, 0, f"41|{st}|None\n" if st == "RUNNING" else "", "")
        return subprocess.CompletedProcess(argv, 0, "41|COMPLETED|0:0\n", "")

    def sleep(_):
        more = next(growth, None)
        if more:
            with open(log, "a") as fh:
                fh.write(more)

    state = follow_log("41", out.append, runner, sleep=sleep)
    assert "".join(out) == "epoch 1\nepoch 2\n" and (state.state, state.exit_code) == ("COMPLETED", 0)


def test_log_path_survives_sbatch_patterns(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "st%jate"))
    fake = FakeSlurm()
    rec = submit(spec("docker", resources=Resources()), fake)
    sbatch = next(c for c in fake.calls if c[0] == "sbatch")
    assert f"--output={tmp_path}/st%%jate/slurm/logs/job-%j.log" in sbatch
    assert rec.log == f"{tmp_path}/st%jate/slurm/logs/job-41.log"
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "a\\b"))
    with pytest.raises(UserError, match="backslash"):
        submit(spec("docker", resources=Resources()), FakeSlurm())
    assert not (tmp_path / "a\\b").exists()  # nothing written


@pytest.mark.parametrize("args", [["submit", "--gpus", "x"], ["submit", "--cpus", "0"], ["submit", "--time", "1:99"],
                                  ["submit", "--mem", "1.5G"], ["submit", "--partition", "a b"],
                                  ["submit", "--runtime", "podman2"], ["jobs", "--limit", "0"], ["logs", "x1"],
                                  ["node-check", ".", "--gpus", "all"]])
def test_cli_bad_input_is_one_line_exit_2(args, tmp_path):
    p = run_envman(args, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("envman: error: "), p.stderr


def test_dry_run_prints_the_script_and_submits_nothing(tmp_path, monkeypatch):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "envman.toml").write_text('stack = "torch-2.4-cuda12"\nname = "demo"\n')
    p = run_envman(["submit", "--gpus", "2", "--dry-run", "--", "echo", "$HOME"], cwd=tmp_path / "demo", timeout=60,
                   env={**__import__("os").environ, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert "#SBATCH --gres=gpu:2" in p.stdout and "--gpus slurm" in p.stdout and "-- echo '$HOME' &" in p.stdout
    assert "#SBATCH --job-name=envman-demo" in p.stdout
    assert load_records() == []


def test_jobs_says_when_the_cluster_does_not_answer():
    def down(argv):
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")

    with pytest.raises(EnvmanError) as e:
        job_states(["5"], down)
    assert e.value.exit_code == 1 and "Unable to contact slurm controller" in e.value.line()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero link", "directory"])
def test_a_job_log_that_is_not_a_regular_file_is_one_line_never_a_hang(tmp_path, monkeypatch, kind):
    import os
    import types

    from envman.cluster import slurm

    log = tmp_path / "job-7.log"
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "dev-zero link":
        log.symlink_to("/dev/zero")
    else:
        log.mkdir()
    monkeypatch.setattr(slurm, "record", lambda job_id: types.SimpleNamespace(id=job_id, log=str(log)))
    with pytest.raises(UserError, match="job log"):
        slurm.read_log("7")


def test_a_huge_job_log_prints_its_end_and_says_so(tmp_path, monkeypatch):
    import os
    import types

    from envman.cluster import slurm

    monkeypatch.setattr(slurm, "LOG_TAIL", 1000)
    log = tmp_path / "job-8.log"
    log.write_bytes(b"a" * 5000 + b"THE END\n")
    monkeypatch.setattr(slurm, "record", lambda job_id: types.SimpleNamespace(id=job_id, log=str(log)))
    text = slurm.read_log("8")[1]
    assert text.endswith("THE END\n") and "the first 4008 bytes" in text and len(text) < 1200


# --------------------------------------------------------------------------- envman run's policy at submit time


def _home_project(tmp_path, monkeypatch, where: str) -> Path:
    home = tmp_path / "home"
    root = home / where if where else home
    root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    (root / "envman.toml").write_text('name = "homeproj"\nstack = "torch-2.4-cpu"\ngpus = "none"\n')
    return root


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("where", ["", ".config/autostart", ".ssh"])
def test_every_runtime_refuses_a_protected_project_root_as_envman_run_does(runtime, where, tmp_path, monkeypatch):
    from envman.cluster.slurm import SubmitRequest, build_spec

    root = _home_project(tmp_path, monkeypatch, where)
    req = SubmitRequest(target=str(root), resources=Resources(gpus=0), runtime=runtime,
                        image=None if runtime in ("docker", "podman") else "reg.example/x:1", command=("true",))
    with pytest.raises(UserError, match="cannot be mounted at /workspace"):
        build_spec(req)


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_jobs_bind_the_real_path_of_a_mount_not_the_link(runtime, tmp_path, monkeypatch):
    """A source checked at submit time and swapped for a symlink before the job starts must not
    lead the runtime elsewhere: the script names the real path that was checked."""
    from envman.cluster.slurm import SubmitRequest, build_spec

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    real = tmp_path / "datasets" / "imagenet"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "datasets")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.toml").write_text(f'name = "p"\nstack = "torch-2.4-cpu"\ngpus = "none"\n'
                                      f'mounts = ["{tmp_path}/link/imagenet:/data"]\n')
    from envman.project.registry import locate
    from envman.project.trust import trust

    p_ = locate(str(proj))
    trust(p_.real_file, p_.digest, root=p_.root)
    spec_ = build_spec(SubmitRequest(target=str(proj), resources=Resources(gpus=0), runtime=runtime,
                                     image="reg.example/x:1", command=("true",)))
    assert [m.source for m in spec_.mounts] == [str(real)]
    assert str(tmp_path / "link") not in render_script(spec_)


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_jobs_drop_gpu_variables_of_a_cpu_project(runtime, tmp_path, monkeypatch):
    from envman.cluster.slurm import SubmitRequest, build_spec
    from envman.project.registry import locate
    from envman.project.trust import trust

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\ngpus = "none"\n[environment]\n'
                                      'NVIDIA_VISIBLE_DEVICES = "all"\nCUDA_VISIBLE_DEVICES = "0"\nA = "1"\n')
    p_ = locate(str(proj))
    trust(p_.real_file, p_.digest, root=p_.root)
    spec_ = build_spec(SubmitRequest(target=str(proj), resources=Resources(gpus=0), runtime=runtime,
                                     image="reg.example/x:1", command=("true",)))
    assert spec_.environment == (("A", "1"),)
    assert ("NVIDIA_VISIBLE_DEVICES", "void") in job_environment(spec_)


# --------------------------------------------------------------------------- Charliecloud copies by image id


@pytest.mark.parametrize("network", ["project", "none"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_job_gets_no_network_exactly_where_the_runtime_can_give_none(runtime, network, tmp_path, monkeypatch):
    """docker and podman jobs run envman run on the node (its network rule); the script runtimes
    share the node's network, so a project that asks for none is refused there, not given it."""
    from envman.cluster.slurm import SubmitRequest, build_spec
    from envman.errors import UserError

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.toml").write_text(f'name = "p"\nstack = "torch-2.4-cpu"\ngpus = "none"\nnetwork = "{network}"\n')
    req = SubmitRequest(target=str(proj), resources=Resources(gpus=0), runtime=runtime, command=("true",),
                        image="reg.example/x:1" if runtime in SCRIPT_RUNTIMES else None)
    if network == "none" and runtime in SCRIPT_RUNTIMES:
        with pytest.raises(UserError, match='network = "none"') as e:
            build_spec(req)
        assert "\n" not in str(e.value)
    else:
        assert build_spec(req).runtime == runtime
