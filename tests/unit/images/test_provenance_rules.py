"""On an engine other users share, envman reuses only the images this user built, builds a stack
only on the base it checked, and builds a base under a lock every user of the machine takes
(envman.images.provenance; docs/security.md, "Sharing an engine")."""

from __future__ import annotations

import multiprocessing
import os
import stat
import time
from dataclasses import dataclass

import pytest

from envman import labels as L
from envman.errors import BuildError, EnvmanError
from envman.images import base as basemod
from envman.images import build as B
from envman.images import provenance as P
from tests.support.fake_engine import FakeContext, FakeEngine

HASH = "ab" * 32
RECIPE = "cd" * 32


@dataclass(frozen=True)
class Base:
    """What ensure_base reads of a rebuilt base."""

    tag: str = "12.4.1-base-ubuntu22.04"
    recipe_hash: str = RECIPE
    sources: tuple[str, ...] = ("recipe @ 0000",)

    @property
    def ref(self) -> str:
        return f"envman/base:{self.tag}"

    @property
    def nvidia_ref(self) -> str:
        return f"nvidia/cuda:{self.tag}"

    def context(self) -> dict[str, bytes]:
        return {"Dockerfile": b"FROM ubuntu:22.04\nRUN true\n"}


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    locks = tmp_path / "machine-locks"
    locks.mkdir()
    monkeypatch.setattr(P, "machine_lock_dir", lambda: locks)
    monkeypatch.setattr(B, "_render", lambda *a, **kw: FakeContext(HASH, dockerfile=f"FROM {Base().ref}\nRUN x\n"))


@pytest.fixture
def stack(mini):
    from envman.stack.resolve import resolve

    return resolve(mini, "torch-2.4-cuda12")


def _plant(engine: FakeEngine, ref: str, labels: dict[str, str]) -> str:
    """Another user's image under ``ref``, with exactly the labels envman would give it."""
    return engine.add_image(ref, labels=labels)


# --------------------------------------------------------------------------- bases


@pytest.mark.parametrize("labels_match", [True, False])
def test_a_base_another_user_tagged_is_never_reused_whatever_its_labels(labels_match):
    engine = FakeEngine()
    planted = _plant(engine, Base().ref, {L.BASE_RECIPE: RECIPE if labels_match else "ef" * 32, L.ROLE: L.ROLE_BASE})
    got = basemod.ensure_base(engine, engine, Base())
    assert not got.cached and got.image_id != planted and engine.builds == [Base().ref]
    assert P.built_here(got.image_id) and not P.built_here(planted)


def test_a_base_this_user_built_is_reused_until_its_tag_moves():
    engine = FakeEngine()
    first = basemod.ensure_base(engine, engine, Base())
    again = basemod.ensure_base(engine, engine, Base())
    assert (first.cached, again.cached, again.image_id, len(engine.builds)) == (False, True, first.image_id, 1)
    _plant(engine, Base().ref, dict(engine.inspect_image(first.image_id).labels))  # same labels, other image
    third = basemod.ensure_base(engine, engine, Base())
    assert not third.cached and len(engine.builds) == 2


def test_the_record_of_another_user_or_one_others_can_write_vouches_for_nothing():
    engine = FakeEngine()
    first = basemod.ensure_base(engine, engine, Base())
    os.chmod(P.built_path(), 0o666)
    assert not P.built_here(first.image_id)
    assert not basemod.ensure_base(engine, engine, Base()).cached


# --------------------------------------------------------------------------- stacks on a base


def test_a_stack_is_reused_only_on_the_base_image_it_was_built_on(stack):
    engine = FakeEngine()
    first = B.build_stack(engine, stack, base=Base())
    assert P.built_record(first.image_id)["base"] == first.base.image_id
    again = B.build_stack(engine, stack, base=Base())
    assert again.cached and again.image_id == first.image_id and again.base.image_id == first.base.image_id
    # the base's tag moves to an image of another user's: the base is rebuilt, and so is the stack on it
    _plant(engine, Base().ref, {L.BASE_RECIPE: RECIPE})
    third = B.build_stack(engine, stack, base=Base())
    assert not third.cached and third.base.image_id not in (first.base.image_id,)
    assert third.image_id != first.image_id and P.built_record(third.image_id)["base"] == third.base.image_id


