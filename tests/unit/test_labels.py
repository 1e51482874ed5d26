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
    assert L.parse(L.candidate_labels("s", "h" * 64)) == L.EnvmanLabels(managed=True, name="s", role=L.ROLE_CANDIDATE,
                                                                         render_hash="h" * 64)
    assert L.parse(L.project_labels("p", "s", "abc")) == L.EnvmanLabels(managed=True, name="s", role=L.ROLE_PROJECT,
                                                                         project="p", project_hash="abc")
    assert L.parse(L.run_labels("p", "s")).role == L.ROLE_RUN
    assert L.parse(L.with_managed(L.smoke_labels("s"))).role == L.ROLE_SMOKE
    for builder in (L.candidate_labels("s", "h"), L.project_labels("p", "s", "h"), L.run_labels("p", "s"), L.smoke_labels("s")):
        assert all(k.startswith(L.PREFIX) for k in builder)
        assert builder.get(L.ROLE) in L.ROLES


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
