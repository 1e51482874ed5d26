"""The probe's GPU architecture arithmetic (``envman/probe/app/arch.py``): which cubins and PTX run on a GPU."""

from __future__ import annotations

import pytest

from envman.probe.app import arch as arch_mod


@pytest.mark.parametrize(
    "cc, archs, ok, via",
    [
        ("8.6", ["sm_80"], True, "sass"),  # same major, newer minor: cubin runs
        ("9.0", ["sm_80", "compute_80"], True, "ptx"),  # only the PTX JITs for sm_90
        ("9.0", ["sm_86"], False, None),  # no cubin for 9.x, no PTX
        ("8.0", ["sm_86"], False, None),  # a newer-minor cubin does not run on an older GPU
        ("9.0", ["sm_90a"], True, "sass"),
        ("10.0", ["sm_90a", "compute_90a"], False, None),  # arch-specific: exact only
        ("12.0", ["sm_100", "compute_120"], True, "ptx"),
        ("10.3", ["sm_100f"], True, "sass"),
        ((7, 5), ["sm_75"], True, "sass"),
        ("8.9", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], True, "sass"),
    ],
)
def test_arch_supported(cc, archs, ok, via):
    got_ok, got_via, reason = arch_mod.arch_supported(cc, archs)
    assert (got_ok, got_via) == (ok, via), reason


def test_arch_missing_reason_names_the_gpu_and_the_list():
    ok, via, reason = arch_mod.arch_supported("9.0", ["sm_86"])
    assert not ok
    assert reason == "no kernel image for sm_90 in this build: arch list is [sm_86]"


@pytest.mark.parametrize(
    "text, parsed",
    [("sm_86", ("sm", 8, 6, "")), ("compute_90", ("compute", 9, 0, "")),
     ("sm_90a", ("sm", 9, 0, "a")), ("8.6", ("sm", 8, 6, "")), ("sm_100", ("sm", 10, 0, "")),
     ("sm_120", ("sm", 12, 0, "")), ("12.1", ("sm", 12, 1, ""))],
)
def test_parse_arch(text, parsed):
    assert arch_mod.parse_arch(text) == parsed


def test_parse_arch_rejects_garbage():
    with pytest.raises(ValueError):
        arch_mod.parse_arch("gfx90a")


def test_expected_arch_list():
    assert arch_mod.expected_arch_list({}) is None
    assert arch_mod.expected_arch_list({"sass_archs": ["8.0", "9.0a"], "ptx_archs": ["9.0"]}) == [
        "sm_80", "sm_90a", "compute_90"]
