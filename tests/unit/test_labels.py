"""envman.labels: the one home of every envman.* label name and its parsing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman import labels as L
from envman.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def test_parse_reads_every_known_label() -> None:
    got = L.parse({
        L.MANAGED: "true", L.NAME: "torch-2.4-cpu", L.ROLE: "project", L.PROJECT: "demo",
        L.PROJECT_HASH: "0123456789abcdef", L.RENDER_HASH: "f" * 64, L.VERSION: "0.1.0", L.STACK: "{}",
        "org.opencontainers.image.title": "ignored",
    })
    assert got == L.EnvmanLabels(managed=True, name="torch-2.4-cpu", role="project", project="demo",
                                 project_hash="0123456789abcdef", render_hash="f" * 64, version="0.1.0", stack_json="{}")


@pytest.mark.parametrize("raw", [None, {}, {L.MANAGED: "True"}, {L.MANAGED: "yes"}, {L.MANAGED: ""}])
def test_parse_is_strict_about_managed_and_tolerant_of_absence(raw) -> None:
    got = L.parse(raw)
    assert got.managed is False and got.name is None and got.project is None


def test_empty_values_read_as_absent() -> None:
    assert L.parse({L.NAME: "", L.PROJECT: ""}) == L.EnvmanLabels()


def test_builders_agree_with_parse() -> None:
    assert L.parse(L.candidate_labels("s", "h" * 64, 1001, "alice")) == L.EnvmanLabels(
        managed=True, name="s", role=L.ROLE_CANDIDATE, render_hash="h" * 64, built_by_uid=1001, built_by_user="alice")
    got = L.parse(L.project_labels("p", "s", "abc", 0, "root"))
    assert (got.role, got.project, got.project_hash, got.built_by_uid, got.smoke) == (L.ROLE_PROJECT, "p", "abc", 0, None)
    assert L.parse(L.run_labels("p", "s")).role == L.ROLE_RUN
    assert L.parse(L.with_managed(L.smoke_labels("s"))).role == L.ROLE_SMOKE
    for builder in (L.candidate_labels("s", "h", 1, "u"), L.project_labels("p", "s", "h", 1, "u"),
                    L.run_labels("p", "s"), L.smoke_labels("s")):
        assert all(k.startswith(L.PREFIX) for k in builder)
        assert builder.get(L.ROLE) in L.ROLES


def _verdict(**kw) -> L.SmokeVerdict:
    base = dict(status="pass", reason="all good", report_digest="sha256:" + "a" * 64, checks="cuda=pass gemm=pass",
                gpus_requested=True, image_id="sha256:" + "b" * 64, by_uid=1002, by_user="bob", at=1700000000,
                rootfs="sha256:" + "c" * 64)
    return L.SmokeVerdict(**{**base, **kw})


def test_smoke_verdict_round_trips_through_labels() -> None:
    v = _verdict()
    assert L.parse_smoke(v.to_labels()) == v
    assert L.parse({**L.MANAGED_LABELS, **v.to_labels()}).smoke == v


@pytest.mark.parametrize("bad", [
    {L.SMOKE_STATUS: "PASS"}, {L.SMOKE_STATUS: "passed"}, {L.SMOKE_STATUS: ""}, {},
])
def test_an_unknown_or_missing_status_is_no_verdict(bad) -> None:
    assert L.parse_smoke({**_verdict().to_labels(), **bad} if bad else {}) is None


@pytest.mark.parametrize("key,value", [
    (L.SMOKE_BY_UID, "-1"), (L.SMOKE_BY_UID, "1e3"), (L.SMOKE_BY_UID, "٣"), (L.SMOKE_BY_UID, "9" * 40),
    (L.SMOKE_AT, "yesterday"), (L.SMOKE_REPORT_DIGEST, "sha256:xyz"), (L.SMOKE_ROOTFS, "md5:" + "0" * 32),
])
def test_malformed_fields_read_as_absent_not_as_errors(key, value) -> None:
    got = L.parse_smoke({**_verdict().to_labels(), key: value})
    assert got is not None and got.status == "pass"
    field = {L.SMOKE_BY_UID: "by_uid", L.SMOKE_AT: "at", L.SMOKE_REPORT_DIGEST: "report_digest",
             L.SMOKE_ROOTFS: "rootfs"}[key]
    assert getattr(got, field) is None


def test_cleared_smoke_labels_hide_an_inherited_verdict() -> None:
    inherited = {**_verdict().to_labels(), **L.cleared_smoke_labels()}
    assert L.parse_smoke(inherited) is None


def test_long_reasons_are_one_bounded_line() -> None:
    labels = _verdict(reason="line one\nline two " + "x" * 5000).to_labels()
    assert "\n" not in labels[L.SMOKE_REASON] and len(labels[L.SMOKE_REASON]) <= L.SMOKE_REASON_MAX


def test_built_by_uid_parses_only_digits() -> None:
    assert L.parse({L.BUILT_BY_UID: "1001"}).built_by_uid == 1001
    assert L.parse({L.BUILT_BY_UID: " 1001"}).built_by_uid is None
    assert L.parse({L.BUILT_BY_UID: "root"}).built_by_uid is None


def test_namespace_is_enforced() -> None:
    assert L.namespaced({"envman.x": "1"}) == {"envman.x": "1"}
    with pytest.raises(UserError, match="'envmanx' is outside"):
        L.namespaced({"envman.x": "1", "envmanx": "2"})


def test_no_label_literals_outside_labels_module() -> None:
    """Label names live in envman/labels.py; other modules import them (the file name envman.toml
    and non-label identifiers are not labels)."""
    literal = re.compile(r"""["'](envman\.(?:managed|name|stack|version|render-hash|role|project|project-hash|smoke\.[a-z-]+|built-by\.[a-z-]+))["'=]""")
    offenders = []
    for path in sorted((ROOT / "envman").rglob("*.py")):
        if path.name == "labels.py" or "probe" in path.parts:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if literal.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
