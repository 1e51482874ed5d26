"""envman.engine.streams: the classic builder's JSON chunks as build events (steps, log, done), a
failed build's bounded log tail without terminal escapes, and a push or pull's progress lines."""

from __future__ import annotations

import pytest

from envman.engine.api import BuildEvent
from envman.engine.streams import LOG_TAIL_LINES, parse_build_stream
from envman.errors import BuildError

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


def test_a_failed_builds_log_tail_and_error_carry_no_terminal_escapes():
    """pip and apt colour their warnings; the tail printed after a failed build showed them as
    ``| \\x1b[0m\\x1b[91mWARNING: ...``. Other control characters stay, for printable() to show."""
    from envman.engine.streams import BuildStreamParser
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


def test_push_progress_is_a_line_per_layer_state_and_each_quarter_of_an_upload():
    """`envman push` was silent for over a minute: the engine's push stream now becomes a line
    per layer as its state changes, and one per quarter of a large layer's upload."""
    from envman.engine.streams import layer_progress

    big = 812_000_000
    stream = [
        {"status": "The push refers to repository [127.0.0.1:5000/lab/envman/x]"},
        {"status": "Preparing", "id": "1a2b3c4d5e6f", "progressDetail": {}},
        {"status": "Preparing", "id": "ffff0000aaaa", "progressDetail": {}},
        {"status": "Layer already exists", "id": "ffff0000aaaa", "progressDetail": {}},
        {"status": "Waiting", "id": "1a2b3c4d5e6f", "progressDetail": {}},
        *[{"status": "Pushing", "id": "1a2b3c4d5e6f", "progressDetail": {"current": c, "total": big}}
          for c in range(0, big + 1, big // 40)],
        {"status": "Pushed", "id": "1a2b3c4d5e6f", "progressDetail": {}},
        {"status": "latest: digest: sha256:" + "a" * 64 + " size: 1234", "progressDetail": {}},
        {"aux": {"Tag": "latest", "Digest": "sha256:" + "a" * 64}},
        "not a mapping", {"status": "x", "id": "y" * 200},
    ]
    seen: dict = {}
    lines = [line for item in stream if (line := layer_progress(item, seen))]
    assert lines == [
        "1a2b3c4d5e6f: Preparing", "ffff0000aaaa: Preparing", "ffff0000aaaa: Layer already exists",
        "1a2b3c4d5e6f: Waiting", "1a2b3c4d5e6f: Pushing",
        "1a2b3c4d5e6f: Pushing 25% of 812 MB", "1a2b3c4d5e6f: Pushing 50% of 812 MB",
        "1a2b3c4d5e6f: Pushing 75% of 812 MB", "1a2b3c4d5e6f: Pushed",
    ]