def test_a_stack_candidate_another_user_planted_is_rebuilt(stack):
    engine = FakeEngine()
    _plant(engine, f"envman/{stack.name}:{HASH[:16]}", {L.RENDER_HASH: HASH})
    got = B.build_stack(engine, stack)
    assert not got.cached and P.built_here(got.image_id)


def test_a_base_moved_during_the_stack_build_is_not_built_on(stack, monkeypatch):
    """The stack starts FROM the checked base's ID: a base tag moved before the stack's FROM step
    changes nothing the stack is built on, and the record names the base it was built on."""
    engine = FakeEngine()
    real_ensure = basemod.ensure_base
    ensured = []

    def ensure_then_move(*a, **kw):
        got = real_ensure(*a, **kw)
        ensured.append(got.image_id)
        _plant(engine, Base().ref, {L.BASE_RECIPE: RECIPE})  # someone re-tags it before the stack's FROM
        return got
    monkeypatch.setattr(basemod, "ensure_base", ensure_then_move)
    got = B.build_stack(engine, stack, base=Base())
    base = engine.inspect_image(ensured[0])
    assert engine.inspect_image(got.image_id).layers[:len(base.layers)] == base.layers
    assert P.built_here(got.image_id, base=base.id) and engine.inspect_image(Base().ref).id != base.id


def test_a_stack_whose_layers_do_not_begin_with_the_checked_base_s_fails_and_records_nothing(stack, monkeypatch):
    """The check after the build stays (BuildKit reaches the ID through a tag): a stack whose
    layers do not begin with the checked base's is one error line, and no record."""
    engine = FakeEngine()
    other = _plant(engine, "neighbour/evil:1", {})
    real_build = engine.build

    def build_elsewhere(tar, tag, **kw):  # the engine built the stack on another image
        from envman.engine.context import deterministic_tar
        return real_build(deterministic_tar({"Dockerfile": f"FROM {other}\nRUN x\n".encode()}), tag, **kw) \
            if tag.startswith(f"envman/{stack.name}:") else real_build(tar, tag, **kw)
    monkeypatch.setattr(engine, "build", build_elsewhere)
    with pytest.raises(BuildError) as e:
        B.build_stack(engine, stack, base=Base())
    assert "was moved during the build" in e.value.what and e.value.where == Base().ref
    built = engine.inspect_image(f"envman/{stack.name}:{HASH[:16]}")
    assert built is not None and P.built_record(built.id) is None


# --------------------------------------------------------------------------- the machine-wide lock


def _hold(lock_dir: str, ready, release) -> None:
    P.machine_lock_dir = lambda: __import__("pathlib").Path(lock_dir)  # type: ignore[assignment]
    with P.machine_lock("base-x", timeout=5, what="x"):
        ready.set()
        release.wait(10)


