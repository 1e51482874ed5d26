"""envman.images.prune by rule: each listed row field by field, and what prune takes: a row only
when no rule keeps it, a rebuilt base only with the last image on it, every tag unforced."""

from __future__ import annotations

import pytest

from envman import labels as L
from envman.engine.api import ContainerInfo
from envman.images import build as B, prune as P
from envman.state import load_report
from tests.support.fake_engine import FakeEngine


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def test_each_listed_row_field_by_field():
    engine = FakeEngine()
    v = L.SmokeVerdict(status="pass", at=1)
    stack_img = engine.add_image("envman/s:latest", labels={**L.MANAGED_LABELS, L.NAME: "s", **L.builder_labels(7, "u"),
                                                           L.ROLE: L.ROLE_CANDIDATE, **v.to_labels()}, created=5, size=9)
    proj = engine.add_image("envman/project-p:x", labels={**L.MANAGED_LABELS, L.NAME: "s", L.ROLE: L.ROLE_PROJECT,
                                                          L.PROJECT: "p", **v.to_labels()}, created=9)
    base = engine.add_image("envman/base:x", labels={**L.MANAGED_LABELS, L.ROLE: L.ROLE_BASE, L.BASE_RECIPE: "r"}, created=1)
    plain = engine.add_image("envman/t:cand", labels={**L.MANAGED_LABELS, L.NAME: "t"}, created=3)
    engine.add_image("other:x", labels={L.NAME: "z"})
    rows = {r.image_id: r for r in P.list_envman_images(engine)}
    assert set(rows) == {stack_img, proj, base, plain}
    assert rows[stack_img] == P.ImageRow("s", ("envman/s:latest",), stack_img, 9, 5, True, "pass", None, 7, "u",
                                         L.ROLE_CANDIDATE, None)
    assert (rows[proj].smoke, rows[proj].project, rows[proj].stable) == ("untested", "p", False)
    assert (rows[base].smoke, rows[base].stack, rows[base].base_recipe) == ("base", "?", "r")
    assert rows[plain].smoke == "untested"
    assert [r.image_id for r in P.list_envman_images(engine)] == [base, proj, stack_img, plain]  # by stack, newest first


def test_a_base_made_by_base_make_is_listed_as_a_base_by_its_name():
    engine = FakeEngine()
    img = engine.add_image("envman/local-base:debian12", labels={**L.MANAGED_LABELS, L.ROLE: L.ROLE_LOCAL_BASE,
                                                                 L.NAME: "envman/local-base:debian12"})
    (row,) = P.list_envman_images(engine)
    assert (row.image_id, row.smoke, row.stack, row.role) == (img, "base", "envman/local-base:debian12", "local-base")


def _row(image_id, **kw):
    base = dict(stack="s", tags=(f"envman/s:{image_id}",), image_id=image_id, size=1, created=0, stable=False,
                smoke="pass", built_by_uid=1)
    base.update(kw)
    return P.ImageRow(**base)


@pytest.mark.parametrize("row,scope,taken", [
    (_row("a"), P.PruneScope(uid=1), True),
    (_row("a", stable=True), P.PruneScope(uid=1), False),
    (_row("a"), P.PruneScope(uid=1, in_use=frozenset({"a"})), False),
    (_row("a"), P.PruneScope(uid=1, in_use=frozenset({"envman/s:a"})), False),
    (_row("a", built_by_uid=2), P.PruneScope(uid=1), False),
    (_row("a", built_by_uid=None), P.PruneScope(uid=1), False),
    (_row("a", built_by_uid=2), P.PruneScope(uid=1, all_users=True), True),
    (_row("a"), P.PruneScope(uid=1, keep_ids=frozenset({"a"})), False),
    (_row("a"), P.PruneScope(uid=1, keep=frozenset({"envman/s:a"})), False),
    (_row("a", project="p"), P.PruneScope(uid=1, keep_projects=frozenset({"p"})), False),
    (_row("a", project="q"), P.PruneScope(uid=1, keep_projects=frozenset({"p"})), True),
    (_row("a", role=L.ROLE_LOCAL_BASE), P.PruneScope(uid=1), False),  # base make's: the user's matrix names it
    (_row("a", role=L.ROLE_LOCAL_BASE, built_by_uid=2), P.PruneScope(uid=1, all_users=True), False),
])
def test_prune_takes_a_row_only_when_no_rule_keeps_it(row, scope, taken):
    assert P.prune_selection([row], scope) == ([row] if taken else [])


def test_a_rebuilt_base_goes_only_with_the_last_image_on_it():
    base = _row("b", role=L.ROLE_BASE, base_recipe="r")
    on_it = _row("c", base_recipe="r")
    kept_on_it = _row("d", base_recipe="r", stable=True)
    assert P.prune_selection([base, on_it], P.PruneScope(uid=1)) == [base, on_it]
    assert P.prune_selection([base, on_it, kept_on_it], P.PruneScope(uid=1)) == [on_it]
    assert P.prune_selection([base, _row("e", base_recipe="other", stable=True)], P.PruneScope(uid=1)) == [base]


def test_prune_removes_every_tag_unforced_and_the_report_and_dry_run_removes_nothing():
    engine = FakeEngine()
    labels = {**L.MANAGED_LABELS, L.NAME: "s", **L.builder_labels(1, "u")}
    a = engine.add_image("envman/s:a", labels=labels)
    engine.tag(a, "envman/s:a2")
    untagged = engine.add_image(labels=labels)
    used = engine.add_image("envman/s:used", labels=labels)
    engine.add_container(ContainerInfo("c1", "n", "envman/s:used", "exited", {}, used, 0, ()))
    B.save_report(B.SmokeReport("s", "x", a, "pass", "", False, None, 0, ""))
    assert {r.image_id for r in P.prune(engine, P.PruneScope(uid=1), dry_run=True)} == {a, untagged}
    assert engine.removed == [] and load_report(a) is not None
    removed = []
    real = engine.remove_image
    engine.remove_image = lambda ref, *args, **kw: removed.append((ref, args, kw)) or real(ref)
    assert {r.image_id for r in P.prune(engine, P.PruneScope(uid=1))} == {a, untagged}
    assert sorted(removed) == sorted([("envman/s:a", (), {}), ("envman/s:a2", (), {}), (untagged, (), {})])
    assert load_report(a) is None and engine.inspect_image(used) is not None


def test_images_in_use_are_every_container_s_image_and_id():
    engine = FakeEngine()
    engine.add_container(ContainerInfo("c1", "n", "ref:1", "running", {}, "sha256:1", 0, ()))
    engine.add_container(ContainerInfo("c2", "m", "", "exited", {}, "sha256:2", 0, ()))
    assert P.images_in_use(engine) == {"ref:1", "sha256:1", "sha256:2"}
