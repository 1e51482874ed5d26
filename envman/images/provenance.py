"""What envman may reuse from an engine other users share: the images this user built.

An engine's tags belong to the engine, not to a user: anyone who can reach it can build an image
with the labels of an envman base or stack candidate and give it that tag, and labels are
written by whoever builds (a base's recipe hash is ``envman render``'s to compute). So a base
(``envman/base:<tag>``) or a stack candidate (``envman/<stack>:<render hash>``) found under its
tag is reused only when its image ID is one this user's own build produced, recorded here:
``built.json`` in the user's state directory, private and read like every state file (a file
another user owns or can write is not believed). A stack's record also names the ID of the base
it was built on, so the stack is reused only on that very base (the base's ID is part of the
stack's cache key). An image not in the record is built again: the engine's build cache makes
that cheap when the image there is what the recipe gives (the same layers, the same ID, which is
then recorded), and gives an image of this user's own when it is not.

A build starts ``FROM`` the image envman checked, by its ID (:func:`pinned_context`): a tag
named in the Dockerfile is resolved by the engine when the step runs, and anyone can move it
between envman's check and that moment.

Bases are built under a machine-wide lock (:func:`machine_lock`), a file in the system's shared
lock directory that every user can open and lock, so that two users never build one base at once.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

from envman.errors import EnvmanError
from envman.state import atomic_write, locks_dir, read_json_object, safe_name, state_dir

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine
    from envman.engine.builder import Builder

#: The record's file in the state directory.
BUILT_FILE = "built.json"
#: The most images the record keeps (the newest); an image dropped from it is built again once.
MAX_BUILT = 4096
#: Where the machine-wide locks go: the first of these that is a root-owned directory everyone may
#: write with the sticky bit (nobody can remove or replace another user's file there).
MACHINE_LOCK_DIRS = ("/run/lock", "/var/lock", "/tmp")


def built_path() -> Path:
    return state_dir() / BUILT_FILE


def _records() -> dict[str, dict]:
    images = read_json_object(built_path()).get("images")
    if not isinstance(images, dict):
        return {}
    return {k: v for k, v in images.items() if isinstance(k, str) and isinstance(v, dict)}


def built_record(image_id: str) -> dict | None:
    """This user's record of ``image_id`` (``ref``, ``base``: the base image's ID or ``""``), or
    ``None`` when this user never built it."""
    return _records().get(image_id) if image_id else None


def built_here(image_id: str, *, base: str = "") -> bool:
    """Whether this user built ``image_id``, on the base image ``base`` (``""``: on no base of
    envman's)."""
    rec = built_record(image_id)
    return rec is not None and rec.get("base", "") == base


def record_built(image_id: str, ref: str, *, base: str = "") -> None:
    """Record that this user's build of ``ref`` produced ``image_id`` (on the base ``base``)."""
    from filelock import FileLock

    if not image_id.startswith("sha256:"):
        return  # not an image ID (an engine that answered with a tag): nothing to vouch for
    locks_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks_dir() / f"{BUILT_FILE}.lock")):
        images = _records()
        images.pop(image_id, None)
        images[image_id] = {"ref": ref, "base": base, "at": int(time.time())}
        kept = dict(list(images.items())[-MAX_BUILT:])  # insertion order: the newest last
        atomic_write(built_path(), json.dumps({"images": kept}, indent=1))


def pin_from(dockerfile: str, pins: Mapping[str, str]) -> str:
    """``dockerfile`` with every ``FROM`` that names a key of ``pins`` (``FROM [--platform=P] REF
    [AS STAGE]``) naming its value instead; other lines, and ``FROM`` lines naming anything else,
    unchanged."""
    for ref, image in pins.items():
        dockerfile = re.sub(rf"(?im)^(FROM(?:[ \t]+--\S+)*[ \t]+){re.escape(ref)}(?=[ \t]*$|[ \t]+AS[ \t])",
                            lambda m: m.group(1) + image, dockerfile)
    return dockerfile


@contextmanager
def pinned_context(engine: ContainerEngine, builder: Builder, files: Mapping[str, tuple[bytes, int]],
                   pins: Mapping[str, str]) -> Iterator[bytes]:
    """The build context ``files`` (name: ``(bytes, mode)``) as a tar whose Dockerfile starts
    ``FROM`` the image IDs ``pins`` gives for the refs it names. The classic builder reads an ID
    there; BuildKit reads ``sha256:...`` as a registry name, so for BuildKit each ID gets a tag
    named after itself (``envman/by-id:<64 hex>``) for the build, removed afterwards."""
    from envman.engine.builder import ID_TAG_REPOSITORY
    from envman.engine.context import deterministic_tar

    ids = {ref: image for ref, image in pins.items() if image.startswith("sha256:")}
    tags = {image: f"{ID_TAG_REPOSITORY}:{image.split(':', 1)[1]}" for image in ids.values()} \
        if builder.kind == "buildkit" else {}
    made: list[str] = []
    try:
        for image, tag in tags.items():
            engine.tag(image, tag)
            made.append(tag)
        out = dict(files)
        if "Dockerfile" in out and ids:
            data, mode = out["Dockerfile"]
            text = pin_from(data.decode(), {ref: tags.get(image, image) for ref, image in ids.items()})
            out["Dockerfile"] = (text.encode(), mode)
        yield deterministic_tar(out)
    finally:
        for tag in made:
            engine.remove_image(tag)


def machine_lock_dir() -> Path:
    """The shared lock directory (:data:`MACHINE_LOCK_DIRS`)."""
    for d in MACHINE_LOCK_DIRS:
        try:
            st = os.stat(d)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o1002 == 0o1002:
            return Path(d)
    raise EnvmanError("no shared lock directory on this machine", where=", ".join(MACHINE_LOCK_DIRS),
                      fix="a root-owned directory everyone may write, with the sticky bit (mode 1777), such as /tmp")


def _open_lock_file(path: Path) -> int:
    """An open descriptor of the lock file ``path``, made (mode 0644) when missing. Never follows a
    symlink and never waits on a FIFO; anything but a regular file is refused."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                os.fchmod(fd, 0o644)  # whatever the umask: every user must be able to open it
            except FileExistsError:
                continue  # another process made it first: open theirs
        except OSError as exc:
            why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise EnvmanError(f"cannot open the machine-wide lock: {why}", where=str(path),
                              fix="ask whoever owns it (ls -l) or an administrator to remove it") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise EnvmanError("the machine-wide lock is not a regular file", where=str(path),
                              fix="ask whoever owns it (ls -l) or an administrator to remove it")
        return fd
    raise EnvmanError("cannot make the machine-wide lock", where=str(path), fix="try again")


@contextmanager
def machine_lock(name: str, *, timeout: float, what: str) -> Iterator[Path]:
    """Hold the machine-wide lock ``name`` (``flock``: released by the kernel when the process
    ends, however it ends) for every user of this machine; one error line after ``timeout``."""
    import fcntl

    path = machine_lock_dir() / f"envman-{safe_name(name)}.lock"
    fd = _open_lock_file(path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EnvmanError(f"another envman build of {what} (any user's) has held its lock for "
                                      f"{timeout:.0f} s", where=str(path),
                                      fix="wait for it to finish (fuser -v on the file names the process)") from None
                time.sleep(0.05)
        try:
            yield path
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = ["BUILT_FILE", "MACHINE_LOCK_DIRS", "built_here", "built_path", "built_record", "machine_lock",
           "machine_lock_dir", "pin_from", "pinned_context", "record_built"]
