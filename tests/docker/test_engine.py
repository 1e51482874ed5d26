"""envman.engine.docker against a real Docker engine, on locally built stand-in bases."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from envman.engine.context import deterministic_tar
from envman.engine.docker import Engine
from envman.engine.api import BuildEvent
from envman.engine.values import GpuRequest, Mount
from envman.errors import BuildError, EngineError

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def base(standin) -> str:
    return standin(standin.default)


def _build(engine: Engine, files: dict, tag: str, labels: dict) -> list[BuildEvent]:
    return list(engine.build(deterministic_tar(files), tag, labels=labels))


def test_build_streams_steps_and_labels_the_image(
    docker_engine: Engine, base: str, unique_tag: Callable[[str], str], test_labels: dict
) -> None:
    tag = unique_tag("build")
    files = {
        "Dockerfile": f"FROM {base}\nARG GREETING\nCOPY hello.txt /hello.txt\nRUN echo \"$GREETING from RUN\" && cat /hello.txt\n".encode(),
        "hello.txt": b"hello from the context\n",
    }
    labels = {**test_labels, "envman.role": "candidate"}
    try:
        events = list(docker_engine.build(deterministic_tar(files), tag, labels=labels, buildargs={"GREETING": "hi"}))
        steps = [e.step for e in events if e.kind == "step"]
        # Four instructions, plus one LABEL step per label the classic builder appends.
        total = 4 + len(labels)
        assert steps == [f"{i}/{total}" for i in range(1, total + 1)]
        logs = [e.text for e in events if e.kind == "log"]
        assert "hi from RUN" in logs and "hello from the context" in logs
        done = events[-1]
        assert done.kind == "done" and done.image_id and done.image_id.startswith("sha256:")

        info = docker_engine.inspect_image(tag)
        assert info is not None and info.id == done.image_id
        assert info.labels["envman.role"] == "candidate"
        assert info.labels["envman.test"] == test_labels["envman.test"]
        assert docker_engine.image_exists(tag)
        found = docker_engine.list_images({**test_labels, "envman.role": "candidate"})
        assert [i.id for i in found] == [done.image_id] and tag in found[0].tags

        # Same context bytes, same cache: a rebuild makes the same image.
        again = list(docker_engine.build(deterministic_tar(files), tag, labels=labels, buildargs={"GREETING": "hi"}))
        assert again[-1].image_id == done.image_id
    finally:
        docker_engine.remove_image(tag, force=True)
    assert not docker_engine.image_exists(tag)
    assert docker_engine.remove_image(tag) is False  # already gone: tolerated


def test_failing_build_raises_build_error_with_tail(
    docker_engine: Engine, base: str, unique_tag: Callable[[str], str], test_labels: dict
) -> None:
    tag = unique_tag("fail")
    files = {"Dockerfile": f"FROM {base}\nRUN echo 'about to fail' && exit 7\n".encode()}
    events: list[BuildEvent] = []
    with pytest.raises(BuildError) as info:
        for event in docker_engine.build(deterministic_tar(files), tag, labels=test_labels):
            events.append(event)
    err = info.value
    assert "non-zero code: 7" in err.what
    assert "about to fail" in err.log_tail
    assert "Step 2/3 : RUN echo 'about to fail'" in err.log_tail
    assert "\n" not in str(err)
    assert events[-1].kind == "error"
    assert not docker_engine.image_exists(tag)


def test_missing_base_is_a_build_error(docker_engine: Engine, unique_tag: Callable[[str], str], test_labels: dict) -> None:
    files = {"Dockerfile": b"FROM envman-test/does-not-exist:never\n"}
    with pytest.raises(BuildError):
        _build(docker_engine, files, unique_tag("nobase"), test_labels)


def test_run_separates_streams_and_removes_the_container(docker_engine: Engine, base: str, test_labels: dict) -> None:
    res = docker_engine.run(
        base,
        ["sh", "-c", "echo out; echo err >&2; cat /usr/local/cuda/version.json; exit 3"],
        labels=test_labels,
        env={"EXTRA": "x"},
    )
    assert res.exit_code == 3 and not res.ok and not res.timed_out
    assert res.stdout.startswith("out\n")
    assert json.loads(res.stdout.split("\n", 1)[1])["cuda"]["version"] == "12.8.1"
    assert res.stderr == "err\n"
    assert docker_engine.list_containers(test_labels) == []


def test_run_env_user_workdir_and_mount(docker_engine: Engine, base: str, test_labels: dict, tmp_path) -> None:
    (tmp_path / "in.txt").write_text("mounted\n")
    tmp_path.chmod(0o777)
    res = docker_engine.run(
        base,
        ["sh", "-c", "id -u; id -g; pwd; cat in.txt; echo $CUDA_VERSION $NVIDIA_VISIBLE_DEVICES; touch out.txt"],
        user="1234:1234",
        mounts=[Mount(str(tmp_path), "/work")],
        workdir="/work",
        labels=test_labels,
    )
    assert res.ok, res.stderr
    assert res.stdout.splitlines() == ["1234", "1234", "/work", "mounted", "12.8.1 all"]
    assert (tmp_path / "out.txt").stat().st_uid == 1234  # files land owned by the requested user


def test_run_adds_managed_label_and_no_new_privileges(docker_engine: Engine, base: str, test_labels: dict) -> None:
    # The container removes itself, so read what the engine recorded while it runs.
    res = docker_engine.run(base, ["sh", "-c", "grep NoNewPrivs /proc/self/status"], labels=test_labels)
    assert res.ok and res.stdout.split() == ["NoNewPrivs:", "1"]


def test_run_timeout_kills(docker_engine: Engine, base: str, test_labels: dict) -> None:
    res = docker_engine.run(base, ["sleep", "60"], labels=test_labels, timeout=2)
    assert res.timed_out and res.exit_code == 124 and not res.ok
    assert docker_engine.list_containers(test_labels) == []


def test_gpus_without_nvidia_runtime_fail_with_the_fix(docker_engine: Engine, base: str, test_labels: dict) -> None:
    if docker_engine.info().nvidia_runtime:
        pytest.skip("this engine has the NVIDIA runtime; the missing-runtime path cannot be shown")
    with pytest.raises(EngineError) as info:
        docker_engine.run(base, ["true"], gpus=GpuRequest("all"), labels=test_labels)
    text = str(info.value)
    assert "GPU requested" in text and "NVIDIA Container Toolkit" in text and "nvidia-ctk runtime configure" in text
    assert "\n" not in text
    assert docker_engine.list_containers(test_labels) == []  # removed despite the failed start


def test_info(docker_engine: Engine) -> None:
    info = docker_engine.info()
    assert info.server_version and info.api_version and info.kind == "docker"
    assert "runc" in info.runtimes
    assert isinstance(info.nvidia_runtime, bool)


def test_tag_and_list(docker_engine: Engine, base: str, unique_tag: Callable[[str], str], test_labels: dict) -> None:
    tag = unique_tag("img")
    files = {"Dockerfile": f"FROM {base}\nLABEL envman.name=tagged\n".encode()}
    image_id = _build(docker_engine, files, tag, test_labels)[-1].image_id
    alias = unique_tag("alias")
    try:
        docker_engine.tag(image_id, alias)
        assert docker_engine.inspect_image(alias).id == image_id
        [img] = docker_engine.list_images(test_labels | {"envman.name": "tagged"})
        assert set(img.tags) == {tag, alias} and img.size > 0 and img.created > 0
    finally:
        docker_engine.remove_image(alias)
        docker_engine.remove_image(tag)
    with pytest.raises(EngineError):
        docker_engine.tag("envman-test/never:there", unique_tag("x"))


def test_standin_is_cached_and_looks_like_cuda(docker_engine: Engine, standin, base: str) -> None:
    info = docker_engine.inspect_image(base)
    labels = info.labels
    assert labels["envman.test-fixture"] == "true" and labels["envman.standin-for"] == base
    env = dict(e.split("=", 1) for e in info.env)
    assert env["CUDA_VERSION"] == "12.8.1" and env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.8"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["PATH"].startswith("/usr/local/nvidia/bin:/usr/local/cuda/bin:")
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
    assert standin(base) == base
    assert docker_engine.inspect_image(base).id == info.id  # reused, not rebuilt


def test_testcontainers_exec_on_standin(docker_engine: Engine, base: str, test_labels: dict) -> None:
    from testcontainers.core.container import DockerContainer

    with DockerContainer(base).with_command("sleep 30").with_kwargs(labels=dict(test_labels)) as container:
        wrapped = container.get_wrapped_container()
        assert wrapped.labels["envman.test"] == test_labels["envman.test"]
        code, out = wrapped.exec_run(["sh", "-c", "test -f /usr/local/cuda/version.json && echo $CUDA_VERSION"])
        assert code == 0 and out.decode().strip() == "12.8.1"
        assert [c.id for c in docker_engine.list_containers(test_labels)] == [wrapped.id]
    assert docker_engine.list_containers(test_labels) == []


@pytest.mark.slow
def test_trixie_standin_installs_python_from_the_mirror(standin, docker_engine: Engine, test_labels: dict) -> None:
    """Both suites work, and apt inside a container reaches the mirror the host uses."""
    ref = standin("envman-test/standin:trixie-cuda12.8.1", suite="trixie", cuda_version="12.8.1")
    res = docker_engine.run(
        ref,
        ["sh", "-c", "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3 >/dev/null && python3 -V"],
        labels=test_labels,
        timeout=600,
    )
    assert res.ok, res.stderr[-2000:]
    assert res.stdout.strip().startswith("Python 3.13")
