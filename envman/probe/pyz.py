"""Pack the probe package (``envman/probe/app``) into ``probe.pyz``, one deterministic zipapp.

The archive is a ``#!/usr/bin/env python3`` line followed by a zip that Python's zipimport
reads (3.6 and later): ``__main__.py`` at the top calls ``envman_probe.cli.entry``, and every
module of the package sits under ``envman_probe/``. The bytes depend on the modules' bytes
only, never on the machine, the clock or the host Python: entries sorted by name, stored
uncompressed (deflate output may differ between zlib builds), a fixed date (1980-01-01),
mode 0644, Unix as the creating system, no extra fields, no comment. So the render hash of
every build context that carries it is stable.

This module uses the standard library only, so it can be loaded on its own by path.
"""

from __future__ import annotations

from pathlib import Path
import io

#: The package's name inside the archive (unlikely to shadow a module of any framework).
PACKAGE = "envman_probe"
#: The first line: ``./probe.pyz`` runs on a bare host too; in an image envman runs
#: ``python /opt/envman/probe.pyz`` (the shebang is then a comment).
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN = (b'"""envman probe: python probe.pyz [options] (the options: envman_probe/__init__.py)."""\n'
        b"\nimport sys\n\nfrom " + PACKAGE.encode() + b".cli import entry\n\nsys.exit(entry())\n")
#: What every entry carries: the earliest date a zip can hold, a plain file's mode, Unix.
DATE_TIME = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644
UNIX = 3
#: The modules a probe package must have to be run.
REQUIRED = ("__init__.py", "cli.py", "contract.py")


class ProbeSourceMissing(FileNotFoundError):
    """The probe package is missing, or lacks a module it cannot run without."""


def module_files(app_dir: Path) -> list[Path]:
    """The package's modules: every ``*.py`` whose path is made of Python identifiers (so no
    ``__pycache__``, editor backups or stray scripts), in archive order."""
    missing = [name for name in REQUIRED if not (app_dir / name).is_file()]
    if missing:
        raise ProbeSourceMissing(f"{app_dir}: the probe package has no {', '.join(missing)}")
    found = []
    for path in app_dir.rglob("*.py"):
        rel = path.relative_to(app_dir)
        if path.is_file() and all(part.isidentifier() for part in (*rel.parts[:-1], rel.stem)):
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(app_dir).as_posix())


def entries(app_dir: Path) -> list[tuple[str, bytes]]:
    """``(name in the archive, bytes)`` for ``__main__.py`` and every module, sorted by name."""
    out = [("__main__.py", MAIN)]
    out += [(f"{PACKAGE}/{p.relative_to(app_dir).as_posix()}", p.read_bytes()) for p in module_files(app_dir)]
    return sorted(out)


def build_pyz(app_dir: Path) -> bytes:
    """The zipapp of the probe package in ``app_dir`` (the same bytes for the same modules)."""
    import zipfile  # here, not at import: project images' Dockerfiles name the probe's paths

    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in entries(app_dir):
            info = zipfile.ZipInfo(name, date_time=DATE_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = UNIX
            info.external_attr = FILE_MODE << 16
            zf.writestr(info, data)
    return buf.getvalue()
