"""One check's result record, and running a check in a thread with a time limit."""

import threading
import time
import traceback

from .contract import FAIL, PASS, SKIP


def make_check(name, status, reason, seconds, data=None):
    return {"name": name, "status": status, "reason": reason,
            "seconds": round(float(seconds), 4), "data": data if data is not None else {}}


def _fmt_seconds(x):
    return "%g" % x


def run_check(name, fn, ctx, timeout):
    """Run ``fn(ctx)`` -> ``(status, reason, data)`` in a daemon thread, at most ``timeout`` s.

    A check still running at the limit becomes ``fail`` "timed out after N s" (the thread is
    abandoned); an exception becomes ``fail`` with the traceback's tail in data.
    """
    box = {}

    def target():
        try:
            box["result"] = fn(ctx)
        except BaseException as e:  # noqa: B902 - a check must never take the probe down
            box["error"] = e
            box["traceback"] = traceback.format_exc()

    t0 = time.time()
    th = threading.Thread(target=target, name="envman-probe-" + name)
    th.daemon = True
    th.start()
    th.join(timeout)
    secs = time.time() - t0
    if th.is_alive():
        if ctx is not None:
            ctx.timed_out.append(name)
        return make_check(name, FAIL, "timed out after %s s" % _fmt_seconds(timeout), secs,
                          {"timed_out": True, "timeout_s": timeout})
    if "error" in box:
        e = box["error"]
        tb = box.get("traceback", "").strip().splitlines()[-12:]
        return make_check(name, FAIL, "internal error: %s: %s" % (type(e).__name__, e), secs,
                          {"traceback": tb})
    res = box.get("result")
    try:
        status, reason, data = res
    except (TypeError, ValueError):
        return make_check(name, FAIL, "internal error: check returned %r" % (res,), secs)
    if status not in (PASS, FAIL, SKIP):
        return make_check(name, FAIL, "internal error: bad status %r" % (status,), secs, data)
    return make_check(name, status, str(reason), secs, data)