def test_a_second_process_waits_for_the_base_lock_and_says_so_in_one_line(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(P.machine_lock_dir()), ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        t0 = time.monotonic()
        with pytest.raises(EnvmanError) as e:
            with P.machine_lock("base-x", timeout=0.3, what="envman/base:x"):
                pass
        assert 0.3 <= time.monotonic() - t0 < 3
        assert e.value.what == "another envman build of envman/base:x (any user's) has held its lock for 0 s"
        assert e.value.where == str(P.machine_lock_dir() / "envman-base-x.lock")
    finally:
        release.set()
        holder.join(10)
    with P.machine_lock("base-x", timeout=1, what="x"):  # released when its holder ended
        pass


def test_the_lock_file_is_one_every_user_can_open_whatever_the_umask():
    old = os.umask(0o077)
    try:
        with P.machine_lock("base-y", timeout=1, what="y") as path:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    finally:
        os.umask(old)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dir"])
def test_a_planted_lock_file_is_refused_in_one_line_never_followed_or_waited_on(tmp_path, kind):
    path = P.machine_lock_dir() / "envman-base-z.lock"
    if kind == "symlink":
        path.symlink_to(tmp_path / "victim")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(EnvmanError) as e:
        with P.machine_lock("base-z", timeout=1, what="z"):
            pass
    assert e.value.where == str(path) and "machine-wide lock" in e.value.what
    assert not (tmp_path / "victim").exists()


def test_the_shared_lock_directory_is_root_owned_world_writable_and_sticky(tmp_path, monkeypatch):
    monkeypatch.undo()  # the real rule, not the fixture's folder
    plain, sticky = tmp_path / "plain", tmp_path / "sticky"
    plain.mkdir(mode=0o777)
    sticky.mkdir()
    os.chmod(plain, 0o777)
    os.chmod(sticky, 0o1777)
    monkeypatch.setattr(P, "MACHINE_LOCK_DIRS", (str(tmp_path / "missing"), str(plain), str(sticky)))
    if os.getuid() == 0:
        assert P.machine_lock_dir() == sticky
        os.chown(sticky, 12345, -1)
    with pytest.raises(EnvmanError) as e:
        P.machine_lock_dir()
    assert e.value.what == "no shared lock directory on this machine"


_ASK = "ask whoever owns it (ls -l) or an administrator to remove it"


def test_a_lock_file_linked_to_a_file_that_exists_is_refused_never_opened(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    path = P.machine_lock_dir() / "envman-base-l.lock"
    path.symlink_to(victim)
    with pytest.raises(EnvmanError) as e:
        P._open_lock_file(path)
    assert (e.value.what, e.value.where, e.value.fix) == (
        "cannot open the machine-wide lock: it is a symbolic link", str(path), _ASK)
    assert victim.read_text() == "keep"


def test_a_lock_file_that_cannot_be_opened_says_why_in_the_system_s_words(monkeypatch):
    import socket

    path = P.machine_lock_dir() / "envman-base-s.lock"
    monkeypatch.chdir(path.parent)  # a relative name: a socket's path has a length limit
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path.name)  # a socket under the lock's name: open() answers ENXIO
        with pytest.raises(EnvmanError) as e:
            P._open_lock_file(path)
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"cannot open the machine-wide lock: {os.strerror(__import__('errno').ENXIO)}", str(path), _ASK)


def test_a_lock_file_that_is_a_directory_is_refused_in_one_line():
    path = P.machine_lock_dir() / "envman-base-d.lock"
    path.mkdir()
    with pytest.raises(EnvmanError) as e:
        P._open_lock_file(path)
    assert (e.value.what, e.value.where, e.value.fix) == ("the machine-wide lock is not a regular file", str(path), _ASK)


def test_a_lock_file_another_process_makes_first_is_opened_not_refused(monkeypatch):
    path = P.machine_lock_dir() / "envman-base-r.lock"
    real_open = os.open

    def open_after_the_other(p, flags, *a):
        if flags & os.O_CREAT and not path.exists():
            real_open(p, os.O_WRONLY | os.O_CREAT, 0o644)  # the other process, just before us
        return real_open(p, flags, *a)

    monkeypatch.setattr(P.os, "open", open_after_the_other)
    fd = P._open_lock_file(path)
    try:
        assert stat.S_ISREG(os.fstat(fd).st_mode) and os.path.samestat(os.fstat(fd), os.stat(path))
    finally:
        os.close(fd)


def test_a_lock_file_that_keeps_vanishing_ends_in_one_line_not_a_loop(monkeypatch):
    path = P.machine_lock_dir() / "envman-base-v.lock"

    def racing(p, flags, *a):  # each time: gone when opened, there again when made
        raise FileExistsError(17, "File exists") if flags & os.O_CREAT else FileNotFoundError(2, "No such file")

    monkeypatch.setattr(P.os, "open", racing)
    with pytest.raises(EnvmanError) as e:
        P._open_lock_file(path)
    assert (e.value.what, e.value.where, e.value.fix) == ("cannot make the machine-wide lock", str(path), "try again")


def test_no_shared_lock_directory_names_each_one_tried_and_what_would_do(tmp_path, monkeypatch):
    monkeypatch.undo()
    tried = (str(tmp_path / "missing"), str(tmp_path))
    monkeypatch.setattr(P, "MACHINE_LOCK_DIRS", tried)
    with pytest.raises(EnvmanError) as e:
        P.machine_lock_dir()
    assert (e.value.where, e.value.fix) == (
        f"{tried[0]}, {tried[1]}",
        "a root-owned directory everyone may write, with the sticky bit (mode 1777), such as /tmp")


