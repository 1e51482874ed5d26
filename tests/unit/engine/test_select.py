"""Engine selection (Docker or rootless Podman), its kind, and what a Podman run looks like."""

from __future__ import annotations

import os
import socket

import pytest

from envman.engine import select as ES
from envman.errors import UserError
from envman.project.file import GpuRequest
from envman.stack.resolve import resolve
from dataclasses import replace

from envman.engine.api import EngineInfo
from envman.engine.facts import DockerFacts
from envman.run.plan import docker_argv
from envman.run.preflight import preflight
from tests.support.cdi import FAKE_NVIDIA_CDI

from tests.unit.run.test_plan import GOOD_IMAGE, errors, host, plan

UID = 1234


def usable(*paths):
    ok = set(paths)
    return lambda path, uid=None: path in ok


def test_docker_host_wins_then_config_then_docker_then_podman():
    pod = f"/tmp/podman-run-{UID}/podman/podman.sock"
    both = usable(ES.DOCKER_SOCKET, pod)
    assert ES.select_engine({"DOCKER_HOST": "tcp://1.2.3.4:2375"}, "unix:///x.sock", uid=UID, usable=both) == \
        ES.EngineAddress("tcp://1.2.3.4:2375", "DOCKER_HOST")
    assert ES.select_engine({}, "unix:///x.sock", uid=UID, usable=both).source == "config"
    assert ES.select_engine({}, None, uid=UID, usable=both).url == f"unix://{ES.DOCKER_SOCKET}"
    got = ES.select_engine({}, None, uid=UID, usable=usable(pod))
    assert got == ES.EngineAddress(f"unix://{pod}", "rootless podman socket")
    assert ES.select_engine({}, None, uid=UID, usable=usable()).source == "default"


def test_xdg_runtime_dir_socket_comes_first_and_relative_dirs_are_ignored():
    assert ES.podman_socket_candidates(7, {"XDG_RUNTIME_DIR": "/run/user/7"})[0] == "/run/user/7/podman/podman.sock"
    assert ES.podman_socket_candidates(7, {"XDG_RUNTIME_DIR": "relative"})[0] == "/run/user/7/podman/podman.sock"


def test_a_socket_of_another_user_or_a_plain_file_is_not_an_engine(tmp_path):
    sock_path = str(tmp_path / "podman.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock_path)
    try:
        assert ES._usable_socket(sock_path, os.getuid())
        assert not ES._usable_socket(sock_path, os.getuid() + 1)  # planted by someone else
        (tmp_path / "file.sock").write_text("")
        assert not ES._usable_socket(str(tmp_path / "file.sock"), os.getuid())
        assert not ES._usable_socket(str(tmp_path / "missing.sock"))
    finally:
        s.close()


@pytest.mark.parametrize("bad", ["tcp://0.0.0.0:2375", "unix://relative.sock", "/var/run/docker.sock", 3, None,
                                 "unix:///a/../b.sock", "unix:///x\n.sock", "unix:///" + "a" * 5000])
def test_engine_host_in_config_must_be_an_absolute_unix_socket(bad):
    with pytest.raises(UserError, match="engine host must be unix:///ABSOLUTE/PATH"):
        ES.check_engine_host(bad, where="config.toml: [engine].host")


def test_config_engine_table_is_validated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    assert ES.config_engine_host() is None
    (tmp_path / "config.toml").write_text('[engine]\nhost = "unix:///run/user/1/podman/podman.sock"\n')
    assert ES.config_engine_host() == "unix:///run/user/1/podman/podman.sock"
    (tmp_path / "config.toml").write_text('[engine]\nsocket = "x"\n')
    with pytest.raises(UserError, match="unknown key engine.socket"):
        ES.config_engine_host()
    (tmp_path / "config.toml").write_text('engine = "podman"\n')
    with pytest.raises(UserError, match=r"\[engine\] must be a table"):
        ES.config_engine_host()


PODMAN_VERSION = {"Version": "4.3.1", "ApiVersion": "1.41",
                  "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}, {"Name": "Conmon"}]}


def test_kind_from_the_engines_own_answers():
    assert ES.kind_from(PODMAN_VERSION, None, {"host": {"security": {"rootless": True}}}) == \
        ES.EngineKind("podman", "4.3.1", True, "1.41")
    assert ES.kind_from(PODMAN_VERSION, None, None).rootless is False
    docker = ES.kind_from({"Version": "27.3.1", "Components": [{"Name": "Engine"}]},
                          {"ServerVersion": "27.3.1", "SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless"]},
                          None)
    assert docker == ES.EngineKind("docker", "27.3.1", True, "")


def test_docker_facts_say_podman_from_the_socket(tmp_path):
    import threading

    from tests.support.socket_engine import SocketEngine

    answers = {"/version": PODMAN_VERSION, "/v4.0.0/libpod/info": {"host": {"security": {"rootless": True}}},
               "/info": {"ServerVersion": "4.3.1", "Runtimes": {"runc": {}, "nvidia": {}}}}

    class Podman(SocketEngine):  # a ping without headers: /version names the engine
        def answer(self, path):
            return (200, answers[path]) if path in answers else (200, "OK") if path == "/_ping" else (404, {"message": "no"})

    sock = str(tmp_path / "p.sock")
    srv = Podman(sock)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        facts = DockerFacts(socket=sock, source="rootless podman socket")
        info = facts.info()
    finally:
        srv.shutdown()
        srv.server_close()
    assert (info.kind, info.rootless, info.url, info.source) == \
        ("podman", True, f"unix://{sock}", "rootless podman socket")
    assert "nvidia" in info.runtimes and info.nvidia_runtime is False  # Podman's Docker API ignores GPU requests
    assert info.cdi_spec_dirs == ES.PODMAN_CDI_DIRS and info.cdi_gpu_devices is not None


# --------------------------------------------------------------------------- CDI specs


def test_cdi_device_names_from_yaml_and_json_specs(tmp_path):
    (tmp_path / "nvidia.yaml").write_text(FAKE_NVIDIA_CDI)
    (tmp_path / "other.yaml").write_text(FAKE_NVIDIA_CDI.replace("nvidia.com/gpu", "vendor.com/fpga").replace('"0"', '"9"'))
    (tmp_path / "gpu.json").write_text('{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "GPU-abc"}]}')
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "notes.txt").write_text("kind: nvidia.com/gpu\ndevices:\n  - name: 7\n")
    assert ES.cdi_gpu_devices([str(tmp_path), str(tmp_path / "missing")]) == {"0", "all", "GPU-abc"}


