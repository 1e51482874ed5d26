"""The one reader of a build's events (envman/images/events.py): each event logged on one line and
handed on, the last step kept for a failure, the image the build reported kept."""

from __future__ import annotations

import io

import pytest

from envman.engine.api import BuildEvent
from envman.images.events import BuildStream


def test_every_event_is_logged_on_one_line_and_handed_on_in_order():
    log, seen = io.StringIO(), []
    events = [BuildEvent("step", "Step 1/2 : FROM x"), BuildEvent("log", "fetching\n"),
              BuildEvent("step", "Step 2/2 : RUN y"), BuildEvent("done", "built sha256:1", image_id="sha256:1")]
    stream = BuildStream(log=log, on_event=seen.append).read(events)
    assert seen == events
    assert log.getvalue() == "Step 1/2 : FROM x\nfetching\nStep 2/2 : RUN y\nbuilt sha256:1\n"
    assert stream.step == "Step 2/2 : RUN y" and stream.image_id == "sha256:1"


def test_a_build_that_fails_leaves_the_step_it_failed_in():
    def failing():
        yield BuildEvent("step", "Step 3/9 : RUN pip install x")
        raise RuntimeError("the build broke")

    stream = BuildStream()
    with pytest.raises(RuntimeError):
        stream.read(failing())
    assert stream.step == "Step 3/9 : RUN pip install x" and stream.image_id is None


def test_no_log_and_no_subscriber_still_reads_to_the_end():
    stream = BuildStream().read([BuildEvent("done", "built", image_id=None)])
    assert stream.image_id is None and stream.step is None
