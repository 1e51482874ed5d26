"""The docker argv, preflight messages, the CLI engine adapter, run preparation and doctor's JSON."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from envman.run.doctor import doctor_report, project_rows
from envman.errors import EngineError
from envman.host import HostFacts, from_nvml
from envman.project.settings import CliOverrides, UserConfig, merge_settings
from envman.project.file import GpuRequest, Mount, Port, load_project, project_identity
from envman.project.registry import register
from envman.stack.resolve import resolve
from envman.engine.api import EngineInfo, ImageInfo
from envman.engine.facts import DockerFacts
from envman.run.preflight import ImageState, preflight, suggest_stack
from envman.run.prepare import PreflightError, prepare_run
from envman.run.plan import RunPlan, cdi_devices, docker_argv
from envman.matrix.source import MatrixSource, resolve_cached
from envman.engine.handoff import terminal_flags

from tests.support.fake_engine import FakeEngine

from .test_host import FakeNvml, recorded

NO_RUNTIME = EngineInfo(server_version="27.0", runtimes=("runc",))
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


# --------------------------------------------------------------------------- argv


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
    argv = docker_argv(plan(gpus=g, gpu_mechanism="cdi", cdi_devices=cdi_devices(g)))
    assert "--gpus" not in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--device"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]
    assert cdi_devices(GpuRequest("all")) == ("all",)


def test_tty_only_when_asked():
    assert "--tty" not in docker_argv(plan()) and "--interactive" not in docker_argv(plan())
    argv = docker_argv(plan(tty=True, interactive=True))
    assert "--tty" in argv and "--interactive" in argv


class _Tty:
    def __init__(self, tty, fd=None):
        self.tty, self.fd = tty, fd

    def isatty(self):
        return self.tty

    def fileno(self):
        if self.fd is None:
            raise ValueError("no fd")
        return self.fd


def test_terminal_flags():
    assert terminal_flags(_Tty(True), _Tty(True)) == (True, True)
    assert terminal_flags(_Tty(True), _Tty(False)) == (False, True)  # `envman run p -- cmd | less`
    r, w = os.pipe()
    try:
        assert terminal_flags(_Tty(False, r), _Tty(True)) == (False, True)  # `echo x | envman run ...`
    finally:
        os.close(r)
        os.close(w)
    with open(os.devnull) as null:
        assert terminal_flags(null, _Tty(True)) == (False, False)


# --------------------------------------------------------------------------- preflight


def errors(problems):
    return [p.message for p in problems if p.level == "error"]


def warnings_(problems):
    return [p.message for p in problems if p.level == "warning"]


def test_driver_too_old_names_an_older_cuda_stack(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    h = host("rtx3090-470")
    probs = preflight(stack, GpuRequest("all"), host=h, engine_info=NVIDIA, image=GOOD_IMAGE,
                      suggest=lambda s, hh, g: suggest_stack(mini, s, hh, g))
    assert errors(probs) == [
        "driver 470.57.02 is older than 525.60.13 that CUDA 12.4 needs: upgrade the driver or use torch-2.4.1-cuda11.8"]


def test_arch_unsupported_on_one_gpu_of_a_mixed_host(mini):
    stack = replace(resolve(mini, "torch-2.4-cuda12.4"), sass_archs=("7.0", "8.0", "8.6", "9.0"), ptx_archs=("9.0",))
    probs = preflight(stack, GpuRequest("all"), host=host("mixed-535"), engine_info=NVIDIA, image=GOOD_IMAGE)
    (msg,) = errors(probs)
    assert msg.startswith("GPU 1 (NVIDIA GeForce GTX 1080 Ti, sm_61): torch-2.4.1-cuda12.4-py3.10 has no kernel image")
    assert msg.endswith("or use only --gpus device=0")
    # the GPU that works, asked for alone, passes
    assert errors(preflight(stack, GpuRequest("devices", devices=("0",)), host=host("mixed-535"),
                            engine_info=NVIDIA, image=GOOD_IMAGE)) == []


def test_jit_only_is_a_warning_not_a_failure(mini):
    stack = resolve(mini, "torch-1.0-cuda10")  # SASS up to sm_75, PTX compute_50
    probs = preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=NVIDIA, image=GOOD_IMAGE)
    assert errors(probs) == []
    (w,) = warnings_(probs)
    assert "JIT-compiling PTX" in w and "sm_90" in w


def test_gpus_requested_without_a_gpu_fail_with_the_cpu_fix(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    probs = preflight(stack, GpuRequest("all"), host=NOGPU, engine_info=NO_RUNTIME, image=GOOD_IMAGE)
    msgs = errors(probs)
    assert msgs[0].startswith("GPUs requested (--gpus all) but no NVIDIA GPU on this host (NVML: ")
    assert all("--no-gpu" in m for m in msgs)
    assert "NVIDIA Container Toolkit" in msgs[1]
    # asked for a CPU run: no GPU check at all
    assert preflight(stack, None, host=None, engine_info=None, image=GOOD_IMAGE) == []


def test_engine_without_runtime_but_with_cdi(tmp_path, mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    (tmp_path / "cdi").mkdir()
    info = replace(NO_RUNTIME, cdi_spec_dirs=(str(tmp_path / "cdi"),))
    assert info.gpu_mechanism() is None
    (tmp_path / "cdi" / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    assert info.gpu_mechanism() == "cdi" and NVIDIA.gpu_mechanism() == "runtime"
    assert errors(preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=info, image=GOOD_IMAGE)) == []


def test_more_gpus_than_the_host_has(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    h = host("h100-570")
    assert "2 GPUs requested but this host has 1" in errors(
        preflight(stack, GpuRequest("count", count=2), host=h, engine_info=NVIDIA, image=GOOD_IMAGE))[0]
    assert "GPU device 3 does not exist" in errors(
        preflight(stack, GpuRequest("devices", devices=("3",)), host=h, engine_info=NVIDIA, image=GOOD_IMAGE))[0]


@pytest.mark.parametrize("image, level, text", [
    (ImageState("envman/s:latest", None), "error", "build it with envman build torch-2.4.1-cpu-py3.10"),
    (ImageState("envman/s:latest", "sha256:1", None), "error", "run envman smoke torch-2.4.1-cpu-py3.10"),
    (ImageState("envman/s:latest", "sha256:1", "fail", "kernel failed"), "error", "says fail (kernel failed)"),
    (ImageState("envman/s:latest", "sha256:1", "cpu-only"), None, ""),
])
def test_image_and_smoke_checks(mini, image, level, text):
    stack = resolve(mini, "torch-2.4-cpu")
    probs = preflight(stack, None, host=None, engine_info=None, image=image)
    if level is None:
        assert probs == []
    else:
        (p,) = probs
        assert p.level == level and text in p.message and "\n" not in p.message


def test_cpu_only_smoke_warns_when_gpus_are_used(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    img = ImageState("envman/s:latest", "sha256:1", "cpu-only")
    (w,) = warnings_(preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=NVIDIA, image=img))
    assert "smoke-tested without a GPU" in w


# --------------------------------------------------------------------------- the CLI engine adapter


def cli_runner(results):
    calls = []

    def run(args):
        calls.append(args)
        rc, out, err = results[args[0]]
        return subprocess.CompletedProcess(["docker", *args], rc, out, err)

    run.calls = calls
    return run


def test_docker_cli_inspect_and_info():
    d = DockerFacts(runner=cli_runner({
        "image": (0, json.dumps({"Id": "sha256:abc"}) + "\n", ""),
        "info": (0, json.dumps({"ServerVersion": "27.3.1", "Runtimes": {"runc": {}, "nvidia": {}}, "CDISpecDirs": ["/etc/cdi"]}), ""),
    }))
    assert d.inspect_image("envman/x:latest") == ImageInfo("sha256:abc")
    info = d.info()
    assert info.nvidia_runtime and info.runtimes == ("nvidia", "runc") and info.cdi_spec_dirs == ("/etc/cdi",)


def test_docker_cli_missing_image_and_unreachable_engine():
    d = DockerFacts(runner=cli_runner({"image": (1, "", "Error response from daemon: No such image: envman/x:latest\n")}))
    assert d.inspect_image("envman/x:latest") is None
    down = DockerFacts(runner=cli_runner({
        "image": (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"),
        "info": (1, json.dumps({"ServerErrors": ["Cannot connect to the Docker daemon"]}), ""),
    }))
    with pytest.raises(EngineError, match="Docker engine not reachable: Cannot connect"):
        down.inspect_image("envman/x:latest")
    with pytest.raises(EngineError, match="not reachable"):
        down.info()


# --------------------------------------------------------------------------- prepare_run


def write_report(image_id, overall="pass"):
    from envman.images.build import SmokeReport, save_report

    save_report(SmokeReport(stack="s", image="i", image_id=image_id, overall=overall, reason="", gpus_requested=False,
                            probe=None, exit_code=0, stderr_tail=""))


def prepared(tmp_path, mini, text, engine, *, cli=CliOverrides(), built=None, **kw):
    root = tmp_path / "p"
    root.mkdir(exist_ok=True)
    (root / "envman.toml").write_text(text)
    p = load_project(root)
    stack = resolve(mini, "torch-2.4-cuda12.4")
    settings = merge_settings(p, UserConfig(), cli, stack_is_cpu=lambda s: False)

    def build_image(proj, s, base_id):
        built.append(base_id)
        return "envman/project-x:built"

    return prepare_run(p, settings, stack, engine=engine, detect_host=lambda: NOGPU, suggest=lambda *a: None,
                       build_image=build_image, uid=1000, gid=1001, **kw)


def test_prepare_cpu_run_of_a_project_without_extras(tmp_path, mini):
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    built = []
    prep = prepared(tmp_path, mini, 'name = "p"\nstack = "torch-2.4-cuda12.4"\n', FakeEngine.with_images({stable: "sha256:stable"}),
                    cli=CliOverrides(gpus=None, gpus_set=True), built=built)
    assert prep.plan.image == "sha256:stable" and built == [] and prep.plan.gpus is None  # pinned by id
    assert (prep.plan.uid, prep.plan.gid) == (1000, 1001)
    assert prep.plan.root == str((tmp_path / "p").resolve())
    assert Path(prep.plan.home).is_dir() and prep.plan.home.endswith("/homes/p-" + project_identity("p", tmp_path / "p").rsplit("-", 1)[1])


def test_prepare_builds_the_project_image_once(tmp_path, mini):
    from envman.project.image import project_image_ref

    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    text = 'name = "p"\nstack = "torch-2.4-cuda12.4"\ngpus = "none"\nrequirements = ["einops"]\n'
    built = []
    prep = prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable"}), built=built)
    assert built == ["sha256:stable"] and prep.plan.image == "envman/project-x:built"
    ref = project_image_ref(load_project(tmp_path / "p"), "torch-2.4.1-cuda12.4-py3.10", "sha256:stable")
    built = []
    prep = prepared(tmp_path, mini, text, FakeEngine.with_images({stable: "sha256:stable", ref: "sha256:proj"}), built=built)
    assert built == [] and prep.plan.image == "sha256:proj"


def test_prepare_refuses_a_gpu_run_without_gpus(tmp_path, mini):
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    with pytest.raises(PreflightError) as e:
        prepared(tmp_path, mini, 'name = "p"\nstack = "torch-2.4-cuda12.4"\n', FakeEngine.with_images({stable: "sha256:stable"}), built=[])
    assert e.value.exit_code == 1 and "--no-gpu" in e.value.line() and "(and 1 more: envman doctor)" in e.value.line()
    assert "\n" not in e.value.line()


def test_stack_resolution_is_cached_on_the_matrix_files(tmp_path, mini):
    loads = []

    def load():
        loads.append(1)
        return mini

    a = resolve_cached("torch-2.4-cuda12.4", MatrixSource().fingerprint(), load)
    b = resolve_cached("torch-2.4-cuda12.4", MatrixSource().fingerprint(), load)
    assert a == b and loads == [1]
    extra = tmp_path / "extra.toml"
    extra.write_text("")
    resolve_cached("torch-2.4-cuda12.4", MatrixSource.of([str(extra)]).fingerprint(), load)
    assert loads == [1, 1]  # other matrix files, other cache key


# --------------------------------------------------------------------------- doctor


def test_doctor_json_shape(tmp_path, mini):
    for name, text in (("gpu", 'stack = "torch-2.4-cuda12.4"\n'), ("cpu", 'stack = "torch-2.4-cpu"\n'),
                       ("broken", 'stack = "torch-2.4-cuda12.4"\n')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "envman.toml").write_text(f'name = "{name}"\n' + text)
        register(load_project(tmp_path / name))
    (tmp_path / "broken" / "envman.toml").write_text("gpus = 'lots'\n")
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    engine = FakeEngine.with_images({stable: "sha256:stable"}, engine_info=NVIDIA)
    h = host("rtx3090-470")
    from envman.project.registry import read_registry

    resolve_name = lambda n: resolve(mini, n)  # noqa: E731
    rows = project_rows(read_registry(), engine=engine, host=h, resolve_name=resolve_name, user=UserConfig(),
                        suggest_for=lambda s, hh, g: suggest_stack(mini, s, hh, g))
    report = doctor_report(host=h, engine=engine, engine_error=None, rows=rows)
    assert set(report) == {"host", "engine", "problems", "projects", "ok"}
    assert report["host"]["driver"] == "470.57.02" and report["host"]["gpus"][0]["compute_cap"] == "8.6"
    assert report["engine"] == {"reachable": True, "error": None, "server_version": "27.0", "runtimes": ["nvidia", "runc"],
                                "nvidia_runtime": True, "cdi_nvidia": False, "gpu_mechanism": "runtime",
                                "engine": "docker", "engine_version": "27.0", "rootless": False, "url": None,
                                "selected_by": None}
    by = {r["name"]: r for r in report["projects"]}
    assert set(by["gpu"]) == {"name", "root", "stack", "stack_query", "image", "image_status", "smoke", "verdict", "gpus",
                              "verdicts", "problems"}
    assert by["gpu"]["stack"] == "torch-2.4.1-cuda12.4-py3.10" and by["gpu"]["image_status"] == "present"
    assert by["gpu"]["smoke"] == "pass" and by["gpu"]["verdict"] == "driver_too_old" and by["gpu"]["gpus"] == "all"
    assert "torch-2.4.1-cuda11.8" in by["gpu"]["problems"][0]["message"]
    assert by["cpu"]["verdict"] == "cpu" and by["cpu"]["image_status"] == "missing" and by["cpu"]["gpus"] == "none"
    assert by["broken"]["stack"] is None and "key gpus" in by["broken"]["problems"][0]["message"]
    assert report["ok"] is False
    json.dumps(report)  # serialisable as is


def test_doctor_on_a_host_without_gpu_says_so(mini):
    report = doctor_report(host=NOGPU, engine=FakeEngine.with_images({}), engine_error=None, rows=[])
    (p,) = report["problems"]
    assert p["level"] == "warning" and p["message"].startswith("no NVIDIA GPU on this host")
    assert report["ok"] is True and report["host"]["has_gpu"] is False


def test_doctor_with_unreachable_engine():
    report = doctor_report(host=NOGPU, engine=None, engine_error="Docker engine not reachable: x — start dockerd", rows=[])
    assert report["engine"]["reachable"] is False and report["ok"] is False


# --------------------------------------------------------------------------- CLI (in process, engine faked)


def test_cli_run_dry_run_splits_at_double_dash(tmp_path, monkeypatch, capsys):
    import envman.run.command as runner
    from envman.cli import main

    class AnyStable(FakeEngine):  # the stack's canonical name depends on the shipped matrix too
        def inspect_image(self, ref):
            return ImageInfo("sha256:stable") if ref.endswith(":latest") else None

    write_report("sha256:stable")
    monkeypatch.setattr(runner, "docker_facts", lambda: AnyStable())
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n')
    monkeypatch.chdir(proj)
    matrix = [a for f in sorted((Path(__file__).parents[1] / "data").glob("mini*.toml")) for a in ("--matrix", str(f))]
    with pytest.raises(SystemExit) as e:
        main([*matrix, "run", "--dry-run", "--json", "-p", "8888", "--", "python", "--version", "--gpus", "x"])
    assert e.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["argv"][-4:] == ["python", "--version", "--gpus", "x"]  # after `--`: the command, untouched
    assert out["plan"]["gpus"] is None  # a CPU stack asks for no GPU by default
    assert "127.0.0.1:8888:8888" in out["argv"] and out["plan"]["uid"] == os.getuid()


def test_cli_malformed_project_file_is_exit_2(tmp_path, monkeypatch, capsys):
    from envman.cli import main

    (tmp_path / "envman.toml").write_text('stack = "torch-2.4"\nshm_size = "huge"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "--", "true"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"envman: error: {tmp_path / 'envman.toml'}: key shm_size: expected")


def test_cli_project_init_and_ls(tmp_path, monkeypatch, capsys):
    from envman.cli import get_matrix, main
    from envman.stack.resolve import resolve

    (tmp_path / "demo").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code in (0, None)
    assert (tmp_path / "demo" / "envman.toml").is_file()
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["project", "ls", "--json"])
    rows = json.loads(capsys.readouterr().out)
    pinned = resolve(get_matrix(), "torch-2.4-cuda12").name  # the pinned name, not what was typed
    assert rows == [{"name": "demo", "root": str((tmp_path / "demo").resolve()), "stack": pinned, "error": None}]
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code == 2 and "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("has_requirements", [True, False])
def test_project_init_uses_the_folders_requirements_and_pins_the_stack(tmp_path, monkeypatch, capsys, has_requirements):
    """A folder with requirements.txt gets it in the new project file (it was written commented
    out, and the first run failed with ModuleNotFoundError); the stack is stored as the pinned
    name the typed one resolves to."""
    from envman.cli import get_matrix, main
    from envman.stack.resolve import resolve
    from envman.project.file import load_project

    (tmp_path / "demo").mkdir()
    if has_requirements:
        (tmp_path / "demo" / "requirements.txt").write_text("einops==0.8.1\n")
    monkeypatch.chdir(tmp_path / "demo")
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code in (0, None)
    p = load_project(tmp_path / "demo")
    assert p.stack == resolve(get_matrix(), "torch-2.4-cuda12").name != "torch-2.4-cuda12"
    assert resolve(get_matrix(), p.stack).name == p.stack
    assert p.requirements == ("einops==0.8.1\n" if has_requirements else "")
    assert ("requirements from requirements.txt" in capsys.readouterr().out) == has_requirements


# --------------------------------------------------------------------------- doctor's what-if host


def test_what_if_host_from_a_compute_capability_or_a_matrix_gpu(mini):
    from types import SimpleNamespace

    from envman.run.doctor import what_if_host

    src = SimpleNamespace(matrix=mini)  # what_if_host reads only the source's matrix
    real = host("rtx3090-470")
    h = what_if_host(real, src, driver="570.124.06", sm="12.0")
    assert h.driver == "570.124.06" and [(g.name, g.compute_cap) for g in h.gpus] == [("hypothetical GPU", "12.0")]
    h = what_if_host(real, src, gpu="h100-sxm")  # by id, on this host's driver
    assert h.driver == real.driver and [(g.name, g.compute_cap) for g in h.gpus] == [("H100 SXM5 80GB", "9.0")]
    assert what_if_host(real, src, gpu="GeForce RTX 3090").gpus[0].compute_cap == "8.6"
    h = what_if_host(real, src, driver="535.104.05")  # this host's GPUs with another driver
    assert h.driver == "535.104.05" and h.source == "what-if" and h.gpus == real.gpus


@pytest.mark.parametrize("kw, where, words", [
    ({"gpu": "GeForce RTX 3900"}, "--gpu", "unknown GPU 'GeForce RTX 3900' — did you mean GeForce RTX 3090"),
    ({"gpu": "zzzz"}, "--gpu", "unknown GPU 'zzzz' — or give --sm X.Y"),
    ({"gpu": "h100-sxm", "sm": "9.0"}, "envman doctor", "give --gpu or --sm, not both"),
    ({"sm": "eight"}, "--sm", "e.g. --sm 8.6"),
    ({"driver": "banana", "sm": "8.0"}, "--driver", "e.g. --driver 535.104.05"),
])
def test_what_if_host_refuses_in_one_line(mini, kw, where, words):
    from types import SimpleNamespace

    from envman.errors import UserError
    from envman.run.doctor import what_if_host

    with pytest.raises(UserError) as e:
        what_if_host(host("rtx3090-470"), SimpleNamespace(matrix=mini), **kw)
    line = e.value.line()
    assert line.startswith(f"{where}: ") and words in line and "\n" not in line and " — " in line


def test_what_if_host_needs_a_gpu_or_a_driver(mini):
    from types import SimpleNamespace

    from envman.errors import UserError
    from envman.run.doctor import what_if_host

    src = SimpleNamespace(matrix=mini)
    with pytest.raises(UserError, match="this host has no GPU to ask about"):
        what_if_host(NOGPU, src, driver="535.104.05")
    with pytest.raises(UserError, match="no NVIDIA driver to assume"):
        what_if_host(NOGPU, src, sm="8.6")


@pytest.mark.parametrize("inside", [True, False])
def test_run_with_a_word_that_is_no_project_offers_it_as_the_command(tmp_path, monkeypatch, capsys, inside):
    """`envman run pwd` said only "no project named 'pwd'": the words are now offered as the
    command (`envman run -- ls /tmp`)."""
    from envman.cli import main

    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n')
    monkeypatch.chdir(proj if inside else tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "ls", "/tmp"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "no project named 'ls'" in err and "envman run -- ls /tmp" in err
    assert ("in p (the project here)" in err) == inside
