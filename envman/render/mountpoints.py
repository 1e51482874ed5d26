"""The mount points of a BuildKit stack's ``RUN`` steps, made by the image before its first ``RUN``.

BuildKit mounts files and folders into every ``RUN`` step: its own ``/etc/hosts`` and
``/etc/resolv.conf`` (and ``/etc/hostname`` where it sets one), and each ``--mount`` target (the
caches, the CA bundle, the wheelhouse, a secret). Where a target does not exist in the step's
image, BuildKit makes an empty stub for it before the step and, before 0.11 (Docker 20.10 ships
0.8), removes it after the step without putting its folder's time back: the folder enters the
step's layer with the time of that removal, and two builds of the same step differ. A stub that
already exists is left alone. So a BuildKit stack's Dockerfile adds, right after ``FROM``, one tar
of every such mount point (:data:`MOUNT_POINTS_FILE`, unpacked by ``ADD``): empty files and
folders, their parents, owner 0:0, one time (:data:`envman.render.imagepaths.SETTLED_TIME`), standard
modes. The layer ``ADD`` makes is the same bytes wherever it is built (the tar's entries carry
their times and modes), and no later step touches those folders' times
(``tests/docker/test_reproducible_layers.py``). The engines that run the image mount their own
``/etc/hosts``, ``/etc/resolv.conf`` and ``/etc/hostname`` over the empty ones.

Standard library only; tarfile is imported when a tar is written (the run path lays project images
out through :mod:`envman.render.layout`, which names the tar).
"""

from __future__ import annotations

import io
import posixpath
from typing import Iterable, Mapping

from envman.render.steps import BindMount, CacheMount, RunStep, Step

#: The tar's path in a stack's build context, unpacked at ``/``.
MOUNT_POINTS_FILE = "envman/mount-points.tar"
#: The files BuildKit mounts into every ``RUN`` step whatever its flags say.
BUILDKIT_FILES = ("/etc/hosts", "/etc/resolv.conf", "/etc/hostname")
#: Folders whose standard mode is not 0755 (a parent in the tar is given its standard mode: the
#: unpacking sets it on the image's folder).
_FOLDER_MODES = {"/root": 0o700, "/tmp": 0o1777}


def mount_points(steps: Iterable[Step], context_files: Mapping[str, bytes]) -> dict[str, bool]:
    """Every mount point of ``steps``' ``RUN`` steps and BuildKit's own files, path → is a folder.
    A bind mount of a context file is a file; of a context folder, a folder; a cache a folder; a
    secret a file."""
    points = {path: False for path in BUILDKIT_FILES}
    for step in steps:
        if not isinstance(step, RunStep):
            continue
        for m in step.mounts:
            if isinstance(m, CacheMount):
                points[m.target] = True
            elif isinstance(m, BindMount):
                points[m.target] = m.source not in context_files
            else:
                points[m.target] = False
    for path in points:
        if not posixpath.isabs(path) or posixpath.normpath(path) != path or path == "/":
            raise ValueError(f"mount point {path!r} is not a plain absolute path")
    return points


def mount_points_tar(points: Mapping[str, bool], mtime: int) -> bytes:
    """The tar of ``points`` (:func:`mount_points`): each one and its parents, in path order,
    the same bytes for the same points."""
    import tarfile  # a BuildKit stack's render only: envman.render.layout, on the run path, imports this module

    entries = dict(points)
    for path in points:
        parent = posixpath.dirname(path)
        while parent != "/":
            if not entries.setdefault(parent, True):
                raise ValueError(f"mount point {parent!r} is a file and the folder of {path!r}")
            parent = posixpath.dirname(parent)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(entries):
            info = tarfile.TarInfo(path[1:])
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "root", "root"
            if entries[path]:
                info.type, info.mode = tarfile.DIRTYPE, _FOLDER_MODES.get(path, 0o755)
            else:
                info.type, info.mode, info.size = tarfile.REGTYPE, 0o644, 0
            tar.addfile(info)
    return buf.getvalue()


__all__ = ["BUILDKIT_FILES", "MOUNT_POINTS_FILE", "mount_points", "mount_points_tar"]
