"""envman.engine.docker without a daemon: tar determinism, build-stream parsing, GPU requests, errors."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envman.engine.context import deterministic_tar, files_from_dir
from envman.engine.docker import (
    LOG_TAIL_LINES,
    BuildEvent,
    Engine,
    gpu_device_requests,
    parse_build_stream,
)
from envman.errors import BuildError, EngineError, UserError
from envman.engine.values import GpuRequest

# --------------------------------------------------------------------------- deterministic_tar

FILES = {
    "Dockerfile": b"FROM scratch\nCOPY . /ctx\n",
    "scripts/entry.sh": (b"#!/bin/sh\necho hi\n", 0o755),
    "requirements.txt": b"numpy==2.1.0\n",
    "a/b/c.txt": b"deep\n",
}


def test_tar_is_byte_identical_across_calls() -> None:
    assert deterministic_tar(FILES) == deterministic_tar(FILES)


def test_tar_ignores_dict_insertion_order() -> None:
    reversed_files = dict(reversed(list(FILES.items())))
    assert list(reversed_files) != list(FILES)
    assert deterministic_tar(reversed_files) == deterministic_tar(FILES)


def test_tar_metadata_is_normalised() -> None:
    with tarfile.open(fileobj=io.BytesIO(deterministic_tar(FILES))) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names)
        assert {"a", "a/b", "scripts"} <= set(names)  # parents are explicit
        for m in members:
            assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        modes = {m.name: m.mode for m in members}
        assert modes["scripts/entry.sh"] == 0o755
        assert modes["Dockerfile"] == 0o644
        assert modes["a/b"] == 0o755
        assert tar.extractfile("a/b/c.txt").read() == b"deep\n"


def test_tar_content_change_changes_bytes() -> None:
    changed = {**FILES, "requirements.txt": b"numpy==2.1.1\n"}
    assert deterministic_tar(changed) != deterministic_tar(FILES)


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside", "a/../../x", "", "."])
def test_tar_refuses_names_outside_the_context(bad: str) -> None:
    with pytest.raises(UserError):
        deterministic_tar({bad: b"x"})


def test_tar_refuses_file_that_is_also_a_directory() -> None:
    with pytest.raises(UserError, match="both a file and a directory"):
        deterministic_tar({"a": b"x", "a/b": b"y"})


def test_files_from_dir_ignores_mtimes_and_owner_bits(tmp_path: Path) -> None:
    def make(root: Path, mtime: int, umask_mode: int) -> bytes:
        (root / "sub").mkdir(parents=True)
        (root / "Dockerfile").write_bytes(b"FROM scratch\n")
        (root / "sub" / "run.sh").write_bytes(b"#!/bin/sh\n")
        (root / "sub" / "run.sh").chmod(umask_mode)
        (root / "Dockerfile").chmod(0o600)
        for p in (root / "Dockerfile", root / "sub" / "run.sh", root / "sub"):
            os.utime(p, (mtime, mtime))
        return deterministic_tar(files_from_dir(root))

    first = make(tmp_path / "one", 1_000_000, 0o755)
    second = make(tmp_path / "two", 1_700_000_000, 0o700)
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert tar.getmember("sub/run.sh").mode == 0o755
        assert tar.getmember("Dockerfile").mode == 0o644


def test_files_from_dir_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/etc/passwd")
    with pytest.raises(UserError, match="symlink"):
        files_from_dir(tmp_path)


# --------------------------------------------------------------------------- build stream

# Recorded from the classic builder (Docker 20.10, API 1.41), trimmed.
OK_STREAM = [
    {"stream": "Step 1/3 : FROM nvidia/cuda:12.8.1-base-ubuntu24.04"},
    {"stream": "\n"},
    {"stream": " ---> cf3cd0a9439b\n"},
    {"stream": "Step 2/3 : RUN echo hello"},
    {"stream": "\n"},
    {"stream": " ---> Running in 5a1b2c3d4e5f\n"},
    {"stream": "hel"},  # a RUN line split across chunks
    {"stream": "lo\n"},
    {"stream": "Removing intermediate container 5a1b2c3d4e5f\n"},
    {"stream": " ---> 0123456789ab\n"},
    {"stream": "Step 3/3 : LABEL envman.managed=true\n ---> Running in 77aa\n"},
    {"stream": " ---> 9f8e7d6c5b4a\n"},
    {"aux": {"ID": "sha256:9f8e7d6c5b4a" + "0" * 52}},
    {"stream": "Successfully built 9f8e7d6c5b4a\n"},
    {"stream": "Successfully tagged envman-test/x:1\n"},
]

FAIL_STREAM = [
    {"stream": "Step 1/2 : FROM nvidia/cuda:12.8.1-base-ubuntu24.04\n"},
    {"stream": " ---> cf3cd0a9439b\n"},
    {"stream": "Step 2/2 : RUN echo oops >&2 && exit 3\n"},
    {"stream": " ---> Running in 1234abcd\n"},
    {"stream": "oops\n"},
    {
        "errorDetail": {"code": 3, "message": "The command '/bin/sh -c echo oops >&2 && exit 3' returned a non-zero code: 3"},
        "error": "The command '/bin/sh -c echo oops >&2 && exit 3' returned a non-zero code: 3",
    },
]


def test_stream_steps_logs_and_done() -> None:
    events = list(parse_build_stream(OK_STREAM, tag="envman-test/x:1"))
    steps = [e for e in events if e.kind == "step"]
    assert [e.step for e in steps] == ["1/3", "2/3", "3/3"]
    assert steps[0].text == "Step 1/3 : FROM nvidia/cuda:12.8.1-base-ubuntu24.04"
    assert BuildEvent("log", "hello") in events  # the split line was joined
    assert all(e.text for e in events)  # no empty events
    assert events[-1].kind == "done"
    assert events[-1].image_id == "sha256:9f8e7d6c5b4a" + "0" * 52


def test_stream_without_aux_takes_id_from_successfully_built() -> None:
    stream = [c for c in OK_STREAM if "aux" not in c]
    assert list(parse_build_stream(stream))[-1].image_id == "9f8e7d6c5b4a"


def test_stream_error_maps_to_build_error_with_tail() -> None:
    events: list[BuildEvent] = []
    with pytest.raises(BuildError) as info:
        for event in parse_build_stream(FAIL_STREAM, tag="envman/t:1"):
            events.append(event)
    err = info.value
    assert "returned a non-zero code: 3" in err.what
    assert "oops" in err.log_tail
    assert "Step 2/2" in err.log_tail
    assert err.where == "build envman/t:1"
    assert "\n" not in str(err)
    assert events[-1].kind == "error"


def test_stream_tail_is_bounded() -> None:
    stream = [{"stream": f"line {i}\n"} for i in range(200)] + [{"error": "boom"}]
    with pytest.raises(BuildError) as info:
        list(parse_build_stream(stream))
    tail = info.value.log_tail.splitlines()
    assert len(tail) == LOG_TAIL_LINES
    assert tail[-1] == "boom"
    assert tail[-2] == "line 199"


def test_stream_that_ends_without_image_is_an_error() -> None:
    with pytest.raises(BuildError, match="without an image id"):
        list(parse_build_stream([{"stream": "Step 1/1 : FROM x\n"}]))


def test_stream_pull_status_becomes_log() -> None:
    events = list(parse_build_stream([{"status": "Pulling fs layer", "id": "abc"}, *OK_STREAM]))
    assert events[0] == BuildEvent("log", "abc: Pulling fs layer")


# --------------------------------------------------------------------------- GPUs


def test_gpus_all() -> None:
    assert gpu_device_requests(GpuRequest("all")) == [{"driver": "", "count": -1, "capabilities": [["gpu"]]}]


def test_gpus_count() -> None:
    assert gpu_device_requests(GpuRequest("count", count=2)) == [{"driver": "", "count": 2, "capabilities": [["gpu"]]}]


def test_gpus_ids() -> None:
    assert gpu_device_requests(GpuRequest("devices", devices=("0", "GPU-1a2b"))) == [
        {"driver": "", "device_ids": ["0", "GPU-1a2b"], "capabilities": [["gpu"]]}
    ]


def test_gpus_none() -> None:
    assert gpu_device_requests(None) == []


@pytest.mark.parametrize("bad", [GpuRequest("count", count=0), GpuRequest("count", count=-1),
                                 GpuRequest("count", count=True), GpuRequest("some"),  # type: ignore[arg-type]
                                 GpuRequest("devices"), GpuRequest("devices", devices=("0;rm",)),
                                 GpuRequest("devices", devices=("0", ""))])
def test_gpus_invalid(bad: GpuRequest) -> None:
    with pytest.raises(UserError):
        gpu_device_requests(bad)


def test_gpu_requests_are_valid_sdk_device_requests() -> None:
    from docker.types import DeviceRequest

    req = DeviceRequest(**gpu_device_requests(GpuRequest("all"))[0])
    assert req == {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}


# --------------------------------------------------------------------------- connection


def test_unreachable_engine_is_one_line(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/nothing-here.sock"
    with pytest.raises(EngineError) as info:
        Engine.connect(base_url=url, timeout=2)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"Docker engine not reachable at {url}")
    assert "start dockerd" in text and "DOCKER_HOST" in text


def test_unreachable_engine_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"unix://{tmp_path}/absent.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    with pytest.raises(EngineError, match="not reachable at unix://"):
        Engine.connect(timeout=2)


def test_importing_engine_does_not_import_docker() -> None:
    code = "import sys, envman.engine.docker; sys.exit(1 if 'docker' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_labels_outside_namespace_are_refused() -> None:
    from envman.labels import with_managed as _with_managed

    assert _with_managed({"envman.project": "p"}) == {"envman.project": "p", "envman.managed": "true"}
    with pytest.raises(UserError, match="outside"):
        _with_managed({"maintainer": "x"})


def test_a_failed_builds_log_tail_and_error_carry_no_terminal_escapes():
    """pip and apt colour their warnings; the tail printed after a failed build showed them as
    ``| \\x1b[0m\\x1b[91mWARNING: ...``. Other control characters stay, for printable() to show."""
    from envman.engine.docker import BuildStreamParser
    from envman.errors import BuildError

    p = BuildStreamParser(tag="t")
    p.feed({"stream": "Step 1/2 : RUN pip install x\n"})
    p.feed({"stream": "\x1b[0m\x1b[91mWARNING: Retrying \x1b]0;title\x07(ok)\x1b(B\x1b[0m\n"})
    p.feed({"stream": "keep\x07this\n"})
    with pytest.raises(BuildError) as exc:
        p.feed({"errorDetail": {"message": "\x1b[31mThe command returned a non-zero code: 1\x1b[0m"}})
    assert "\x1b" not in exc.value.log_tail and "\x1b" not in exc.value.what
    assert "WARNING: Retrying (ok)" in exc.value.log_tail.splitlines()
    assert "keep\x07this" in exc.value.log_tail.splitlines()
    assert exc.value.what == "The command returned a non-zero code: 1"


def test_buildkits_plain_progress_lines_carry_no_terminal_escapes():
    from envman.engine.builder import PlainProgressParser

    p = PlainProgressParser(tag="t")
    events = p.feed("#5 1.2 \x1b[33mWARNING: apt does not have a stable CLI\x1b[0m")
    assert [e.text for e in events] == ["WARNING: apt does not have a stable CLI"] and "\x1b" not in p.log_tail
