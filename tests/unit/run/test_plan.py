"""The run plan: the ``docker run`` argv a :class:`envman.run.plan.RunPlan` gives (users, mounts, GPUs,
ports, labels, hardening); the shared run fixtures (hosts, engines, images) the other run tests use."""

from __future__ import annotations

import pytest

from envman.host import HostFacts, from_nvml
from envman.project.file import GpuRequest, Mount, Port
from envman.engine.api import EngineInfo
from envman.run.preflight import ImageState
from envman.run.plan import RunPlan, docker_argv

from tests.unit.test_host import FakeNvml, recorded


NVIDIA = EngineInfo(server_version="27.0", runtimes=("nvidia", "runc"))


GOOD_IMAGE = ImageState("envman/s:latest", "sha256:" + "1" * 64, "pass")


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def host(name: str) -> HostFacts:
    return from_nvml(FakeNvml(recorded(name)["nvml"]))


NOGPU = HostFacts("none", note="NVML: NVML Shared Library Not Found; nvidia-smi: not installed")


def plan(**kw) -> RunPlan:
    base = dict(image="envman/torch-2.4.1-cuda12.4-py3.10:latest", project="demo", stack="torch-2.4.1-cuda12.4-py3.10",
                root="/home/u/demo", home="/home/u/.local/state/envman/homes/demo", uid=1000, gid=1000)
    base.update(kw)
    return RunPlan(**base)


def test_argv_runs_as_the_user_in_the_workspace():
    argv = docker_argv(plan(command=("python", "-c", "print('a b')")))
    assert argv[:3] == ["docker", "run", "--rm"]
    assert argv[argv.index("--user") + 1] == "1000:1000"
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--mount"]
    assert "type=bind,source=/home/u/demo,target=/workspace" in mounts
    assert "type=bind,source=/home/u/.local/state/envman/homes/demo,target=/home/envman" in mounts
    assert argv[argv.index("--workdir") + 1] == "/workspace"
    assert "HOME=/home/envman" in argv
    # the image, then the command exactly as given
    i = argv.index("envman/torch-2.4.1-cuda12.4-py3.10:latest")
    assert argv[i + 1:] == ["python", "-c", "print('a b')"]


def test_argv_is_locked_down():
    argv = docker_argv(plan(gpus=GpuRequest("all"), ports=(Port(8888, 8888),)))
    joined = " ".join(argv)
    assert "--privileged" not in argv and "docker.sock" not in joined and "--cap-add" not in argv
    assert argv[argv.index("--security-opt") + 1] == "no-new-privileges"
    assert argv[argv.index("--pull") + 1] == "never"
    assert "--init" in argv
    assert "--label" in argv and "envman.project=demo" in argv and "envman.managed=true" in argv


def test_ports_are_published_on_localhost_only():
    argv = docker_argv(plan(ports=(Port(8888, 8888), Port(6006, 6007))))
    published = [argv[i + 1] for i, a in enumerate(argv) if a == "--publish"]
    assert published == ["127.0.0.1:8888:8888", "127.0.0.1:6006:6007"]


def test_shm_size_and_extra_mounts_and_env():
    argv = docker_argv(plan(shm_size="16g", mounts=(Mount("/data/set", "/data", True),), environment=(("A", "1 2"),)))
    assert argv[argv.index("--shm-size") + 1] == "16g"
    assert "type=bind,source=/data/set,target=/data,readonly" in argv
    # the value never reaches the argv: only the name (dry run) or the env file's slot (exec)
    assert "A=1 2" not in argv and not any("1 2" in a for a in argv)
    assert argv[argv.index("A") - 1] == "--env"
    execd = docker_argv(plan(environment=(("A", "1 2"),)), env_file="{slot}")
    assert execd[execd.index("--env-file") + 1] == "{slot}" and "A" not in execd


def test_mount_paths_with_commas_cannot_inject_options():
    argv = docker_argv(plan(root="/home/u/a,readonly=false,target=/etc"))
    assert '"source=/home/u/a,readonly=false,target=/etc"' in argv[argv.index("--mount") + 1]


@pytest.mark.parametrize("gpus, flag", [
    (GpuRequest("all"), "all"),
    (GpuRequest("count", count=2), "2"),
    (GpuRequest("devices", devices=("0", "2")), '"device=0,2"'),
])
def test_gpus_forms(gpus, flag):
    argv = docker_argv(plan(gpus=gpus))
    assert argv[argv.index("--gpus") + 1] == flag


def test_no_gpu_flag_for_a_cpu_run():
    assert "--gpus" not in docker_argv(plan(gpus=None)) and "--device" not in docker_argv(plan(gpus=None))


def test_cdi_devices():
    g = GpuRequest("count", count=2)
    argv = docker_argv(plan(gpus=g, gpu_mechanism="cdi", cdi_devices=g.cdi_devices))
    assert "--gpus" not in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--device"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]
    assert GpuRequest("all").cdi_devices == ("all",)


def test_tty_only_when_asked():
    assert "--tty" not in docker_argv(plan()) and "--interactive" not in docker_argv(plan())
    argv = docker_argv(plan(tty=True, interactive=True))
    assert "--tty" in argv and "--interactive" in argv


def errors(problems):
    return [p.message for p in problems if p.level == "error"]


def write_report(image_id, overall="pass"):
    from envman.images.build import SmokeReport, save_report

    save_report(SmokeReport(stack="s", image="i", image_id=image_id, overall=overall, reason="", gpus_requested=False,
                            probe=None, exit_code=0, stderr_tail=""))