# --------------------------------------------------------------------------- the record


def test_the_record_names_the_ref_the_base_and_when(monkeypatch):
    before = int(time.time())
    P.record_built("sha256:" + "1" * 64, "envman/base:x", base="sha256:" + "2" * 64)
    rec = P.built_record("sha256:" + "1" * 64)
    assert rec is not None and set(rec) == {"ref", "base", "at"}
    assert (rec["ref"], rec["base"]) == ("envman/base:x", "sha256:" + "2" * 64)
    assert before <= rec["at"] <= int(time.time())


def test_an_image_built_again_counts_as_the_newest_when_the_record_is_trimmed(monkeypatch):
    monkeypatch.setattr(P, "MAX_BUILT", 2)
    a, b, c = ("sha256:" + ch * 64 for ch in "abc")
    for image in (a, b, a, c):
        P.record_built(image, "envman/base:x")
    assert (P.built_here(a), P.built_here(b), P.built_here(c)) == (True, False, True)


def test_two_records_at_once_take_turns_on_the_record_s_lock():
    import threading

    from filelock import FileLock

    from envman.state import locks_dir

    locks_dir().mkdir(parents=True, exist_ok=True)
    held = FileLock(str(locks_dir() / f"{P.BUILT_FILE}.lock"))
    held.acquire()
    writer = threading.Thread(target=P.record_built, args=("sha256:" + "e" * 64, "envman/base:x"))
    try:
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and P.built_record("sha256:" + "e" * 64) is None  # waiting for its turn
    finally:
        held.release()
    writer.join(10)
    assert P.built_here("sha256:" + "e" * 64)


def _write_record(images: dict) -> None:
    from envman.state import atomic_write

    atomic_write(P.built_path(), __import__("json").dumps({"images": images}))


def test_a_record_without_a_base_is_one_of_an_image_built_on_no_base():
    _write_record({"sha256:" + "1" * 64: {"ref": "envman/base:x"}})
    assert P.built_here("sha256:" + "1" * 64) and not P.built_here("sha256:" + "1" * 64, base="sha256:" + "2" * 64)


def test_an_empty_image_id_or_an_entry_that_is_not_an_object_vouches_for_nothing():
    _write_record({"": {"ref": "envman/base:x", "base": ""}, "sha256:" + "3" * 64: "envman/base:x"})
    assert P.built_record("") is None and not P.built_here("")
    assert P.built_record("sha256:" + "3" * 64) is None and not P.built_here("sha256:" + "3" * 64)


# --------------------------------------------------------------------------- a base moved during the build


def _swapping_base(monkeypatch, tmp_path, engine, dockerfile, *, swap=True):
    """``ensure_base`` as it is, then a neighbour's image built FROM that very base plus a layer of
    theirs takes the base's tag (their re-tagging loop wins the window before the stack's FROM)."""
    from envman.engine.context import deterministic_tar
    from envman.images.events import BuildStream

    monkeypatch.setattr(B, "_render", lambda *a, **kw: FakeContext("ab" * 32, dockerfile=dockerfile))
    real_ensure = basemod.ensure_base

    def ensure_then_swap(*a, **kw):
        got = real_ensure(*a, **kw)
        if not swap:
            return got
        evil = deterministic_tar({"Dockerfile": f"FROM {got.image_id}\nRUN plant\n".encode()})
        BuildStream().read(engine.build(evil, "neighbour/evil:1", labels={}))
        engine.tag("neighbour/evil:1", Base().ref)  # the neighbour's loop wins the window
        return got

    monkeypatch.setattr(basemod, "ensure_base", ensure_then_swap)


