"""Runs pinned by image id (envman/images/pins.py): which image a run of a stack uses when the
stable image moved (another user's promotion, only its labels, my own), when the pin is gone or no
longer smoke-tested, and the pins stored per project identity."""

from __future__ import annotations

import pytest

from envman import labels as L
from envman.engine.api import ImageInfo
from envman.images import pins
from envman.images import store as smokestore

ME, OTHER = 1001, 1002


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def info(image_id, layers=("l1",), verdict=None):
    """An image whose verdict label (if any) was taken on its own layers (a verdict without
    ``envman.smoke.rootfs``, or about other layers, is no verdict)."""
    from dataclasses import replace

    bare = ImageInfo(image_id, layers=tuple(layers))
    labels = replace(verdict, rootfs=smokestore.rootfs_digest(bare)).to_labels() if verdict else {}
    return ImageInfo(image_id, labels=labels, layers=tuple(layers))


def choose(stable, pinned, pin, update=False, uid=ME):
    return pins.choose("s", stable, pinned, pin, uid=uid, verdict=smokestore.image_verdict,
                       rootfs=smokestore.rootfs_digest, update=update)


PASS_BY_OTHER = L.SmokeVerdict(status="pass", by_uid=OTHER, by_user="bob", at=200)


def test_first_run_pins_the_stable_image():
    c = choose(info("sha256:new", verdict=PASS_BY_OTHER), None, None)
    assert c.info.id == "sha256:new" and c.repin and not c.pinned and c.note is None


def test_a_stable_moved_by_another_user_does_not_move_the_run():
    pin = pins.Pin("s", "sha256:old", at=100)
    c = choose(info("sha256:new", ("l2",), PASS_BY_OTHER), info("sha256:old", verdict=PASS_BY_OTHER), pin)
    assert c.info.id == "sha256:old" and c.pinned and not c.repin
    assert "newer stable" in c.note and "bob" in c.note and "--update" in c.note and "\n" not in c.note


def test_the_run_follows_when_asked_when_only_labels_changed_or_when_i_promoted():
    pin = pins.Pin("s", "sha256:old", at=100)
    old = info("sha256:old", verdict=PASS_BY_OTHER)
    assert choose(info("sha256:new", ("l2",), PASS_BY_OTHER), old, pin, update=True).info.id == "sha256:new"
    relabelled = info("sha256:new", ("l1",), PASS_BY_OTHER)  # same layers as the pin
    assert choose(relabelled, old, pin).info.id == "sha256:new"
    mine = L.SmokeVerdict(status="pass", by_uid=ME, at=300)
    my_build("sha256:new", at=300)  # my own build's promotion, after the pin
    assert choose(info("sha256:new", ("l2",), mine), old, pin).info.id == "sha256:new"
    my_build("sha256:before", at=50)
    mine_before_pin = L.SmokeVerdict(status="pass", by_uid=ME, at=50)
    assert choose(info("sha256:before", ("l2",), mine_before_pin), old, pin).pinned


def my_build(image_id, *, at):
    """``image_id`` recorded in this user's ``built.json`` as made by their build at ``at``."""
    import json

    from envman.images.provenance import built_path, record_built
    from envman.state import atomic_write

    record_built(image_id, "envman/s:latest")
    data = json.loads(built_path().read_text())
    data["images"][image_id]["at"] = at
    atomic_write(built_path(), json.dumps(data))


def _my_report(image_id, *, at, overall="pass"):
    """A smoke report of this user's for ``image_id``, taken at ``at``, in this user's state."""
    from envman.state import save_report_json

    save_report_json(image_id, {"overall": overall, "image_id": image_id, "created": at, "reason": ""})


def test_a_neighbour_s_image_labelled_with_my_uid_does_not_move_my_pinned_run(tmp_path, monkeypatch):
    """Attack (issue 35 item 2/3, a shared engine): "other users of the same engine cannot move
    your pinned runs" (docs/security.md). A pinned run moves to the current stable image when that
    image's *labels* say the smoke test was mine (``envman.smoke.by-uid`` = my uid, ``envman.smoke.at``
    after the pin). Labels are written by whoever builds: a neighbour builds an image of their own,
    adds (with ``LABEL`` only, no new layer) a verdict whose ``envman.smoke.rootfs`` is that image's
    own layer digest, ``by-uid`` = the victim's uid and ``at`` = now, and tags it
    ``envman/<stack>:latest``. The victim's next ``envman run`` leaves its pin for the planted image
    (and repins to it). Who ran a smoke test must come from the victim's own state (``built.json``,
    the cached reports), never from the image's labels."""
    import os

    from dataclasses import replace

    from envman.images import store

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    me = os.getuid()
    pinned_layers, planted_layers = ("sha256:" + "1" * 64,), ("sha256:" + "e" * 64,)
    mine = L.SmokeVerdict(status="pass", by_uid=me, by_user="me", at=100)
    pinned = ImageInfo("sha256:" + "a" * 64, layers=pinned_layers,
                       labels=replace(mine, rootfs=store.rootfs_digest(ImageInfo("x", layers=pinned_layers))).to_labels())
    forged = L.SmokeVerdict(status="pass", by_uid=me, by_user="me", at=10**10,
                            rootfs=store.rootfs_digest(ImageInfo("x", layers=planted_layers)))
    planted = ImageInfo("sha256:" + "b" * 64, layers=planted_layers, labels=forged.to_labels())
    pin = pins.Pin(stack="torch-2.4-cpu", image_id=pinned.id, at=200)

    choice = pins.choose("torch-2.4-cpu", planted, pinned, pin, uid=me, verdict=store.image_verdict,
                         rootfs=store.rootfs_digest)
    assert choice.info is not None and choice.info.id == pinned.id, "the planted image took over the pinned run"
    assert not choice.repin


