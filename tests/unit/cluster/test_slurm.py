"""envman.cluster.slurm without a cluster: validation, GPU mapping, the batch scripts, squeue/sacct parsing,
submission and job records with a fake ``sbatch``."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from envman.errors import EnvmanError, UserError
from envman.project.file import GpuRequest, Mount
from envman.run.plan import RunPlan, docker_argv
from envman.run.command import check_container_name
from envman.run.prepare import allocated_gpus
from envman.project.file import cluster_gpu_count
from envman.cluster.batch import job_environment
from envman.cluster.slurm import (RUNTIMES, SCRIPT_RUNTIMES,
    env_file_text,
    JobSpec, Resources, check_job_id, check_mem, check_partition, check_runtime, check_time,
    job_states, load_records, load_slurm_config, parse_sacct, parse_squeue, read_log,
    render_script, submit,
)
from tests.support.cli import run_envman


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("value", ["90", "0:30", "1:30:00", "2-12", "2-12:30", "2-12:30:15", "UNLIMITED", "infinite",
                                   "100:00:00"])
def test_time_formats_slurm_accepts(value):
    assert check_time(value).upper() == value.upper()


@pytest.mark.parametrize("value", ["", "0", "0:00", "1:60", "1:61:00", "1:00:60", "2-24", "2-1:60", "1.5", "1h",
                                   "-1", " 90", "90\n", "1:2:3:4", "2-", "a-1", "1--2", "100-123:00"])
def test_time_formats_slurm_rejects(value):
    with pytest.raises(UserError) as e:
        check_time(value)
    assert e.value.exit_code == 2 and "\n" not in e.value.line()


@pytest.mark.parametrize("value,out", [("16G", "16G"), ("512m", "512M"), ("2048", "2048"), ("1t", "1T")])
def test_mem(value, out):
    assert check_mem(value) == out


@pytest.mark.parametrize("value", ["0", "0G", "16GB", "1.5G", "-1", "G", "16 G", "16G;x", "1e3", "9999999999"])
def test_mem_rejects(value):
    with pytest.raises(UserError):
        check_mem(value)


@pytest.mark.parametrize("value", ["debug", "gpu-a100", "p1,p2", "a.b_c"])
def test_partition(value):
    assert check_partition(value) == value


@pytest.mark.parametrize("value", ["", "a b", "x;rm", "-p", "a,", ",a", "$(id)", "a\nb", "p" * 65])
def test_partition_rejects(value):
    with pytest.raises(UserError):
        check_partition(value)


def test_runtime_and_job_id():
    assert check_runtime("Charliecloud") == "charliecloud"
    with pytest.raises(UserError):
        check_runtime("singularity")
    assert check_job_id("42") == "42"
    for bad in ("0", "-1", "1.batch", "../x", "", "12345678901"):
        with pytest.raises(UserError):
            check_job_id(bad)


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


def spec(runtime="docker", gpus=1, command=("python", "-c", "print('$(id); `x`')"), **kw) -> JobSpec:
    base = dict(project="demo", root="/srv/projects/demo dir", stack="torch-2.4.1-cuda12.4-py3.10",
                image="envman/torch-2.4.1-cuda12.4-py3.10:latest", runtime=runtime,
                resources=Resources(partition="gpu", gpus=gpus, time="1:00:00", cpus=4, mem="16G"),
                envman=("/opt/venv/bin/python", "-m", "envman"), command=command, matrix_files=("/m/x.toml",),
                environment=(("WANDB_MODE", "off line"),), home="/state/homes/demo", state_dir="/state",
                config_dir="/config", env_file="/state/slurm/env/demo.env")
    base.update(kw)
    return JobSpec(**base)


def bash_ok(text: str) -> None:
    p = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def commands(text: str) -> list[list[str]]:
    """The script's lines as shell words (comments and directives dropped)."""
    return [shlex.split(ln) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@pytest.mark.parametrize("runtime", ["docker", "podman", "pyxis", "apptainer", "charliecloud"])
def test_every_runtime_renders_valid_bash_with_the_resources(runtime):
    text = render_script(spec(runtime))
    bash_ok(text)
    directives = [ln.split(" ", 1)[1] for ln in text.splitlines() if ln.startswith("#SBATCH ")]
    export = ["--export=NONE"] if runtime in SCRIPT_RUNTIMES else []
    assert directives == ["--job-name=envman-demo", "--partition=gpu", "--gres=gpu:1", "--time=1:00:00",
                          "--cpus-per-task=4", "--mem=16G", *export]
    words = commands(text)
    # The user's command reaches the runtime as the same words, never re-parsed by the shell.
    assert any([x for x in w if x != "&"][-3:] == ["python", "-c", "print('$(id); `x`')"] for w in words), words
    assert ["export", "ENVMAN_STATE_DIR=/state", "ENVMAN_CONFIG_DIR=/config"] in words


def test_docker_script_runs_envman_run_with_the_slurm_gpus_and_removes_the_container_on_cancel():
    text = render_script(spec("docker"))
    run = next(w for w in commands(text) if w[:2] == ["envman", "run"])
    assert run[2] == "/srv/projects/demo dir" and run[3:5] == ["--gpus", "slurm"]
    assert run[5:7] == ["--name", "$container"] and run[7] == "--"
    assert 'container="envman-job-${SLURM_JOB_ID}"' in text
    trap = next(w for w in commands(text) if w[0] == "trap")
    assert "docker rm -f" in trap[1] and {"TERM", "INT", "HUP"} <= set(trap[2:])
    assert "--no-gpu" in render_script(spec("docker", gpus=0)) and "--gres" not in render_script(spec("docker", gpus=0))
    assert "--gpus all" not in text


def test_docker_script_cancellation_really_removes_the_named_container(tmp_path):
    """Run the script's trap with a fake docker and envman: TERM while the run waits → docker rm -f."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/docker.calls\n')
    (bin_dir / "docker").chmod(0o755)
    import re

    text = re.sub(r"(?m)^envman\(\) \{.*\}$", "envman() { sleep 30; }", render_script(spec("docker")))
    assert "envman() { sleep 30; }" in text
    script = tmp_path / "job.sh"
    script.write_text(text)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "77"}
    p = subprocess.Popen(["bash", str(script)], env=env)
    import time

    time.sleep(0.5)
    p.terminate()
    assert p.wait(timeout=10) == 143
    assert (tmp_path / "docker.calls").read_text().split() == ["rm", "-f", "envman-job-77"]


def test_apptainer_script():
    words = commands(render_script(spec("apptainer")))
    ex = next(w for w in words if w[0] == "apptainer")
    assert ex[:3] == ["apptainer", "exec", "--nv"]
    assert ["--bind", "/srv/projects/demo dir:/workspace"] == ex[ex.index("--bind"):ex.index("--bind") + 2]
    assert [".", "/state/slurm/env/demo.env", "||", "exit", "1"] in words  # the values, from a private file
    assert "export APPTAINERENV_WANDB_MODE='off line'\n" in env_file_text(spec("apptainer"))
    assert ["export", "APPTAINERENV_CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"] in words
    assert words.index(next(w for w in words if w[:2] == ["envman", "node-check"])) < words.index(ex)
    cpu = commands(render_script(spec("apptainer", gpus=0)))
    assert "--nv" not in next(w for w in cpu if w[0] == "apptainer")
    assert ["envman", "node-check", "/srv/projects/demo dir", "--no-gpu", "||", "exit", "$?"] in cpu


def test_pyxis_script():
    words = commands(render_script(spec("pyxis", root="/srv/demo")))
    srun = next(w for w in words if w[0] == "srun")
    assert "--container-image=envman/torch-2.4.1-cuda12.4-py3.10:latest" in srun
    assert "--container-mounts=/srv/demo:/workspace,/state/homes/demo:/home/envman" in srun
    assert "--container-env=ENVMAN_PROJECT,ENVMAN_STACK,WANDB_MODE" in srun
    assert not any(w[:2] == ["export", "HOME=/home/envman"] for w in words)  # enroot keeps its cache under HOME
    with pytest.raises(UserError, match="cannot carry"):
        render_script(spec("pyxis", root="/srv/a,b"))
    ro = render_script(spec("pyxis", root="/srv/demo", mounts=(Mount("/data", "/data", True),)))
    assert ",/data:/data:ro " in ro


def test_charliecloud_script():
    text = render_script(spec("charliecloud"))
    words = commands(text)
    run = next(w for w in words if w[0] == "ch-run")
    assert "--bind=/srv/projects/demo dir:/workspace" in run and "--cd=/workspace" in run
    assert run.index("--env-no-expand") < min(i for i, w in enumerate(run) if w.startswith("--set-env"))
    assert "--set-env=/state/slurm/env/demo.env" in run and run[run.index("--") + 1:] == ["python", "-c", "print('$(id); `x`')"]
    assert "ch-convert -i docker envman/torch-2.4.1-cuda12.4-py3.10:latest" in text
    with pytest.raises(UserError, match="read-only"):
        render_script(spec("charliecloud", mounts=(Mount("/data", "/data", True),)))


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "charliecloud"])
def test_non_docker_runtimes_need_a_command(runtime):
    with pytest.raises(UserError, match="needs a command"):
        render_script(spec(runtime, command=()))


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


def test_slurm_config(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[slurm]\nruntime = "apptainer"\npartition = "gpu"\n[run]\ngpus = 1\n')
    c = load_slurm_config(cfg)
    assert (c.runtime, c.partition) == ("apptainer", "gpu")
    for bad in ('[slurm]\nruntime = "rkt"\n', '[slurm]\npartitions = "x"\n', '[slurm]\npartition = "a b"\n',
                'slurm = 3\n', '[slurm]\nruntime = 1\n'):
        cfg.write_text(bad)
        with pytest.raises(UserError) as e:
            load_slurm_config(cfg)
        assert str(cfg) in e.value.line()


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


def test_podman_script_runs_envman_run_on_a_private_service_and_cleans_up_on_cancel(tmp_path):
    import re
    import sys
    import time

    text = render_script(spec("podman"))
    bash_ok(text)
    run = next(w for w in commands(text) if w[:2] == ["envman", "run"])
    assert run[3:7] == ["--gpus", "slurm", "--name", "$container"]
    assert 'export DOCKER_HOST="unix://$sockdir/podman.sock"' in text
    # Run it with a fake podman (its service binds the socket) and an envman that just waits.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/podman.calls\n'
        'if [ "$1" = system ]; then exec ' + sys.executable +
        ' -c "import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1][7:]); time.sleep(60)" "$4"; fi\n')
    (bin_dir / "podman").chmod(0o755)
    text = re.sub(r"(?m)^envman\(\) \{.*\}$", "envman() { sleep 30; }", text)
    (tmp_path / "job.sh").write_text(text)
    p = subprocess.Popen(["bash", str(tmp_path / "job.sh")], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "78",
                                                                    "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 10
    while not list(tmp_path.glob("tmp.*/podman.sock")):
        assert time.monotonic() < deadline, "the service never bound its socket"
        time.sleep(0.1)
    time.sleep(0.3)
    p.terminate()
    assert p.wait(timeout=10) == 143
    calls = (tmp_path / "podman.calls").read_text().splitlines()
    assert calls[0].startswith("system service --time=0 unix://") and calls[1] == "rm -f envman-job-78"
    assert not list(tmp_path.glob("tmp.*"))  # the private folder is gone


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


# --------------------------------------------------------------------------- isolation of the script runtimes

#: What keeps the submitter's environment and the host's /tmp out of each runtime's container
#: (envman run / docker: only the project's variables, a private /tmp).
ISOLATION = {
    "pyxis": ("srun", ["--export=ENVMAN_PROJECT,ENVMAN_STACK,WANDB_MODE", "--no-container-mount-home",
                       "--container-env=ENVMAN_PROJECT,ENVMAN_STACK,WANDB_MODE"]),
    "apptainer": ("apptainer", ["--cleanenv", "--containall", "--no-home"]),
    "charliecloud": ("ch-run", ["--unset-env=*", "--private-tmp"]),
}


def test_every_script_runtime_has_an_isolation_rule():
    assert set(ISOLATION) == set(SCRIPT_RUNTIMES)


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_script_runtimes_pass_none_of_the_submitters_environment(runtime):
    text = render_script(spec(runtime, job_env=(("PATH", "/opt/slurm/bin:/usr/bin"), ("HOME", "/home/u"),
                                                ("USER", "u"), ("DOCKER_HOST", "unix:///run/d.sock"))))
    assert "#SBATCH --export=NONE" in text.splitlines()
    words = commands(text)
    # What the script needs for itself, set explicitly (values quoted)
    assert ["export", "PATH=/opt/slurm/bin:/usr/bin", "HOME=/home/u", "USER=u", "DOCKER_HOST=unix:///run/d.sock"] in words
    tool, flags = ISOLATION[runtime]
    run = next(w for w in words if w[0] == tool)
    missing = [f for f in flags if f not in run]
    assert not missing, f"{runtime}: {missing} missing from {run}"
    if runtime == "charliecloud":  # ch-run applies them in order: unset everything before setting
        assert run.index("--unset-env=*") < min(i for i, w in enumerate(run) if w.startswith("--set-env"))


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_envman_run_runtimes_keep_the_job_environment(runtime):
    """docker/podman jobs run envman run on the node, which passes the container only the project's
    variables itself (and needs the engine's DOCKER_HOST/DOCKER_CONFIG)."""
    assert "--export=NONE" not in render_script(spec(runtime))


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_cpu_jobs_set_nvidia_visible_devices_void_and_gpu_jobs_do_not(runtime):
    assert "NVIDIA_VISIBLE_DEVICES" in env_file_text(spec(runtime, gpus=0))
    assert ("NVIDIA_VISIBLE_DEVICES", "void") in job_environment(spec(runtime, gpus=0))
    assert all(k != "NVIDIA_VISIBLE_DEVICES" for k, _ in job_environment(spec(runtime, gpus=1)))


def _fake_tools(tmp_path: Path, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fixed = {"ch-convert": "exit 0", "docker": f"echo sha256:{'e' * 64}"}  # the image id charliecloud keys by
    for tool in ("srun", "apptainer", "ch-run", "ch-convert", "docker"):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{fixed.get(tool, body)}\n")
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def _job(tmp_path: Path, runtime: str, body: str) -> tuple[subprocess.Popen, Path]:
    import re

    env_file = tmp_path / "state" / "slurm" / "env" / "demo.env"
    env_file.parent.mkdir(parents=True)
    bin_dir = _fake_tools(tmp_path, body)
    s = spec(runtime, gpus=0, state_dir=str(tmp_path / "state"), env_file=str(env_file),
             job_env=(("PATH", f"{bin_dir}:/usr/bin:/bin"),))
    env_file.write_text(env_file_text(s))
    env_file.chmod(0o600)
    text = re.sub(r"(?m)^envman\(\) \{.*\}$", "envman() { :; }", render_script(s))
    (tmp_path / "job.sh").write_text(text)
    p = subprocess.Popen(["bash", str(tmp_path / "job.sh")], env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7"},
                         start_new_session=True)
    return p, env_file


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_the_secrets_file_is_deleted_when_the_job_ends(runtime, tmp_path):
    p, env_file = _job(tmp_path, runtime, "exit 3")
    assert p.wait(timeout=20) == 3
    assert not env_file.exists()


@pytest.mark.parametrize("runtime", SCRIPT_RUNTIMES)
def test_the_secrets_file_is_deleted_when_the_job_is_cancelled(runtime, tmp_path):
    import time

    p, env_file = _job(tmp_path, runtime, f"touch {tmp_path}/started; exec sleep 30")
    for _ in range(200):
        if (tmp_path / "started").exists():
            break
        time.sleep(0.05)
    import os
    import signal

    os.killpg(p.pid, signal.SIGTERM)  # scancel signals every process of the job: the runtime and the script
    assert p.wait(timeout=20) == 143
    assert not env_file.exists()


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


def test_charliecloud_converts_again_when_the_tag_names_a_new_image(tmp_path):
    """A job runs the copy of the image id the tag names when the job starts: a new promotion of
    the same tag is converted again, never run from the stale copy."""
    import re

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    tools = {
        "docker": f'printf "sha256:%s\\n" "$(cat {tmp_path}/current-id)"',
        "ch-convert": f'echo "ch-convert $*" >> {calls}; mkdir -p "$4"',
        "ch-run": f'for a; do case "$a" in {tmp_path}/state/*) echo "ch-run $a" >> {calls};; esac; done',
    }
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env_file = tmp_path / "demo.env"
    s = spec("charliecloud", gpus=0, state_dir=str(tmp_path / "state"), env_file=str(env_file),
             job_env=(("PATH", f"{bin_dir}:/usr/bin:/bin"),))
    script = tmp_path / "job.sh"
    script.write_text(re.sub(r"(?m)^envman\(\) \{.*\}$", "envman() { :; }", render_script(s)))
    runs = []
    for image_id in ("a" * 64, "a" * 64, "b" * 64):
        (tmp_path / "current-id").write_text(image_id)
        env_file.write_text(env_file_text(s))
        p = subprocess.run(["bash", str(script)], env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "9"},
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        runs.append(calls.read_text().splitlines())
        calls.unlink()
    assert sum(line.startswith("ch-convert") for line in runs[0]) == 1
    assert not any(line.startswith("ch-convert") for line in runs[1])  # the same id: the copy is reused
    assert sum(line.startswith("ch-convert") for line in runs[2]) == 1  # a new id: converted again
    assert runs[1][-1].endswith("_" + "a" * 64) and runs[2][-1].endswith("_" + "b" * 64)


def test_charliecloud_refuses_a_copy_whose_tag_moved_during_the_conversion(tmp_path):
    import re

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {  # the tag names another image once ch-convert has run
        "docker": f'if [ -e {tmp_path}/converted ]; then echo sha256:{"b" * 64}; else echo sha256:{"a" * 64}; fi',
        "ch-convert": f'touch {tmp_path}/converted; mkdir -p "$4"',
        "ch-run": "exit 0",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    s = spec("charliecloud", gpus=0, state_dir=str(tmp_path / "state"), env_file=str(tmp_path / "e.env"),
             job_env=(("PATH", f"{bin_dir}:/usr/bin:/bin"),))
    (tmp_path / "e.env").write_text(env_file_text(s))
    script = tmp_path / "job.sh"
    script.write_text(re.sub(r"(?m)^envman\(\) \{.*\}$", "envman() { :; }", render_script(s)))
    p = subprocess.run(["bash", str(script)], env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "9"},
                       capture_output=True, text=True)
    assert p.returncode == 1 and "changed during its conversion" in p.stderr
    assert not list((tmp_path / "state" / "charliecloud").iterdir())


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