def test_a_base_re_tagged_to_an_image_built_on_it_during_the_stack_build_is_caught(tmp_path, monkeypatch, stack):
    """Attack (issue 35 item 2, the race ``_check_built_on`` guards): the stack's ``FROM`` names the
    base by tag (``envman/base:<tag>``), and the check after the build only asks that the stack's
    layers *begin with* the ensured base's layers. A neighbour who re-tags the base, between
    ``ensure_base`` and the stack's ``FROM``, to an image built ``FROM`` that very base plus one
    layer of their own (``RUN plant``) passes it: the stack carries the planted layer between the
    base and its own, and is recorded in ``built.json`` as this user's, on that base. (Re-tagging
    in a loop wins the window.) The stack must be built ``FROM`` the base's image ID, or its layers
    must be exactly the base's followed by layers of its own build."""
    engine = FakeEngine()
    _swapping_base(monkeypatch, tmp_path, engine, f"FROM {Base().ref}\nRUN x\n")
    try:
        got = B.build_stack(engine, stack, base=Base())
    except BuildError:
        return  # caught: the rule holds
    evil_layers = engine.inspect_image("neighbour/evil:1").layers
    built = engine.inspect_image(got.image_id)
    assert P.built_record(got.image_id) is not None  # kept as this user's own
    assert built.layers[:len(evil_layers)] != evil_layers, "the stack was built on the neighbour's layer and kept"


@pytest.mark.parametrize("line", ["FROM {ref}", "FROM --platform=linux/arm64 {ref}", "from {ref} AS stack",
                                  "FROM {ref}\t", "FROM  --platform=linux/arm64   {ref}  as  s"])
def test_every_from_spelling_of_the_base_starts_from_the_base_s_id(tmp_path, monkeypatch, stack, line):
    """Variants: a platform flag, a stage name, lower case, extra blanks: whatever the dialect
    writes, the stack's build starts from the ID of the base envman ensured, and is recorded on it."""
    from envman.images import provenance as P
    from tests.support.fake_engine import from_line

    engine = FakeEngine()
    contexts = []
    real = engine.build
    monkeypatch.setattr(engine, "build", lambda tar, tag, **kw: (contexts.append(tar), real(tar, tag, **kw))[1])
    _swapping_base(monkeypatch, tmp_path, engine, line.format(ref=Base().ref) + "\nRUN x\n")
    got = B.build_stack(engine, stack, base=Base())
    base_id = got.base.image_id
    assert from_line(contexts[-1]) == base_id and engine.inspect_image(got.image_id).layers[:-1] == \
        engine.inspect_image(base_id).layers
    assert P.built_record(got.image_id)["base"] == base_id


@pytest.mark.parametrize("other", ["envman/base:12.4.1-base-ubuntu22.04-x", "envman/base:12.4.1-base-ubuntu22.04x",
                                   "xenvman/base:12.4.1-base-ubuntu22.04", "envman/base:12.4.1-base-ubuntu22"])
def test_only_the_base_s_own_ref_is_pinned(other):
    """Boundary: a FROM naming another image (a longer tag, another repository) is left as it is."""
    from envman.images.provenance import pin_from

    text = f"FROM {other}\nRUN echo FROM {Base().ref}\n"
    assert pin_from(text, {Base().ref: "sha256:" + "1" * 64}) == text
    assert pin_from(f"FROM {Base().ref} AS b\n", {Base().ref: "sha256:" + "1" * 64}) == f"FROM sha256:{'1' * 64} AS b\n"


def test_on_buildkit_the_base_s_id_goes_through_a_tag_named_after_it_removed_afterwards(tmp_path, monkeypatch, stack):
    """BuildKit reads ``sha256:...`` in FROM as a registry name: the ID gets the tag
    ``envman/by-id:<hex>`` (a tag that can name no other image of envman's) for the build only."""
    from envman.engine.builder import ID_TAG_REPOSITORY
    from tests.support.fake_engine import from_line

    engine = FakeEngine()
    contexts = []

    class Kit:
        kind = "buildkit"

        def build(self, tar, tag, **kw):
            contexts.append(tar)
            return engine.build(tar, tag, **{k: v for k, v in kw.items() if k != "secrets"})

    _swapping_base(monkeypatch, tmp_path, engine, f"FROM {Base().ref}\nRUN x\n", swap=False)
    got = B.build_stack(engine, stack, base=Base(), builder=Kit())
    by_id = f"{ID_TAG_REPOSITORY}:{got.base.image_id.split(':', 1)[1]}"
    assert from_line(contexts[-1]) == by_id and not engine.image_exists(by_id)
    assert engine.inspect_image(got.image_id).layers[:-1] == engine.inspect_image(got.base.image_id).layers
