"""envman.images.store by rule: the digests a verdict is keyed on, every field of a verdict, the
verdict image and the tags that move to it (and those that do not).

Written against the mutation run of the module (docs/security.md, "Mutation testing").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envman import labels as L
from envman.engine.api import BuildEvent, ImageInfo
from envman.images import store as S
from envman.state import load_report, save_report_json
from tests.support.fake_engine import FakeEngine


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def test_current_user_without_a_passwd_entry_is_named_by_its_uid(monkeypatch):
    import pwd

    monkeypatch.setattr(S.os, "getuid", lambda: 4242)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    assert S.current_user() == (4242, "4242")


# --------------------------------------------------------------------------- digests (kept in labels: a format)


def test_the_report_digest_is_sha256_over_compact_sorted_json_without_bookkeeping():
    report = {"overall": "pass", "reason": "ok", "n": [1, 2], "promoted": True, "verdict_image_id": "sha256:v"}
    canon = '{"n":[1,2],"overall":"pass","reason":"ok"}'
    assert S.report_digest(report) == "sha256:" + hashlib.sha256(canon.encode()).hexdigest()
    assert S.report_digest({**report, "promoted": False, "verdict_image_id": None}) == S.report_digest(report)
    # a value JSON has no type for is hashed as its text, not refused
    assert S.report_digest({"path": Path("/x")}) == S.report_digest({"path": "/x"})


def test_the_rootfs_digest_is_sha256_over_the_layers_one_a_line():
    info = ImageInfo("sha256:i", layers=("sha256:a", "sha256:b"))
    assert S.rootfs_digest(info) == "sha256:" + hashlib.sha256(b"sha256:a\nsha256:b").hexdigest()
    assert S.rootfs_digest(ImageInfo("sha256:i", layers=())) is None and S.rootfs_digest(None) is None


@pytest.mark.parametrize("probe,summary", [
    (None, ""), ({}, ""), ({"checks": "not a list"}, ""), ({"checks": {"a": 1}}, ""),
    ({"checks": [{"name": "cuda", "status": "pass"}, "junk", {"name": "import", "status": "skip"}]},
     "cuda=pass import=skip"),
])
def test_checks_summary(probe, summary):
    assert S.checks_summary(probe) == summary


# --------------------------------------------------------------------------- verdicts, field by field


def test_a_verdict_of_a_full_report_carries_every_field():
    report = {"overall": "cpu-only", "reason": "no GPU", "image_id": "sha256:t", "gpus_requested": True,
              "probe": {"checks": [{"name": "cuda", "status": "skip"}]}}
    assert S.verdict_of_report(report, rootfs="sha256:r", uid=7, user="u", at=9) == L.SmokeVerdict(
        status="cpu-only", reason="no GPU", report_digest=S.report_digest(report), checks="cuda=skip",
        gpus_requested=True, image_id="sha256:t", by_uid=7, by_user="u", at=9, rootfs="sha256:r")


def test_a_verdict_of_a_bare_report_leaves_the_optional_fields_empty(monkeypatch):
    monkeypatch.setattr(S.time, "time", lambda: 77.9)
    assert S.verdict_of_report({"overall": "fail"}, rootfs=None, uid=1, user="v") == L.SmokeVerdict(
        status="fail", reason="", report_digest=S.report_digest({"overall": "fail"}), checks="",
        gpus_requested=False, image_id=None, by_uid=1, by_user="v", at=77, rootfs=None)


def _cache(image_id, **over):
    report = {"overall": "pass", "reason": "fine", "gpus_requested": True, "created": 12.5,
              "probe": {"checks": [{"name": "cuda", "status": "pass"}]}, **over}
    save_report_json(image_id, {k: v for k, v in report.items() if v is not None})
    return load_report(image_id)


def test_a_cached_report_is_read_as_a_verdict_field_by_field():
    rep = _cache("sha256:c")
    assert S.cached_verdict("sha256:c") == L.SmokeVerdict(
        status="pass", reason="fine", report_digest=S.report_digest(rep), checks="cuda=pass", gpus_requested=True,
        image_id="sha256:c", at=12)
    rep = _cache("sha256:d", reason=None, gpus_requested=None, probe=None, created=None)
    assert S.cached_verdict("sha256:d") == L.SmokeVerdict(status="pass", report_digest=S.report_digest(rep),
                                                          image_id="sha256:d")


@pytest.mark.parametrize("created,at", [(5, 5), (5.9, 5), (True, None), (False, None), ("5", None), (None, None)])
def test_only_a_number_is_a_report_s_time(created, at):
    _cache("sha256:c", created=created)
    assert S.cached_verdict("sha256:c").at == at


@pytest.mark.parametrize("overall", ["untested", "", None, "PASS"])
def test_a_cached_report_without_a_known_outcome_is_no_verdict(overall):
    _cache("sha256:c", overall=overall)
    assert S.cached_verdict("sha256:c") is None


def test_no_image_id_has_no_cached_verdict():
    _cache("")  # whatever a report saved under an empty id says
    assert S.cached_verdict("") is None


def test_a_listed_image_s_labels_are_its_verdict_when_nothing_newer_is_cached():
    v = L.SmokeVerdict(status="pass", report_digest="sha256:" + "1" * 64, at=5)
    assert S.labels_verdict(v.to_labels(), "sha256:nothing-cached") == L.parse_smoke(v.to_labels())
    assert S.labels_verdict({}, "sha256:nothing-cached") is None


# --------------------------------------------------------------------------- repositories


@pytest.mark.parametrize("tag,inside", [
    ("envman/s:latest", True), ("localhost/envman/s:latest", True), ("docker.io/library/envman/s:x", True),
    ("docker.io/envman/s:x", True), ("other.example/envman/s:x", False), ("envman/s2:latest", False),
    ("envman/s", False), ("xenvman/s:latest", False), ("localhost/envman/s2:x", False),
])
def test_same_repository_by_each_prefix_an_engine_shows(tag, inside):
    assert S.same_repository(tag, "envman/s") is inside


# --------------------------------------------------------------------------- the verdict image


def _tested(engine, tags=("envman/s:cand",), labels=None):
    image_id = engine.add_image(tags[0], labels=labels)
    for t in tags[1:]:
        engine.tag(image_id, t)
    return image_id


def _report(image_id, **over):
    return {"overall": "pass", "reason": "ok", "image_id": image_id, "gpus_requested": False, **over}


def test_the_verdict_image_carries_the_verdict_and_who_ran_it(monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(S, "current_user", lambda: (1002, "bob"))
    tested = _tested(engine, tags=("envman/s:cand", "other/x:y"))
    report = _report(tested)
    new = S.record_verdict(engine, "s", report)
    labels = engine.inspect_image(new).labels
    assert labels[L.BUILT_BY_UID] == "1002" and labels[L.BUILT_BY_USER] == "bob"  # the layers record no builder
    v = L.parse_smoke(labels)
    assert (v.status, v.by_uid, v.by_user, v.image_id) == ("pass", 1002, "bob", tested)
    assert v.rootfs == S.rootfs_digest(engine.inspect_image(tested))
    assert engine.inspect_image("envman/s:cand").id == new and engine.inspect_image("other/x:y").id == tested
    assert load_report(tested) == report and load_report(new) == report


def test_who_built_the_layers_stays_who_built_them_when_another_user_smoke_tests(monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(S, "current_user", lambda: (1002, "bob"))
    tested = _tested(engine, labels=L.builder_labels(1001, "alice"))
    labels = engine.inspect_image(S.record_verdict(engine, "s", _report(tested))).labels
    assert (labels[L.BUILT_BY_UID], labels[L.BUILT_BY_USER]) == ("1001", "alice")
    v = L.parse_smoke(labels)
    assert (v.by_uid, v.by_user) == (1002, "bob")  # who ran the smoke test


def test_without_a_tag_of_its_own_the_verdict_image_is_tagged_by_its_report_digest():
    engine = FakeEngine()
    tested = engine.add_image()
    new = S.record_verdict(engine, "s", _report(tested))
    digest = L.parse_smoke(engine.inspect_image(new).labels).report_digest
    assert engine.builds == [f"envman/s:verdict-{digest[7:23]}"] and len(digest[7:23]) == 16
    assert engine.inspect_image(f"envman/s:verdict-{digest[7:23]}").id == new


def test_move_tags_false_leaves_every_tag_where_it_was():
    engine = FakeEngine()
    tested = _tested(engine, tags=("envman/s:cand", "envman/s:latest"))
    new = S.record_verdict(engine, "s", _report(tested), move_tags=False)
    assert new != tested and engine.builds[0].startswith("envman/s:verdict-")
    assert {engine.inspect_image(t).id for t in ("envman/s:cand", "envman/s:latest")} == {tested}


def test_every_tag_of_the_stack_on_the_tested_image_moves_unless_someone_moved_it_meanwhile():
    engine = FakeEngine()
    tags = ("envman/s:a", "envman/s:b", "envman/s:c", "envman/s:d")
    tested = _tested(engine, tags=tags)
    elsewhere = engine.add_image()
    real_build = engine.build

    def build(*a, **kw):  # another user moves envman/s:c while the verdict image builds
        yield from real_build(*a, **kw)
        engine.tag(elsewhere, "envman/s:c")
    engine.build = build
    new = S.record_verdict(engine, "s", _report(tested))
    assert {t: engine.inspect_image(t).id for t in tags} == {
        "envman/s:a": new, "envman/s:b": new, "envman/s:c": elsewhere, "envman/s:d": new}


def test_the_verdict_image_is_the_one_the_build_reported_even_if_its_tag_moved_meanwhile():
    engine = FakeEngine()
    tested = _tested(engine)
    elsewhere = engine.add_image()
    real_build = engine.build
    built = []

    def build(*a, **kw):
        for ev in real_build(*a, **kw):
            if ev.kind == "done":
                built.append(ev.image_id)
                engine.tag(elsewhere, "envman/s:cand")
            yield ev
    engine.build = build
    assert S.record_verdict(engine, "s", _report(tested)) == built[0] != elsewhere


@pytest.mark.parametrize("tag_left", [True, False])
def test_a_build_that_reports_no_id_is_read_from_its_tag_else_the_tested_image_stands(tag_left):
    engine = FakeEngine()
    tested = _tested(engine)
    real_build = engine.build

    def build(context, tag, **kw):
        for ev in real_build(context, tag, **kw):
            if ev.kind != "done":
                yield ev
        if not tag_left:
            engine._tags.pop("envman/s:cand")
    engine.build = build
    new = S.record_verdict(engine, "s", _report(tested))
    if tag_left:
        assert new != tested and L.parse_smoke(engine.inspect_image(new).labels).status == "pass"
    else:
        assert new == tested
    assert load_report(new) == _report(tested)


def test_a_verdict_on_an_image_the_engine_does_not_have_changes_nothing():
    engine = FakeEngine()
    assert S.record_verdict(engine, "s", _report("sha256:" + "0" * 64)) == "sha256:" + "0" * 64
    assert engine.builds == [] and load_report("sha256:" + "0" * 64) is None


def test_the_report_written_with_the_verdict_is_the_report():
    engine = FakeEngine()
    tested = _tested(engine)
    report = _report(tested, probe={"checks": []})
    new = S.record_verdict(engine, "s", report)
    assert json.loads(json.dumps(load_report(new))) == report == load_report(tested)
