"""One engine, several users: verdicts on the image, prune selection, a promoted image's id."""

from __future__ import annotations

import os
from dataclasses import replace


from envman.images import build as B, prune as P
from envman import labels as L
from envman.images import store as smokestore
from envman.images.prune import ImageRow, PruneScope, prune_selection

# The pipeline's fake engine and fixtures (a private state directory, a fake render, a stack).
from envman.engine.api import ContainerInfo, ImageInfo

from tests.unit.images.test_build import image_store, isolated, pipeline_engine, stack  # noqa: F401

ME, OTHER = 1001, 1002


# --------------------------------------------------------------------------- verdict on the image


def test_a_verdict_taken_by_one_user_is_read_by_another(stack, tmp_path, monkeypatch):
    eng = pipeline_engine()
    first = B.build_smoke_promote(eng, stack)
    assert first.promoted and len(eng.runs) == 1
    stable = eng.inspect_image(f"envman/{stack.name}:latest")
    verdict = L.parse_smoke(stable.labels)
    assert verdict is not None and verdict.status == "pass" and verdict.image_id == first.build.image_id
    assert verdict.report_digest == smokestore.report_digest(first.smoke.to_json())
    # the candidate tag moved to the verdict image too: the next build finds the verdict there
    assert eng.inspect_image(first.build.ref).id == stable.id != first.build.image_id

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state-b"))  # another user: no cached report
    listed = {r.image_id: r for r in P.list_envman_images(eng)}
    assert listed[stable.id].smoke == "pass" and listed[stable.id].stable
    # ... but a build of theirs does not take the first user's candidate for its own (anyone can tag one)
    again = B.build_smoke_promote(eng, stack)
    assert not again.build.cached and again.build.image_id not in (first.build.image_id, stable.id)
    assert again.promoted and again.smoke.overall == "pass" and len(eng.runs) == 2


def test_a_verdict_is_believed_only_for_the_layers_it_was_taken_on():
    v = L.SmokeVerdict(status="pass", rootfs="sha256:" + "1" * 64)
    info = ImageInfo("sha256:child", labels=v.to_labels(), layers=("sha256:l1", "sha256:l2"))
    assert smokestore.image_verdict(info) is None  # an image built FROM a tested one: other layers
    tested = ImageInfo("sha256:t", layers=("sha256:l1",))
    v2 = L.SmokeVerdict(status="pass", rootfs=smokestore.rootfs_digest(tested))
    assert smokestore.image_verdict(replace(tested, labels=v2.to_labels())) == v2


def test_verdict_labels_carry_who_and_a_bounded_summary():
    report = {"overall": "cpu-only", "reason": "no GPU\nhere", "image_id": "sha256:x", "gpus_requested": False,
              "probe": {"checks": [{"name": "cuda", "status": "skip"}, {"name": "import", "status": "pass"}]}}
    v = smokestore.verdict_of_report(report, rootfs=None, uid=ME, user="alice", at=5)
    labels = v.to_labels()
    assert labels[L.SMOKE_CHECKS] == "cuda=skip import=pass" and labels[L.SMOKE_REASON] == "no GPU here"
    assert (labels[L.SMOKE_BY_UID], labels[L.SMOKE_BY_USER], labels[L.SMOKE_AT]) == ("1001", "alice", "5")
    assert smokestore.report_digest(report) == smokestore.report_digest(dict(reversed(list(report.items()))))


def test_builds_record_their_builder(stack):
    eng = pipeline_engine()
    b = B.build_stack(eng, stack)
    got = L.parse(eng.inspect_image(b.ref).labels)
    assert got.built_by_uid == os.getuid() and got.built_by_user


# --------------------------------------------------------------------------- prune selection


def row(image_id, uid=ME, stable=False, tags=None, project=None):
    return ImageRow(stack="s", tags=tuple(tags or (f"envman/s:{image_id}",)), image_id=image_id, size=1, created=0,
                    stable=stable, smoke="pass", project=project, built_by_uid=uid)


def ids(rows):
    return {r.image_id for r in rows}


