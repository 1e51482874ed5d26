"""The probe run over its checks (``envman/probe/app/run.py``): a hung or crashing check is a failure."""

from __future__ import annotations

import threading

from envman.probe.app import contract as contract_mod
from envman.probe.app import run as run_mod
from tests.support.probe_app import FakeLib, check, make_ctx, opts


def test_hung_check_makes_overall_fail():
    release = threading.Event()

    def hang(ctx):
        release.wait(30)
        return contract_mod.PASS, "late", {}

    try:
        doc = run_mod.run_probe(opts(timeout=0.3), ctx=make_ctx(lib=FakeLib()), expect={},
                          checks={"runtime": hang})
    finally:
        release.set()
    assert doc["overall"] == "fail"
    assert check(doc, "runtime")["reason"] == "timed out after 0.3 s"
    assert "runtime: timed out after 0.3 s" in doc["reason"]


def test_exception_in_a_check_is_a_failure_not_a_crash():
    def boom(ctx):
        raise ValueError("kaput")

    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib()), expect={}, checks={"kernel": boom})
    c = check(doc, "kernel")
    assert c["status"] == "fail" and "ValueError: kaput" in c["reason"]
    assert doc["overall"] == "fail"
