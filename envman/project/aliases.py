"""Where a path may be reached under another name, as the host's file system tells.

A protected path (:mod:`envman.project.policy`) may be met by a mount under a name that is not its
real path: through a second mount of the same file system that shows its folder again, a file
system that reports another file's (device, inode) (the mount table, :func:`mount_table` and
:func:`shared_places`), or a symbolic link or another spelling of a name on the way (the folder
listings of :func:`leading_out`). The policy asks these to know which protected paths it may
resolve only when a mount reaches them.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import unicodedata

from envman import safefile
from envman.errors import UserError

#: File system types each of whose files reports the file system's own device, so that two paths
#: with one (device, inode) name one file of it: those homes live on. Any other type counts as one
#: whose files may have the identity of a file elsewhere (overlayfs reports the device and inode
#: of the file in the layer below: Linux's Documentation/filesystems/overlayfs.rst, "Inode
#: properties"); the kernel's own (proc, sysfs, ...) are mounted only where system paths are.
OWN_IDENTITY_TYPES = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "nfs", "nfs4", "cifs", "smb3", "9p", "virtiofs",
    "autofs", "vfat", "exfat", "ntfs3", "squashfs", "erofs", "fuse", "fuseblk",
})


def path_chain(path: str) -> list[str]:
    """``path`` and each of its parents, up to ``/``."""
    out = [path]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


def mount_table() -> list[tuple[str, str, str, str]] | None:
    """(mount point, root in its file system, device, file system type) of each mount this
    process sees (``/proc/self/mountinfo``, proc(5)), or ``None`` when they cannot be read."""


    try:
        text = os.fsdecode(safefile.read_file("/proc/self/mountinfo", what="mount table", limit=1 << 24))
    except (OSError, UserError):
        return None  # none, or more than a table this size: every home is made at once

    def unescape(field: str) -> str:
        return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)

    out = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 10 or "-" not in fields[6:-2]:
            return None
        out.append((unescape(fields[4]), unescape(fields[3]), fields[2], fields[fields.index("-", 6) + 1]))
    return out


def shared_places(mounts: list[tuple[str, str, str, str]]) -> tuple[list[str], frozenset[str], frozenset[str]]:
    """Where a path may have the (device, inode) of another path (besides a hard link, or another
    spelling of one name): (the folders a second mount of a file system shows again, and the
    mounts of a type not in :data:`OWN_IDENTITY_TYPES`: sorted, and as a set; those mounts alone)."""
    places: set[str] = set()
    foreign: set[str] = set()
    by_dev: dict[str, dict[str, list[str]]] = {}
    for point, root, dev, fstype in mounts:
        if fstype not in OWN_IDENTITY_TYPES and not fstype.startswith("fuse."):
            foreign.add(point)
        by_dev.setdefault(dev, {}).setdefault(root, []).append(point)
    for roots in by_dev.values():
        for root, points in roots.items():
            for outer in (path_chain(root) if root.startswith("/") else [root]):
                rest = "" if outer == root else root if outer == "/" else root[len(outer):]
                for outer_point in roots.get(outer, ()):
                    # where the mount of ``outer`` shows the folder ``root``
                    shown = rest if outer_point == "/" and rest else outer_point + rest
                    for point in points:
                        if shown != point:
                            places.update((shown, point))
    places |= foreign
    return sorted(places), frozenset(places), frozenset(foreign)


@functools.lru_cache(maxsize=8)
def _names_plan(names: tuple[tuple[str, str], ...]) -> tuple[dict[str, frozenset[str]], dict[str, dict[str, list[int]]]]:
    """For :func:`leading_out`: (each part of the paths ``names`` by its name folded as a file
    system that ignores case may fold it; for each folder on the way, "" for the first, each name
    in it → the indices of the paths that go through it)."""
    spelled: dict[str, set[str]] = {}
    through: dict[str, dict[str, list[int]]] = {}
    for i, (name, _) in enumerate(names):
        parts = name.split("/")
        for k, part in enumerate(parts):
            spelled.setdefault(part.casefold(), set()).add(part)
            through.setdefault("/".join(parts[:k]), {}).setdefault(part, []).append(i)
    return {k: frozenset(v) for k, v in spelled.items()}, through


def leading_out(root: str, names: tuple[tuple[str, str], ...]) -> set[int] | None:
    """The indices of ``names`` (paths relative to the real path ``root``) whose real path may
    not be ``root`` joined with the name: a symbolic link on the way, a name on the way that
    another listed name may answer to (a file system that ignores case), a folder on the way that
    cannot be listed. One listing of ``root`` and one of each folder on the way that exists.
    ``None``: ``root`` is a folder you may search but not list (nothing is known)."""

    spelled, through = _names_plan(names)

    def listing(rel: str) -> tuple[dict[str, str], set[str]] | int:
        """(name → "link", "folder" or "other"; the names another name there may stand for), or an errno."""
        kinds: dict[str, str] = {}
        alike: set[str] = set()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                for e in it:
                    try:
                        kinds[e.name] = ("link" if e.is_symlink() else
                                         "folder" if e.is_dir(follow_symlinks=False) else "other")
                    except OSError:
                        kinds[e.name] = "link"  # unknown: as if it led anywhere
                    if e.name.isascii():
                        keys = {e.name.lower()}
                    else:

                        keys = {e.name.casefold(), unicodedata.normalize("NFD", e.name).casefold(),
                                unicodedata.normalize("NFKD", e.name).casefold()}
                    for key in keys:
                        alike.update(w for w in spelled.get(key, ()) if w != e.name)
        except OSError as exc:
            return exc.errno or -1
        return kinds, alike

    top = listing("")
    if isinstance(top, int):
        if top in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
            return set()  # nothing under it can be looked up
        if top == errno.EACCES and not os.access(root, os.X_OK, effective_ids=os.access in os.supports_effective_ids):
            return set()  # nor in a folder you may not search
        return None
    out: set[int] = set()
    todo = [("", top)]
    while todo:
        rel, (kinds, alike) = todo.pop()
        need = through[rel]
        for part in need.keys() & alike:
            out.update(need[part])
        for part in need.keys() & kinds.keys():
            if kinds[part] == "link":
                out.update(need[part])
            elif kinds[part] == "folder" and (sub := os.path.join(rel, part)) in through:
                found = listing(sub)
                if isinstance(found, int):
                    out.update(i for more in through[sub].values() for i in more)
                else:
                    todo.append((sub, found))
    return out