def test_prune_takes_only_what_the_invoking_user_built():
    rows = [row("mine"), row("theirs", uid=OTHER), row("unknown", uid=None)]
    assert ids(prune_selection(rows, PruneScope(uid=ME))) == {"mine"}
    assert ids(prune_selection(rows, PruneScope(uid=OTHER))) == {"theirs"}
    assert ids(prune_selection(rows, PruneScope(uid=0, all_users=True))) == {"mine", "theirs", "unknown"}


def test_prune_never_takes_an_image_a_container_uses_whoever_made_it():
    rows = [row("used-by-id"), row("used-by-tag", tags=("envman/s:t",)), row("free")]
    scope = PruneScope(uid=0, all_users=True, in_use=frozenset({"used-by-id", "envman/s:t"}))
    assert ids(prune_selection(rows, scope)) == {"free"}


def test_prune_keeps_stables_project_refs_pins_and_unsure_projects():
    rows = [row("stable", stable=True), row("ref", tags=("envman/project-p:1",)), row("pinned"),
            row("unsure", project="halfway"), row("stale", project="other")]
    scope = PruneScope(uid=ME, keep=frozenset({"envman/project-p:1"}), keep_ids=frozenset({"pinned"}),
                       keep_projects=frozenset({"halfway"}))
    assert ids(prune_selection(rows, scope)) == {"stale"}


def test_prune_asks_the_engine_for_every_container_and_removes_nothing_in_use(stack):
    store = image_store(containers=[ContainerInfo("c1", "x", "envman/s:used", "exited", {}, image_id="sha256:used")])
    store.add("envman/s:used", "sha256:used")
    store.add("envman/s:other-user", "sha256:theirs", uid=OTHER)
    store.add("envman/s:legacy", "sha256:legacy", uid="none")
    store.add("envman/s:free", "sha256:free")
    gone = P.prune(store, PruneScope(uid=os.getuid()))
    assert ids(gone) == {"sha256:free"} and store.removed == ["envman/s:free"]


# --------------------------------------------------------------------------- a promoted image keeps its id


def test_smoke_and_push_leave_the_promoted_image_id_alone(stack, monkeypatch):
    """A project image and its envman.lock are built on the promoted image's id: a smoke test
    rerun on it, and a push, may not change that id (they re-labelled it, which did)."""
    from envman.images.remote import parse_registry, push_stack
    from envman.state import stable_ref

    eng = pipeline_engine("cpu-only")
    first = B.build_smoke_promote(eng, stack, accept_cpu_only=True)
    assert first.promoted
    promoted = eng.inspect_image(stable_ref(stack.name)).id
    eng.outcome["overall"] = "pass"  # the rerun, say on a GPU host, passes
    rep = B.smoke_image(eng, stack, stable_ref(stack.name))
    assert rep.overall == "pass" and rep.verdict_image_id is None
    assert eng.inspect_image(stable_ref(stack.name)).id == promoted
    # this user reads the later verdict; the image's labels still say what they said
    assert smokestore.image_verdict(eng.inspect_image(stable_ref(stack.name))).status == "pass"
    assert {r.image_id: r.smoke for r in P.list_envman_images(eng)}[promoted] == "pass"
    # the push carries the later verdict on an image of its own; the promoted id stays
    monkeypatch.setattr(eng, "insecure_registries", lambda: (("127.0.0.0/8",), ()))
    pushed = push_stack(eng, stack, parse_registry("127.0.0.1:5000/lab", where="--registry"))
    assert eng.inspect_image(stable_ref(stack.name)).id == promoted
    sent = eng.inspect_image(pushed.image_id)
    assert pushed.image_id != promoted and L.parse_smoke(sent.labels).status == "pass"
    assert pushed.smoke == "pass"


def test_a_verdict_taken_before_promotion_still_goes_on_the_image(stack):
    eng = pipeline_engine("pass")
    first = B.build_smoke_promote(eng, stack)
    stable = eng.inspect_image(f"envman/{stack.name}:latest")
    assert first.smoke.verdict_image_id == stable.id and L.parse_smoke(stable.labels).status == "pass"
