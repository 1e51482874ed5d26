"""Running one check under a time limit (``envman/probe/app/check.py``)."""

from __future__ import annotations

import threading
import time

from envman.probe.app import check as check_mod
from tests.support.probe_app import make_ctx


def test_hung_check_fails_with_timeout():
    release = threading.Event()
    ctx = make_ctx()
    t0 = time.time()
    res = check_mod.run_check("kernel", lambda c: release.wait(30), ctx, 0.2)
    release.set()
    assert time.time() - t0 < 5
    assert res["status"] == "fail"
    assert res["reason"] == "timed out after 0.2 s"
    assert res["data"]["timed_out"] is True
    assert ctx.timed_out == ["kernel"]
