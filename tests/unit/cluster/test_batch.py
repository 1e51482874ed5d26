"""envman.cluster.batch without a cluster: the validation of what a job asks for, the batch scripts of
every runtime (run under bash with fake tools), and the Slurm configuration."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from envman.cluster.batch import (SCRIPT_RUNTIMES, check_job_id, check_mem, check_partition, check_runtime,
                                  check_time, env_file_text, job_environment, load_slurm_config, render_script)
from envman.errors import UserError
from envman.project.file import Mount
from tests.support.jobspec import bash_ok, commands, spec


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))


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