def test_podman_cdi_names_match_the_run_path():
    assert GpuRequest("all").cdi_devices == ("all",) and GpuRequest("count", count=2).cdi_devices == ("0", "1")
    assert GpuRequest("devices", devices=("GPU-1", "3")).cdi_devices == ("GPU-1", "3")
    assert GpuRequest("count", count=0).cdi_devices == ()


# --------------------------------------------------------------------------- the podman argv


def test_podman_run_goes_through_the_podman_cli_with_cdi_devices_and_keep_id():
    p = plan(engine="podman", engine_url="unix:///tmp/podman-run-1000/podman/podman.sock", rootless=True,
             gpus=GpuRequest("devices", devices=("0",)), gpu_mechanism="cdi", cdi_devices=("0",), tty=True)
    argv = docker_argv(p)
    assert argv[:6] == ["podman", "--remote", "--url", "unix:///tmp/podman-run-1000/podman/podman.sock", "run", "--tty"]
    assert argv[argv.index("--device") + 1] == "nvidia.com/gpu=0" and "--gpus" not in argv
    assert argv[argv.index("--userns") + 1] == "keep-id" and "--user" in argv
    assert "--security-opt" in argv and "no-new-privileges" in argv


def test_podman_never_gets_gpus_flag_even_if_the_plan_says_runtime():
    argv = docker_argv(plan(engine="podman", gpus=GpuRequest("all"), gpu_mechanism="runtime", cdi_devices=("all",)))
    assert "--gpus" not in argv and "nvidia.com/gpu=all" in argv and argv[:2] == ["podman", "run"]
    assert "--userns" not in argv  # rootful podman: uids are the host's


def test_docker_argv_is_unchanged_for_docker():
    argv = docker_argv(plan(gpus=GpuRequest("all")))
    assert argv[:3] == ["docker", "run", "--rm"] and argv[argv.index("--gpus") + 1] == "all"


# --------------------------------------------------------------------------- podman preflight


def podman_info(devices):
    raw = {"ServerVersion": "4.3.1", "Runtimes": {"crun": {}, "runc": {}}}
    info = EngineInfo.from_api(raw, ES.EngineKind("podman", "4.3.1", True), url="unix:///p.sock", source="config",
                               local=True)
    return replace(info, cdi_spec_dirs=(), cdi_gpu_devices=tuple(devices))


def test_podman_gpu_run_without_a_cdi_spec_is_refused_not_started(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    msgs = errors(preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=podman_info([]),
                            image=GOOD_IMAGE))
    assert any("Podman has no CDI spec for nvidia.com/gpu" in m and "envman cdi generate -o /etc/cdi/envman-nvidia.json" in m for m in msgs)


def test_podman_gpu_run_asking_for_a_device_the_spec_lacks_is_refused(mini, tmp_path):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    (tmp_path / "nvidia.yaml").write_text(FAKE_NVIDIA_CDI)
    info = replace(podman_info(["0", "all"]), cdi_spec_dirs=(str(tmp_path),))
    assert info.gpu_mechanism() == "cdi"
    ok = preflight(stack, GpuRequest("devices", devices=("0",)), host=host("h100-570"), engine_info=info,
                   image=GOOD_IMAGE)
    assert errors(ok) == []
    bad = errors(preflight(stack, GpuRequest("count", count=2), host=host("mixed-535"), engine_info=info,
                           image=GOOD_IMAGE))
    assert any("no device nvidia.com/gpu=1 (it has: 0, all)" in m for m in bad)
