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
between envman's check and that moment. The same holds for the images a stack or a rebuilt base
starts from that envman did not build (``nvidia/cuda:*``, ``ubuntu:*``, a base of ``envman base
make``): anyone can ``docker tag`` an image of theirs with those names. Such an image is used
as it is only when it is vouched for (:func:`upstream_pins`): its ID is one this user recorded
(``built.json``: built or imported by envman for them) or named in :data:`TRUSTED_IMAGES_ENV`, or
the engine pulled it from the repository its name gives (a ``RepoDigests`` entry of that
repository, which tagging or building never writes; the very digest when the name pins one), and
then by that digest or ID. Anything else is pulled by the build (``--pull``), which takes the
registry's image whatever the local tag names.

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
from typing import TYPE_CHECKING, Iterator, Mapping, NamedTuple

from envman.errors import EnvmanError
from envman.state import atomic_write, locks_dir, read_json_object, safe_name, state_dir

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine, EngineFacts, ImageInfo
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


def built_image_id(ref: str, *, base: str = "") -> str | None:
    """The image ID this user's newest build of ``ref`` on the base image ``base`` produced, or
    ``None``: what to run after a build, instead of whatever the tag names by then."""
    for image_id, rec in reversed(list(_records().items())):
        if rec.get("ref") == ref and rec.get("base", "") == base:
            return image_id
    return None


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


#: Image IDs (separated by blanks or commas) that the user vouches for as images to build on: one
#: they made outside envman (a test stand-in of an upstream image, say). The user's own
#: environment, as trusted as the command line.
TRUSTED_IMAGES_ENV = "ENVMAN_TRUSTED_IMAGES"
_ID = re.compile(r"sha256:[0-9a-f]{64}")
_FROM = re.compile(r"(?im)^FROM(?:[ \t]+--\S+)*[ \t]+(\S+)(?:[ \t]+AS[ \t]+(\S+))?[ \t]*$")


def from_images(dockerfile: str) -> list[str]:
    """The images ``dockerfile``'s ``FROM`` lines name, in order, once each: not an earlier
    stage, ``scratch``, an image ID or a name built from a build argument."""
    images: list[str] = []
    stages: set[str] = set()
    for m in _FROM.finditer(dockerfile):
        image, stage = m.group(1), m.group(2)
        if image.lower() not in stages and image != "scratch" and not _ID.fullmatch(image) and "$" not in image \
                and image not in images:
            images.append(image)
        if stage:
            stages.add(stage.lower())
    return images


def repository(ref: str) -> str:
    """The repository ``ref`` names, as one spelling: no digest, no tag, Docker Hub's implicit
    ``docker.io/`` and ``library/`` spelled out (``ubuntu:24.04`` → ``docker.io/library/ubuntu``)."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}"
    if name.startswith("index.docker.io/"):
        name = "docker.io/" + name[len("index.docker.io/"):]
    if name.startswith("docker.io/") and name.count("/") == 1:
        name = "docker.io/library/" + name[len("docker.io/"):]
    return name


def _trusted_ids() -> frozenset[str]:
    return frozenset(w for w in re.split(r"[\s,]+", os.environ.get(TRUSTED_IMAGES_ENV, "")) if _ID.fullmatch(w))


def vouched_pin(info: ImageInfo | None, ref: str) -> str | None:
    """What a ``FROM`` may name instead of ``ref`` to build on the image ``info`` (the one ``ref``
    names on the engine now): its ID when this user recorded it or trusts it by ID, else its
    digest in the repository ``ref`` names, when the engine pulled it from there (and the very
    digest ``ref`` pins, if it pins one); ``None`` when nothing vouches for it."""
    if info is None or not _ID.fullmatch(info.id):
        return None
    if built_record(info.id) is not None or info.id in _trusted_ids():
        return info.id
    want, _, pinned = ref.partition("@")
    for entry in sorted(info.repo_digests):
        repo, _, digest = entry.partition("@")
        if repository(repo) == repository(want) and re.fullmatch(r"sha256:[0-9a-f]{64}", digest) \
                and (not pinned or digest == pinned):
            return entry
    return None


class Upstream(NamedTuple):
    """What :func:`upstream_pins` found of the images a Dockerfile starts FROM."""

    pins: dict[str, str]  # name: what FROM names instead (:func:`vouched_pin`)
    ids: list[str]  # the vouched images' IDs, in order: part of what is built's cache key
    planted: bool  # one is on the engine with nothing to vouch for it (anyone's tag)
    missing: bool  # one is not on the engine

    @property
    def pull(self) -> bool:
        """The build must pull: a name that is not vouched for is resolved by the registry only."""
        return self.planted or self.missing


def upstream_pins(engine: EngineFacts, dockerfile: str, *, skip: tuple[str, ...] = ()) -> Upstream:
    """The images ``dockerfile`` starts ``FROM`` (but ``skip``), each vouched for or not."""
    found = Upstream({}, [], False, False)
    for ref in from_images(dockerfile):
        if ref in skip:
            continue
        info = engine.inspect_image(ref)
        pin = vouched_pin(info, ref)
        if info is None or pin is None:
            found = found._replace(planted=found.planted or info is not None, missing=found.missing or info is None)
            continue
        found.pins[ref] = pin
        found.ids.append(info.id)
    return found


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
    ``FROM`` the images ``pins`` gives for the refs it names: an image ID (as ``builder`` can
    build on it: :func:`envman.engine.builder.buildable_ids`), or a ``REPO@sha256:...`` digest
    reference."""
    from envman.engine.builder import buildable_ids
    from envman.engine.context import deterministic_tar

    ids = {ref: image for ref, image in pins.items() if image}
    with buildable_ids(engine, builder, [i for i in dict.fromkeys(ids.values()) if _ID.fullmatch(i)]) as names:
        out = dict(files)
        if "Dockerfile" in out and ids:
            data, mode = out["Dockerfile"]
            text = pin_from(data.decode(), {ref: names.get(image, image) for ref, image in ids.items()})
            out["Dockerfile"] = (text.encode(), mode)
        yield deterministic_tar(out)


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


__all__ = ["BUILT_FILE", "MACHINE_LOCK_DIRS", "built_here", "built_image_id", "built_path", "built_record", "machine_lock",
           "machine_lock_dir", "TRUSTED_IMAGES_ENV", "from_images", "pin_from", "pinned_context", "record_built",
           "repository", "Upstream", "upstream_pins", "vouched_pin"]