def test_my_own_build_moves_the_run_only_from_the_pin_s_time_and_only_to_a_runnable_image():
    """Boundaries of "mine": this user's ``built.json`` record of the stable image moves the run
    when it is at or after the pin's time (equal included), not one second before; labels naming
    another uid do not stop it; a record of mine does not move the run to an image whose verdict is
    not runnable (a candidate of mine that failed, re-tagged as stable by someone else)."""
    old = info("sha256:old", verdict=PASS_BY_OTHER)
    stable = info("sha256:new", ("l2",), PASS_BY_OTHER)  # labels say bob: my state says mine
    my_build("sha256:new", at=1000)
    assert choose(stable, old, pins.Pin("s", "sha256:old", at=1000)).info.id == "sha256:new"
    assert choose(stable, old, pins.Pin("s", "sha256:old", at=1001)).pinned
    failed = info("sha256:new", ("l2",), L.SmokeVerdict(status="fail", by_uid=ME, at=1000))
    assert choose(failed, old, pins.Pin("s", "sha256:old", at=900)).pinned


def test_only_built_json_vouches_not_a_cached_report_nor_another_user_s_state(tmp_path, monkeypatch):
    """A smoke report of mine (``envman test`` of another user's promoted image) is no promotion of
    mine; a record in another state folder is another user's; a malformed record's time is none."""
    _my_report("sha256:new", at=10**10)
    assert pins.vouched_at(ImageInfo("sha256:new")) is None
    my_build("sha256:new", at=1234)
    assert pins.vouched_at(ImageInfo("sha256:new")) == 1234
    my_build("sha256:new", at=True)
    assert pins.vouched_at(ImageInfo("sha256:new")) is None
    my_build("sha256:new", at=1234)
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "bob"))
    assert pins.vouched_at(ImageInfo("sha256:new")) is None


def test_a_gone_or_failed_pin_falls_back_to_stable_with_a_note():
    pin = pins.Pin("s", "sha256:old", at=100)
    new = info("sha256:new", ("l2",), PASS_BY_OTHER)
    gone = choose(new, None, pin)
    assert gone.info.id == "sha256:new" and gone.repin and "gone" in gone.note
    failed = choose(new, info("sha256:old", verdict=L.SmokeVerdict(status="fail")), pin)
    assert failed.info.id == "sha256:new" and failed.repin and "no longer smoke-tested" in failed.note
    no_stable = choose(None, info("sha256:old", verdict=PASS_BY_OTHER), pin)
    assert no_stable.info.id == "sha256:old"


def test_a_pin_for_another_stack_is_ignored():
    c = choose(info("sha256:new"), info("sha256:old"), pins.Pin("other-stack", "sha256:old", 1))
    assert c.info.id == "sha256:new" and c.repin


def test_pins_are_stored_per_project_identity(tmp_path):
    a, b = pins.project_key("demo", "/home/a/demo"), pins.project_key("demo", "/home/b/demo")
    assert a != b
    pins.save_pin(a, "s", "sha256:1", now=10)
    assert pins.load_pin(a) == pins.Pin("s", "sha256:1", 10) and pins.load_pin(b) is None
    assert pins.pinned_ids() == {"sha256:1"}
    pins.pins_file().write_text("{not json")
    assert pins.load_pin(a) is None and pins.pinned_ids() == frozenset()


@pytest.mark.parametrize("raw", [
    None, "x", {"stack": "s"}, {"stack": "s", "image_id": "sha256:1", "at": "soon"},
    {"stack": "s", "image_id": "sha256:1", "at": float("inf")},  # Infinity in the JSON
])
def test_a_pin_that_is_not_one_reads_as_none(raw):
    assert pins.load_pin("k", {"k": raw}) is None


def test_the_key_of_a_project_separates_name_and_root_and_takes_any_bytes():
    assert pins.project_key("a", "b/c") != pins.project_key("a/b", "c")  # a NUL between them, not a slash
    key = pins.project_key("demo", "/home/u/\udcff")  # an undecodable path byte
    assert len(key) == 32 and int(key, 16) >= 0


def test_a_saved_pin_keeps_the_others():
    pins.save_pin("a", "s", "sha256:1", now=1)
    pins.save_pin("b", "t", "sha256:2", now=2.9)
    assert pins.load_pin("b") == pins.Pin("t", "sha256:2", 2) and pins.load_pin("a") == pins.Pin("s", "sha256:1", 1)
    assert pins.pinned_ids() == {"sha256:1", "sha256:2"}
