"""envman.run.plan and envman.run.prepare by rule (docs/security.md, "Mutation testing").

The argv of a run is compared whole, for every shape of plan: a flag lost, added or moved is a
change of what the container may do. Mount strings are a grammar (the engine's CSV): any path
reads back as exactly its own fields. Values from the command line are checked at their edges.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.project.file import GpuRequest, Mount, Port
from envman.run import plan as P
from envman.run import prepare as Q
from tests.support.fake_engine import FakeEngine
from tests.support.refusal import refusal

IMAGE = "sha256:" + "1" * 64
LABELS = ["--label", "envman.managed=true", "--label", "envman.role=run", "--label", "envman.project=demo",
          "--label", "envman.name=s", "--label", "envman.uid=1000"]


def plan(**kw):
    base = dict(image=IMAGE, project="demo", stack="s", root="/w/demo", home="/h/demo", uid=1000, gid=1001)
    base.update(kw)
    return P.RunPlan(**base)


def _head(*before_run):
    return [*before_run, "--pull", "never", "--init", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--user", "1000:1001"]


COMMON = ["--mount", "type=bind,source=/w/demo,target=/workspace", "--mount", "type=bind,source=/h/demo,target=/home/envman",
          "--workdir", "/workspace", "--env", "HOME=/home/envman", "--env", "ENVMAN_PROJECT=demo", "--env", "ENVMAN_STACK=s",
          "--shm-size", "8g", "--network", P.network_name(1000, "demo", "/w/demo")]


def test_the_least_plan_s_argv_whole():
    assert P.docker_argv(plan()) == [
        "docker", "run", "--rm", *_head()[0:], *LABELS, *COMMON, "--env", "NVIDIA_VISIBLE_DEVICES=void", IMAGE]


def test_every_part_of_a_full_plan_s_argv_in_its_place():
    p = plan(command=("python", "train.py"), environment=(("A", "secret-a"), ("B", "secret-b")),
             mounts=(Mount("/data", "/data", True), Mount("/scratch", "/scratch")), ports=(Port(8888, 8888), Port(1, 2)),
             gpus=GpuRequest("devices", devices=("0", "2")), shm_size="16g", tty=True, interactive=True,
             container_name="envman-1000-job", workdir="/workspace/sub", env_name="dev", inherit_env=("HF_TOKEN",))
    argv = P.docker_argv(p, docker="/usr/bin/docker", env_file="/proc/self/fd/9")
    labels = [*LABELS, "--label", "envman.env=dev"]
    common = [*COMMON]
    common[common.index("--workdir") + 1] = "/workspace/sub"
    common[common.index("--shm-size") + 1] = "16g"
    assert argv == [
        "/usr/bin/docker", "run", "--interactive", "--tty", "--rm", "--name", "envman-1000-job", *_head()[0:], *labels,
        *common, "--mount", "type=bind,source=/data,target=/data,readonly", "--mount", "type=bind,source=/scratch,target=/scratch",
        "--env-file", "/proc/self/fd/9", "--env", "HF_TOKEN", "--publish", "127.0.0.1:8888:8888", "--publish", "127.0.0.1:1:2",
        "--gpus", '"device=0,2"', IMAGE, "python", "train.py"]
    assert not any("secret" in a for a in argv)


def test_without_an_env_file_only_the_names_are_on_the_argv():
    argv = P.docker_argv(plan(environment=(("A", "secret-a"), ("B", "b"))))
    assert argv[argv.index("NVIDIA_VISIBLE_DEVICES=void") + 1:] == ["--env", "A", "--env", "B", IMAGE]
    assert "secret-a" not in " ".join(argv)


@pytest.mark.parametrize("gpus,flag", [(GpuRequest("all"), "all"), (GpuRequest("count", count=3), "3"),
                                       (GpuRequest("devices", devices=("GPU-a",)), '"device=GPU-a"')])
def test_the_gpus_flag(gpus, flag):
    argv = P.docker_argv(plan(gpus=gpus))
    assert argv[-3:] == ["--gpus", flag, IMAGE] and "NVIDIA_VISIBLE_DEVICES=void" not in argv


def test_cdi_devices_replace_the_gpus_flag():
    argv = P.docker_argv(plan(gpus=GpuRequest("count", count=2), gpu_mechanism="cdi", cdi_devices=("0", "1")))
    assert argv[-5:] == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1", IMAGE] and "--gpus" not in argv


@pytest.mark.parametrize("url,rootless", [("unix:///run/user/1000/podman/podman.sock", True), (None, False)])
def test_podman_runs_through_its_service_and_takes_gpus_as_cdi_devices(url, rootless):
    argv = P.docker_argv(plan(engine="podman", engine_url=url, rootless=rootless, gpus=GpuRequest("all"),
                              cdi_devices=("all",)), docker="/usr/bin/docker")
    remote = ["--remote", "--url", url] if url else []
    userns = ["--userns", "keep-id"] if rootless else []
    assert argv[:len(remote) + 3 + len(userns)] == ["podman", *remote, "run", "--rm", *userns]
    assert argv[-3:] == ["--device", "nvidia.com/gpu=all", IMAGE]


def test_a_detached_run_waits_without_a_terminal():
    argv = P.docker_argv(plan(detach=True, tty=True, interactive=True, command=P.KEEP_ALIVE))
    assert argv[-4:] == ["--detach", IMAGE, "sleep", "infinity"] and "--tty" not in argv and "--interactive" not in argv


@pytest.mark.parametrize("tty,interactive", [(True, False), (False, True), (False, False)])
def test_terminal_flags_follow_the_plan(tty, interactive):
    argv = P.docker_argv(plan(tty=tty, interactive=interactive))
    assert argv[2:4 - (not tty) - (not interactive)] == [*(["--interactive"] if interactive else []),
                                                         *(["--tty"] if tty else [])]
    assert argv[2 + tty + interactive] == "--rm"


def test_to_json_shows_the_gpu_request_as_text():
    assert plan(gpus=GpuRequest("count", count=2)).to_json()["gpus"] == str(GpuRequest("count", count=2))
    d = plan().to_json()
    assert d["gpus"] is None and d["image"] == IMAGE and d["mounts"] == ()


# --------------------------------------------------------------------------- mount strings


PATHS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=40)


@given(PATHS, PATHS, st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_mount_string_reads_back_as_exactly_its_own_fields(source, target, read_only):
    flag = P.mount_flag(source, target, read_only)
    records = list(csv.reader(io.StringIO(flag, newline="")))
    assert len(records) == 1  # one record: a line break is only ever inside a quoted field
    fields = records[0]
    assert fields == ["type=bind", f"source={source}", f"target={target}", *(["readonly"] if read_only else [])]


@pytest.mark.parametrize("source", ["/a,source=/etc", '/a",source=/etc', "/a,readonly=false", "/a b", "/a\n", "/a\r,x"])
def test_a_path_with_commas_quotes_or_line_breaks_cannot_add_or_drop_an_option(source):
    flag = P.mount_flag("/s", source, read_only=True)
    assert list(csv.reader(io.StringIO(flag, newline=""))) == [["type=bind", "source=/s", f"target={source}", "readonly"]]
    assert P.mount_flag("/d\n", "/t", True) == '"type=bind","source=/d\n",target=/t,readonly'.replace('"type=bind"', "type=bind")


# --------------------------------------------------------------------------- names, workdir, environment


def test_container_name():
    assert P.container_name(1000, "dev") == "envman-1000-dev"


def test_the_workdir_follows_the_caller_inside_the_project_only(tmp_path):
    root = tmp_path / "p"
    (root / "a" / "b").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    assert P.container_workdir(root, root) == "/workspace"
    assert P.container_workdir(root, root / "a" / "b") == "/workspace/a/b"
    assert P.container_workdir(tmp_path / "link", root / "a") == "/workspace/a"  # compared after resolving links
    assert P.container_workdir(root, tmp_path) == "/workspace"
    assert P.container_workdir(root, tmp_path / "p-x") == "/workspace"


@pytest.mark.parametrize("name", [*P.GPU_SELECTION_VARS, "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                                  "NVIDIA_REQUIRE_CUDA", "NVIDIA_"])
@pytest.mark.parametrize("gpus", [None, GpuRequest("all")])
def test_gpu_selection_is_envman_s(name, gpus):
    env = (("KEEP", "1"), (name, "x"), ("NVIDIAX", "2"))
    kept, dropped = P.sanitize_environment(env, gpus)
    gone = name == "NVIDIA_VISIBLE_DEVICES" or gpus is None
    assert dropped == ((name,) if gone else ())
    assert kept == (("KEEP", "1"), *(() if gone else ((name, "x"),)), ("NVIDIAX", "2"))


@pytest.mark.parametrize("gpus,devices", [(GpuRequest("all"), ("all",)), (GpuRequest("count", count=3), ("0", "1", "2")),
                                          (GpuRequest("count", count=0), ()), (GpuRequest("count"), ()),
                                          (GpuRequest("devices", devices=("3", "GPU-x")), ("3", "GPU-x"))])
def test_cdi_device_names(gpus, devices):
    assert gpus.cdi_devices == devices


# --------------------------------------------------------------------------- command-line values (prepare)


@pytest.mark.parametrize("n,ok", [(1, True), (255, True), (256, False)])
def test_a_variable_name_is_1_to_255_characters(n, ok):
    name = "A" * n
    if ok:
        assert Q.parse_cli_env([f"{name}=v"]) == ((name, "v"),)
    else:
        assert refusal(lambda: Q.parse_cli_env([f"{name}=v"])) == (
            "UserError", f"{name[:100]!r} is not a variable name (letters, digits, _)", "--env-var",
            "e.g. -e WANDB_MODE=offline, or -e HF_TOKEN to pass it from your environment")


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A B", "A.B", "Ä", "-e"])
def test_a_name_outside_the_grammar_is_refused(name):
    assert refusal(lambda: Q.parse_cli_env([f"{name}=v"]))[1] == f"{name[:100]!r} is not a variable name (letters, digits, _)"


@pytest.mark.parametrize("name", ["wandb_mode", "_x", "Ab9_", "z"])
def test_every_case_of_letters_is_a_name(name):
    assert Q.parse_cli_env([f"{name}=1"]) == ((name, "1"),)


def test_a_name_alone_takes_the_value_from_envman_s_environment():
    assert Q.parse_cli_env(["B=2", "A", "B=3"], {"A": "from-env"}) == (("A", "from-env"), ("B", "3"))
    assert refusal(lambda: Q.parse_cli_env(["TOKEN"], {})) == (
        "UserError", "TOKEN is not set in your environment", "--env-var", "export TOKEN=... first, or give -e TOKEN=VALUE")


def test_the_default_environment_is_envman_s_own(monkeypatch):
    monkeypatch.setenv("SEC_B_PROBE", "x=y")
    assert Q.parse_cli_env(["SEC_B_PROBE", "C=a=b"]) == (("C", "a=b"), ("SEC_B_PROBE", "x=y"))


@pytest.mark.parametrize("bad", ["\0", "\n", "\r"])
@pytest.mark.parametrize("given_on", ["argv", "environment"])
def test_a_value_with_a_nul_or_a_line_break_is_refused(bad, given_on):
    arg, env = ("K=a" + bad + "b", {}) if given_on == "argv" else ("K", {"K": "a" + bad + "b"})
    assert refusal(lambda: Q.parse_cli_env([arg], env)) == (
        "UserError", "the value of K contains a NUL byte or a line break, which cannot be passed to a container",
        "--env-var", "put multi-line data in a file in the project and read it")


@pytest.mark.parametrize("raw", [b"\xff", b"ok\xc3", b"\xed\xa0\x80", b"a\x80b"])
@pytest.mark.parametrize("given_on", ["argv", "environment"])
def test_a_value_that_is_not_utf8_is_refused_in_one_line(raw, given_on):
    value = raw.decode("utf-8", "surrogateescape")  # how Python hands over such bytes from argv or the environment
    arg, env = ("K=" + value, {}) if given_on == "argv" else ("K", {"K": value})
    assert refusal(lambda: Q.parse_cli_env([arg], env)) == (
        "UserError", "the value of K is not UTF-8 text, which the engine's environment file cannot carry",
        "--env-var", "pass it as UTF-8 text, or in a file in the project")


@pytest.mark.parametrize("value", ["é", "日本", "\U0001f600", "tab\there", " "])
def test_a_utf8_value_passes_as_it_is(value):
    assert Q.parse_cli_env(["K=" + value]) == (("K", value),)


def test_relative_mount_sources_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Q._cli_paths(["data:/d", "/abs:/a", "~/x:/x", "nocolon", ":/t", "a:b:ro", ":/t:ro"]) == [
        f"{tmp_path}/data:/d", "/abs:/a", "~/x:/x", "nocolon", ":/t", f"{tmp_path}/a:b:ro", ":/t:ro"]


def test_cli_ports_are_parsed_by_the_project_file_s_rule():
    from envman.project.file import parse_port

    assert Q.parse_cli_ports(["8888", "1:2"]) == (Port(8888, 8888), Port(1, 2))
    assert refusal(lambda: Q.parse_cli_ports(["0"])) == refusal(lambda: parse_port("0", where="--port", key="--port"))
    # the option is the place, named once (not "--port: key --port: ...")
    assert refusal(lambda: Q.parse_cli_ports(["0"]))[1:3] == (
        "expected ports 1-65535: 8888 or \"HOST:CONTAINER\" such as \"8080:80\", got '0'", "--port")


@pytest.mark.parametrize("env,devices", [
    ({"SLURM_STEP_GPUS": "1,2", "SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0"}, ("1", "2")),
    ({"SLURM_STEP_GPUS": " ", "SLURM_JOB_GPUS": "3, 1,3", "CUDA_VISIBLE_DEVICES": "0"}, ("3", "1")),
    ({"CUDA_VISIBLE_DEVICES": "7"}, ("7",)),
    ({"SLURM_JOB_GPUS": "9999"}, ("9999",)),
])
def test_slurm_s_allocation_in_order_of_precedence(env, devices):
    assert Q.allocated_gpus(env) == GpuRequest("devices", devices=devices)


@pytest.mark.parametrize("var", ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"])
@pytest.mark.parametrize("raw", ["GPU-abc", "0,,1", "10000", "-1", "0;rm"])
def test_an_allocation_that_is_not_gpu_indexes_is_refused(var, raw):
    assert refusal(lambda: Q.allocated_gpus({var: raw})) == (
        "UserError", f"{var}={raw!r} is not a list of GPU indexes", "--gpus slurm",
        "the node's gres.conf must give GPUs device files (File=/dev/nvidia[0-3])")


def test_no_allocation_is_refused():
    assert refusal(lambda: Q.allocated_gpus({"SLURM_JOB_GPUS": ""})) == (
        "UserError", "Slurm allocated no GPUs to this job (SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES are unset)",
        "--gpus slurm", "submit with --gpus N (envman submit --gpus 1), or run with --no-gpu")


def test_the_project_root_refusal_whole(tmp_path, monkeypatch):
    from envman.project import policy
    from envman.project.file import ProjectConfig

    monkeypatch.setenv("HOME", str(tmp_path))
    policy._CACHE.clear()
    p = ProjectConfig(name="p", root=tmp_path, file=tmp_path / "envman.toml")
    got = refusal(lambda: Q.check_project_root(p))
    assert got[0] == "UserError" and got[1].startswith("the project root cannot be mounted at /workspace: ")
    assert got[2:] == (str(tmp_path / "envman.toml"), "keep envman.toml in a directory of its own (e.g. ~/code/PROJECT), "
                                                      "not in a home or system directory")
    (tmp_path / "code" / "p").mkdir(parents=True)
    Q.check_project_root(ProjectConfig(name="p", root=tmp_path / "code" / "p", file=tmp_path / "code" / "p" / "x"))


def test_cli_mounts_are_held_to_the_command_line_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "home")
    from envman.project import policy

    policy._CACHE.clear()
    assert Q.parse_cli_mounts(["data:/d:ro"]) == (Mount(str(tmp_path / "home" / "data"), "/d", True),)
    from envman.project.file import parse_mount

    got = refusal(lambda: Q.parse_cli_mounts([f"{tmp_path / 'home'}:/h"]))
    assert got == refusal(lambda: parse_mount(f"{tmp_path / 'home'}:/h", base=None, where="--mount", key="--mount",
                                              from_file=False))
    bad = refusal(lambda: Q.parse_cli_mounts(["/data:relative"]))
    assert bad[1:3] == ("expected an absolute target other than /, /workspace, /home/envman, /proc, /sys, /dev, "
                        "got '/data:relative'", "--mount")  # the option named once, as the place
    assert Q.parse_cli_mounts([f"{tmp_path / 'home'}:/h"], allow_dangerous=True)[0].target == "/h"


def test_a_preflight_error_carries_every_problem():
    from envman.run.preflight import Problem

    problems = [Problem(P.ERROR, "x", "first"), Problem(P.WARNING, "y", "second")]
    e = Q.PreflightError("first", problems)
    assert e.problems == problems and e.what == "first" and e.exit_code == 1
    assert os.fspath(Path("/")) == "/"


# --------------------------------------------------------------------------- prepare_run


STABLE = "envman/torch-2.4.1-cuda12.4-py3.10:latest"


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def _passing(image_id):
    from envman.images.build import SmokeReport, save_report

    save_report(SmokeReport(stack="s", image="i", image_id=image_id, overall="pass", reason="", gpus_requested=False,
                            probe=None, exit_code=0, stderr_tail=""))


def _prepare(tmp_path, mini, engine, *, text="", environment=(), command=(), built=None, mounts=(), ports=(), withheld=(),
             record=True, **kw):
    from dataclasses import replace

    from envman.project.file import load_project
    from envman.project.settings import CliOverrides, UserConfig, merge_settings
    from envman.stack.resolve import resolve

    root = tmp_path / "p"
    root.mkdir(exist_ok=True)
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cuda12.4"\n' + text)
    p = load_project(root)
    stack = resolve(mini, "torch-2.4-cuda12.4")
    settings = replace(merge_settings(p, UserConfig(), CliOverrides(gpus=None, gpus_set=True), stack_is_cpu=lambda s: False),
                       environment=tuple(environment), command=tuple(command), mounts=tuple(mounts), ports=tuple(ports),
                       withheld=tuple(withheld))
    built = [] if built is None else built

    def build_image(proj, s, base_id):
        from envman.images.provenance import record_built
        from envman.project.image import project_image_ref

        built.append(base_id)
        ref = project_image_ref(proj, s.name, base_id)
        if record:  # as build_project_image records its build (a dry run builds and records nothing)
            record_built(engine.add_image(ref), ref, base=base_id)
        return ref

    return Q.prepare_run(p, settings, stack, engine=engine, detect_host=lambda: pytest.fail("no GPU asked"),
                         suggest=lambda *a: None, build_image=build_image, **{"cwd": root, **kw})


def test_a_cpu_run_s_plan_field_by_field(state, mini):
    from envman.run.preflight import Problem

    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    prep = _prepare(state, mini, engine, environment=[("KEEP", "1"), ("NVIDIA_DRIVER_CAPABILITIES", "all"),
                                                      ("CUDA_VISIBLE_DEVICES", "0")], tty=True, interactive=True,
                    env_name="dev", mounts=[Mount("/data", "/data", True)], ports=[Port(8888, 8888)])
    assert prep.problems == [Problem(P.WARNING, "project", "not passed to the container: NVIDIA_DRIVER_CAPABILITIES, "
                                     "CUDA_VISIBLE_DEVICES (GPU selection is envman's: use --gpus / --no-gpu)")]
    p = prep.plan
    assert (p.image, p.project, p.stack, p.uid, p.gid) == (
        "sha256:stable", "p", "torch-2.4.1-cuda12.4-py3.10", os.getuid(), os.getgid())
    assert (p.environment, p.gpus, p.gpu_mechanism, p.cdi_devices) == ((("KEEP", "1"),), None, "runtime", ())
    assert (p.engine, p.engine_url, p.rootless, p.tty, p.interactive, p.detach, p.env_name, p.command) == (
        "docker", None, False, True, True, False, "dev", ())
    assert (p.root, p.workdir) == (str((state / "p").resolve()), "/workspace")
    assert (p.mounts, p.ports) == ((Mount("/data", "/data", True),), (Port(8888, 8888),))
    assert (prep.built, prep.base_image_id, prep.stack.name) == (None, "sha256:stable", "torch-2.4.1-cuda12.4-py3.10")


@pytest.mark.parametrize("command,runs", [((), P.KEEP_ALIVE), (("python", "serve.py"), ("python", "serve.py"))])
def test_a_detached_run_has_no_terminal_and_waits_when_it_has_no_command(state, mini, command, runs):
    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    p = _prepare(state, mini, engine, command=command, tty=True, interactive=True, detach=True, uid=1, gid=2).plan
    assert (p.detach, p.tty, p.interactive, p.command, p.uid, p.gid) == (True, False, False, runs, 1, 2)


def test_a_podman_run_goes_through_the_engine_s_service(state, mini):
    from envman.engine.api import EngineInfo

    engine = FakeEngine.with_images({STABLE: "sha256:stable"},
                                    engine_info=EngineInfo(server_version="5", version="5", kind="podman", rootless=True))
    _passing("sha256:stable")
    p = _prepare(state, mini, engine).plan
    assert (p.engine, p.engine_url, p.rootless) == ("podman", engine.url, True)


def test_one_error_is_the_message_and_more_are_counted(state, mini):
    engine = FakeEngine()
    with pytest.raises(Q.PreflightError) as e:
        _prepare(state, mini, engine)
    assert "more: envman doctor" not in e.value.what and len([x for x in e.value.problems if x.level == P.ERROR]) == 1
    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:other")  # the image is there, untested: and a mount nobody may ask for
    with pytest.raises(Q.PreflightError) as e:
        _prepare(state, mini, engine)
    errors = [x for x in e.value.problems if x.level == P.ERROR]
    assert e.value.what == errors[0].message + (f" (and {len(errors) - 1} more: envman doctor)" if len(errors) > 1 else "")


def test_a_missing_image_is_fetched_once_when_a_fetcher_is_given(state, mini):
    engine = FakeEngine()
    fetched = []

    def fetch(stack):
        fetched.append(stack.name)
        engine.add_image(STABLE, "sha256:stable")
        _passing("sha256:stable")
    assert _prepare(state, mini, engine, fetch_image=fetch).plan.image == "sha256:stable"
    assert fetched == ["torch-2.4.1-cuda12.4-py3.10"]
    assert _prepare(state, mini, engine, fetch_image=lambda s: pytest.fail("fetched again")).plan.image == "sha256:stable"


@pytest.mark.parametrize("remember", [True, False])
def test_the_first_run_pins_its_image_unless_told_not_to(state, mini, remember):
    from envman.images.pins import load_pin, project_key

    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    _prepare(state, mini, engine, remember_pin=remember)
    pin = load_pin(project_key("p", str((state / "p").resolve())))
    assert (pin.image_id, pin.stack) == ("sha256:stable", "torch-2.4.1-cuda12.4-py3.10") if remember else pin is None


def test_a_pinned_run_says_so_and_notes_the_newer_stable(state, mini):
    from envman.images.pins import project_key, save_pin
    from envman.project.file import load_project
    from envman.stack.resolve import resolve

    engine = FakeEngine.with_images({STABLE: "sha256:new"})
    engine.add_image(None, "sha256:old")
    _passing("sha256:new")
    _passing("sha256:old")
    _passing("sha256:stable")
    _prepare(state, mini, FakeEngine.with_images({STABLE: "sha256:stable"}), remember_pin=False)  # writes the project
    save_pin(project_key("p", str((state / "p").resolve())), "torch-2.4.1-cuda12.4-py3.10", "sha256:old")
    img, choice, stable_id = Q.choose_base(engine, load_project(state / "p"), resolve(mini, "torch-2.4-cuda12.4"))
    assert (img.ref, img.image_id, choice.pinned) == (f"{STABLE} (pinned: sha256:old)", "sha256:old", True)
    assert stable_id == "sha256:new"  # the stable tag's own id, whatever the run stands on
    prep = _prepare(state, mini, engine)
    assert prep.plan.image == "sha256:old" and prep.base_image_id == "sha256:old" and prep.stable_id == "sha256:new"
    assert [(x.level, x.check, x.message) for x in prep.problems] == [(P.WARNING, "image", choice.note)] and choice.note
    img, choice, _ = Q.choose_base(engine, load_project(state / "p"), resolve(mini, "torch-2.4-cuda12.4"), update=True)
    assert (img.ref, img.image_id, choice.pinned, choice.note) == (STABLE, "sha256:new", False, None)
    prep = _prepare(state, mini, engine, update=True, remember_pin=False)
    assert (prep.plan.image, prep.problems) == ("sha256:new", [])


@pytest.mark.parametrize("update", [False, True])
def test_a_stable_image_fetched_for_an_update_is_chosen_by_the_same_rule(state, mini, update):
    # The project is pinned to LONG_OLD (still here, still passing); its stable image is missing.
    # Without --update the pin runs and nothing is fetched; with --update the stable image is
    # fetched and, chosen again with --update, replaces the pin (never the pin kept after a pull).
    from envman.images.pins import load_pin, project_key

    engine = _pinned_setup(state, mini, stable_present=False)
    fetched = []

    def fetch(stack):
        fetched.append(stack.name)
        engine.add_image(STABLE, LONG_NEW)
        _passing(LONG_NEW)

    prep = _prepare(state, mini, engine, fetch_image=fetch, update=update)
    want = LONG_NEW if update else LONG_OLD
    assert (prep.plan.image, prep.base_image_id, fetched) == (want, want, ["torch-2.4.1-cuda12.4-py3.10"] if update else [])
    assert load_pin(project_key("p", str((state / "p").resolve()))).image_id == want
    assert [x.message for x in prep.problems] == []


@pytest.mark.parametrize("sub", [".", "a", "a/b"])
def test_the_working_directory_is_the_cwd_given_not_the_process_s(state, mini, monkeypatch, sub):
    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    _prepare(state, mini, engine, remember_pin=False)  # writes the project
    (state / "p" / sub).mkdir(parents=True, exist_ok=True)
    (state / "elsewhere").mkdir()
    monkeypatch.chdir(state / "elsewhere")  # the process's directory is outside the project
    prep = _prepare(state, mini, engine, remember_pin=False, cwd=state / "p" / sub)
    assert prep.plan.workdir == ("/workspace" if sub == "." else "/workspace/" + sub)


@pytest.mark.parametrize("withheld", [(), ("environment: A, B",), ("environment: A", "mounts: /data")])
def test_what_the_user_config_withheld_from_an_untrusted_file_is_one_warning(state, mini, withheld):
    import shlex

    from envman.run.preflight import Problem

    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    prep = _prepare(state, mini, engine, withheld=withheld, remember_pin=False)
    f = str((state / "p" / "envman.toml").resolve())
    line = (f"your config's [run] {' and '.join(withheld)} not given to {f}: it is not trusted "
            f"(read it, then trust it to pass them: envman project trust {shlex.quote(f)})")
    assert prep.problems == ([Problem(P.WARNING, "project", line)] if withheld else [])


def test_image_state_of_reads_the_verdict(state):
    from envman.engine.api import ImageInfo

    assert Q.image_state_of("r", None) == Q.ImageState("r", None)
    _passing("sha256:x")
    assert Q.image_state_of("r", ImageInfo("sha256:x")) == Q.ImageState("r", "sha256:x", "pass", "")
    assert Q.image_state_of("r", ImageInfo("sha256:y")) == Q.ImageState("r", "sha256:y", None, "")


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_project_image_is_built_when_missing_or_asked_and_run_by_its_id(state, mini, rebuild):
    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    built = []
    prep = _prepare(state, mini, engine, text='requirements = ["einops"]\n', built=built, rebuild=rebuild)
    first = prep.plan.image
    assert built == ["sha256:stable"] and prep.built and first == engine.inspect_image(prep.built).id
    built.clear()
    prep = _prepare(state, mini, engine, text='requirements = ["einops"]\n', built=built, rebuild=rebuild)
    assert built == (["sha256:stable"] if rebuild else []) and (prep.built is not None) is rebuild
    assert prep.plan.image.startswith("sha256:") and prep.plan.image != first if rebuild else prep.plan.image == first


def test_a_project_image_planted_under_its_tag_is_built_again_and_the_run_names_the_id_built(state, mini):
    """Attack (a shared engine): a neighbour tags an image of theirs as this project's image
    (the tag is ``envman run --dry-run``'s to print); the run builds its own instead and runs it by
    the ID its build recorded, even when the tag is moved again right after the build."""
    from envman.project.file import load_project
    from envman.project.image import project_image_ref

    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    _prepare(state, mini, engine, text='requirements = ["einops"]\n', remember_pin=False)  # writes the project
    ref = project_image_ref(load_project(state / "p"), "torch-2.4.1-cuda12.4-py3.10", "sha256:stable")
    planted = engine.add_image(None, "sha256:" + "e" * 64)
    engine.tag(planted, ref)
    built: list[str] = []
    prep = _prepare(state, mini, engine, text='requirements = ["einops"]\n', built=built)
    assert built == ["sha256:stable"] and prep.plan.image not in (planted, ref) and prep.plan.image.startswith("sha256:")
    mine = prep.plan.image
    engine.tag(planted, ref)  # moved again after the build
    built.clear()
    prep = _prepare(state, mini, engine, text='requirements = ["einops"]\n', built=built)
    assert built == ["sha256:stable"] and prep.plan.image != planted


def test_a_dry_run_names_the_project_image_s_tag_when_nothing_was_built(state, mini):
    """A build that records nothing (``--dry-run``'s stand-in) leaves the plan naming the tag."""
    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    built: list[str] = []
    prep = _prepare(state, mini, engine, text='requirements = ["einops"]\n', built=built, record=False)
    assert built == ["sha256:stable"] and prep.plan.image.startswith("envman/project-p-")


LONG_OLD, LONG_NEW = "sha256:" + "0123456789" * 6 + "abcd", "sha256:" + "9876543210" * 6 + "dcba"


def _pinned_setup(state, mini, *, stable_by_me=False, stable_present=True):
    from envman import labels as L
    from envman.engine.api import ImageInfo
    from envman.images.pins import project_key, save_pin

    engine = FakeEngine()
    if stable_present:
        engine.add_image(STABLE, LONG_NEW)
        if stable_by_me:
            v = L.SmokeVerdict(status="pass", report_digest="sha256:" + "5" * 64, by_uid=os.getuid(), by_user="me",
                               at=2 * 10**9, rootfs=None)
            layers = engine.inspect_image(LONG_NEW).layers
            from envman.images.store import rootfs_digest

            v = L.SmokeVerdict(**{**v.__dict__, "rootfs": rootfs_digest(ImageInfo("x", layers=layers))})
            engine._images[LONG_NEW] = ImageInfo(LONG_NEW, labels=v.to_labels(), layers=layers)
            from tests.unit.images.test_pins import my_build

            my_build(LONG_NEW, at=2 * 10**9)  # "mine" is what my state says, never the labels
        else:
            _passing(LONG_NEW)
    engine.add_image(None, LONG_OLD)
    _passing(LONG_OLD)
    _passing("sha256:stable")
    _prepare(state, mini, FakeEngine.with_images({STABLE: "sha256:stable"}), remember_pin=False)  # writes the project
    save_pin(project_key("p", str((state / "p").resolve())), "torch-2.4.1-cuda12.4-py3.10", LONG_OLD)
    return engine


def test_a_stable_labelled_with_my_uid_but_not_in_my_state_does_not_move_the_run(state, mini):
    """The labels of a neighbour's image can name my uid and any time: without my own record of
    it, the run stays on its pin."""
    engine = _pinned_setup(state, mini, stable_by_me=True)
    from envman.images.provenance import built_path

    built_path().unlink()
    img, choice = _base(state, mini, engine)
    assert (img.image_id, choice.pinned, choice.repin) == (LONG_OLD, True, False)


def load_project_p(state):
    from envman.project.file import load_project

    return load_project(state / "p")


def resolve_mini(mini):
    from envman.stack.resolve import resolve

    return resolve(mini, "torch-2.4-cuda12.4")


def _base(state, mini, engine, **kw):
    from envman.project.file import load_project
    from envman.stack.resolve import resolve

    img, choice, _ = Q.choose_base(engine, load_project(state / "p"), resolve(mini, "torch-2.4-cuda12.4"), **kw)
    return img, choice


def test_the_pinned_image_is_named_by_its_short_id(state, mini):
    engine = _pinned_setup(state, mini)
    img, choice = _base(state, mini, engine)
    assert img.ref == f"{STABLE} (pinned: {LONG_OLD[:19]})" and choice.pinned


def test_a_pin_whose_stable_is_gone_runs_the_pin_and_asks_for_it_once(state, mini):
    engine = _pinned_setup(state, mini, stable_present=False)
    engine.inspected.clear()
    img, choice, stable_id = Q.choose_base(engine, load_project_p(state), resolve_mini(mini))
    assert (img.image_id, choice.pinned) == (LONG_OLD, True) and engine.inspected.count(LONG_OLD) == 1
    assert stable_id is None  # no stable tag


def test_a_stable_i_promoted_after_the_pin_moves_the_run(state, mini):
    engine = _pinned_setup(state, mini, stable_by_me=True)
    img, choice = _base(state, mini, engine)
    assert (img.image_id, choice.pinned, choice.repin) == (LONG_NEW, False, True)


def test_the_stable_image_that_is_the_pin_is_asked_for_once(state, mini):
    from envman.images.pins import project_key, save_pin

    engine = _pinned_setup(state, mini)
    save_pin(project_key("p", str((state / "p").resolve())), "torch-2.4.1-cuda12.4-py3.10", LONG_NEW)
    engine.inspected.clear()
    img, choice = _base(state, mini, engine)
    assert (img.image_id, choice.pinned) == (LONG_NEW, False) and engine.inspected == [STABLE]


def test_image_state_reads_the_engine(state):
    engine = FakeEngine.with_images({"envman/s:latest": "sha256:x"})
    from envman.images.build import SmokeReport, save_report

    save_report(SmokeReport(stack="s", image="i", image_id="sha256:x", overall="cpu-only", reason="no GPU here",
                            gpus_requested=False, probe=None, exit_code=0, stderr_tail=""))
    assert Q.image_state(engine, "envman/s:latest") == Q.ImageState("envman/s:latest", "sha256:x", "cpu-only", "no GPU here")
    assert Q.image_state(engine, "envman/t:latest") == Q.ImageState("envman/t:latest", None)


def test_defaults_no_terminal_and_a_remembered_pin_and_the_current_directory(state, mini, monkeypatch):
    from envman.images.pins import load_pin, project_key
    from envman.project.file import load_project
    from envman.project.settings import CliOverrides, UserConfig, merge_settings
    from envman.stack.resolve import resolve

    engine = FakeEngine.with_images({STABLE: "sha256:stable"})
    _passing("sha256:stable")
    _prepare(state, mini, engine, remember_pin=False)
    (state / "p" / "sub").mkdir()
    monkeypatch.chdir(state / "p" / "sub")
    p = load_project(state / "p")
    settings = merge_settings(p, UserConfig(), CliOverrides(gpus=None, gpus_set=True, shm_size="3g"),
                              stack_is_cpu=lambda s: False)
    engine.info = lambda: pytest.fail("a CPU run asks the engine nothing about GPUs")
    plan = Q.prepare_run(p, settings, resolve(mini, "torch-2.4-cuda12.4"), engine=engine,
                         detect_host=lambda: pytest.fail("no GPU asked"), suggest=lambda *a: None,
                         build_image=lambda *a: pytest.fail("no project image")).plan
    assert (plan.tty, plan.interactive, plan.workdir, plan.shm_size, plan.gpus) == (False, False, "/workspace/sub", "3g", None)
    assert load_pin(project_key("p", str((state / "p").resolve()))).image_id == "sha256:stable"


def _gpu_run(state, mini, engine_info, gpus, *, host_name="h100-570", environment=()):
    from dataclasses import replace

    from envman.project.file import load_project
    from envman.project.settings import CliOverrides, UserConfig, merge_settings
    from envman.stack.resolve import resolve
    from tests.unit.run.test_plan import host

    engine = FakeEngine.with_images({STABLE: "sha256:stable"}, engine_info=engine_info)
    _passing("sha256:stable")
    _prepare(state, mini, FakeEngine.with_images({STABLE: "sha256:stable"}), remember_pin=False)
    p = load_project(state / "p")
    stack = resolve(mini, "torch-2.4-cuda12.4")
    settings = replace(merge_settings(p, UserConfig(), CliOverrides(gpus=gpus, gpus_set=True), stack_is_cpu=lambda s: False),
                       environment=tuple(environment))
    asked = []
    h = host(host_name)
    return Q.prepare_run(p, settings, stack, engine=engine, detect_host=lambda: asked.append(1) or h,
                         suggest=lambda s, hh, g: "torch-2.4.1-cuda11.8", build_image=lambda *a: pytest.fail("built"),
                         cwd=state / "p"), asked, stack, h, settings


def test_a_gpu_run_through_the_nvidia_runtime(state, mini):
    from envman.engine.api import EngineInfo

    info = EngineInfo(server_version="27.0", runtimes=("nvidia", "runc"))
    prep, asked, _, _, _ = _gpu_run(state, mini, info, GpuRequest("count", count=1),
                                    environment=[("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("NVIDIA_VISIBLE_DEVICES", "all")])
    p = prep.plan
    assert asked == [1] and (p.gpus, p.gpu_mechanism, p.cdi_devices, p.engine) == (
        GpuRequest("count", count=1), "runtime", (), "docker")
    assert p.environment == (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),)  # selection kept with a GPU request, but not the devices


def test_a_gpu_run_through_cdi_devices(state, mini, tmp_path):
    from envman.engine.api import EngineInfo

    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    info = EngineInfo(server_version="27.0", runtimes=("runc",), cdi_spec_dirs=(str(tmp_path / "cdi"),))
    prep, _, _, _, _ = _gpu_run(state, mini, info, GpuRequest("count", count=1))
    assert (prep.plan.gpu_mechanism, prep.plan.cdi_devices) == ("cdi", ("0",))


def test_a_gpu_run_is_checked_against_the_detected_host_with_the_suggestion(state, mini):
    from envman.engine.api import EngineInfo

    info = EngineInfo(server_version="27.0", runtimes=("nvidia", "runc"))
    with pytest.raises(Q.PreflightError) as e:
        _gpu_run(state, mini, info, GpuRequest("all"), host_name="rtx3090-470")
    assert "use torch-2.4.1-cuda11.8" in e.value.what and "driver 470.57.02" in e.value.what


def test_to_json_names_the_environment_and_never_shows_a_value():
    import json as _json

    d = plan(environment=(("WANDB_API_KEY", "s3cr3t-value"), ("MODE", "offline-xyz"))).to_json()
    assert d["environment"] == ["WANDB_API_KEY", "MODE"]
    text = _json.dumps(d)
    assert "s3cr3t-value" not in text and "offline-xyz" not in text
