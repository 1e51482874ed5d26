"""``envman clean``: remove what envman keeps for the invoking user.

What goes (each only where it exists):

* state (``$ENVMAN_STATE_DIR``, else the user's state directory): the project homes mounted as
  HOME, build logs, smoke reports, locks, caches, pins, run records — only the entries envman
  names there (:data:`STATE_ENTRIES`), never anything else a user keeps in that directory;
* the run-plan cache, the render cache, the kept matrix parses, wheel facts, the buildx probe's
  answer, the kept engine kinds and the wheel store (``runs.json``, ``renders.json``, ``matrix/``,
  ``wheels.json``, ``buildkit-cli.json``, ``kinds.json`` and ``wheels/`` in
  ``envman.paths.cache_dir()``);
* with ``--config``: the project registry, the trust records and ``config.toml`` (the project files themselves,
  ``envman.toml`` in each project, are the user's and stay);
* with ``--images``: the images the invoking user built (label ``envman.built-by.uid``: stack
  candidates and promoted stacks, project images, notebook layers) that no container uses.
  Another user's images, images that record no builder and anything not envman's are never touched.

:func:`plan` works out the list (``--dry-run`` prints it); :func:`apply` removes it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine, EngineFacts

#: What envman writes under its state directory (files and folders).
STATE_ENTRIES = ("homes", "logs", "reports", "locks", "cache", "registry", "slurm", "charliecloud", "exports",
                 "containers", "pins.json", "matrix-origins.json")
#: What envman writes under its config directory (trust.json: the files you trusted).
CONFIG_ENTRIES = ("projects.json", "projects.json.lock", "trust.json", "trust.json.lock", "config.toml")


@dataclass(frozen=True)
class CleanPlan:
    paths: tuple[Path, ...] = ()
    sizes: tuple[int, ...] = ()
    images: tuple[tuple[str, str, int], ...] = ()  # (image id, what: tags or id, size)
    kept_in_use: tuple[str, ...] = ()  # images of the user that a container uses: left alone
    dirs: tuple[Path, ...] = field(default=())  # envman's own folders, removed when empty afterwards

    @property
    def empty(self) -> bool:
        return not self.paths and not self.images


def _size(p: Path) -> int:
    try:
        if p.is_symlink() or p.is_file():
            return p.lstat().st_size
        return sum(f.lstat().st_size for f in p.rglob("*") if not f.is_dir() or f.is_symlink())
    except OSError:
        return 0


def _entries(base: Path, names: tuple[str, ...]) -> list[Path]:
    return [base / n for n in names if (base / n).exists() or (base / n).is_symlink()]


def plan(*, config: bool = False, images: bool = False, engine: EngineFacts | None = None, uid: int | None = None) -> CleanPlan:
    """What ``envman clean`` would remove for this user (``engine``: for ``images``)."""
    from envman.matrix.parsed import PARSED_FOLDER
    from envman.paths import config_dir, state_dir
    from envman.engine.kindcache import KINDS_FILE
    from envman.render.rendercache import RENDER_CACHE
    from envman.engine.builder import PROBE_FILE
    from envman.images.wheelstore import STORE_FOLDER
    from envman.render.wheelfacts import FACTS_FILE
    from envman.run.fastpath import cache_file

    state = state_dir()
    paths = _entries(state, STATE_ENTRIES)
    cache = Path(cache_file()).parent
    dirs = [state]
    if cache.exists() and cache.resolve() != (state / "cache").resolve():
        paths += _entries(cache, ("runs.json", RENDER_CACHE, PARSED_FOLDER, FACTS_FILE, PROBE_FILE, STORE_FOLDER,
                                  KINDS_FILE))
        dirs.append(cache)
    if config:
        paths += _entries(config_dir(), CONFIG_ENTRIES)
        dirs.append(config_dir())
    found: list[tuple[str, str, int]] = []
    kept: list[str] = []
    if images:
        from envman.images.prune import images_in_use, list_envman_images

        assert engine is not None  # images come with the engine (envman clean --images connects first)
        me = os.getuid() if uid is None else uid
        used = images_in_use(engine)
        for row in list_envman_images(engine):
            if row.built_by_uid != me:
                continue
            what = ", ".join(row.tags) or row.image_id[:19]
            if row.image_id in used or any(t in used for t in row.tags):
                kept.append(what)
            else:
                found.append((row.image_id, what, row.size))
    return CleanPlan(tuple(paths), tuple(_size(p) for p in paths), tuple(found), tuple(kept), tuple(dirs))


def _make_writable(folder: str) -> None:
    """``chmod 700`` the folder itself, never what a symlink put in its place points at (a
    container that has the folder mounted may swap it while ``clean`` runs), and only a folder of
    this user's."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        def writable(func, path, _exc):  # a read-only folder in a home (e.g. pip's caches)
            _make_writable(os.path.dirname(path))
            try:
                func(path)
            except FileNotFoundError:
                pass  # gone meanwhile (a container still writing there): nothing left to remove
            except OSError as e:
                from envman.errors import EnvmanError

                raise EnvmanError(f"cannot remove {path}: {e.strerror}", where="envman clean",
                                  fix="stop the containers that use it (envman ps), then run envman clean again")

        shutil.rmtree(p, onerror=writable)
    else:
        p.unlink(missing_ok=True)


def apply(p: CleanPlan, engine: ContainerEngine | None = None, kept: list[str] | None = None) -> list[str]:
    """Remove what ``p`` lists; the images that could not be removed (with the engine's reason).

    An image others are built on (a rebuilt base under its stacks) goes after them: removal
    repeats while it makes progress; one that still has children (another user's, say) is kept
    and named in ``kept``, not a failure."""
    for path in p.paths:
        _remove(path)
    for d in p.dirs:
        try:
            d.rmdir()  # only when nothing else is left in it
        except OSError:
            pass
    todo = list(p.images)
    errors: dict[str, str] = {}
    while todo:
        assert engine is not None  # a plan with images was made with the engine
        left = []
        for image_id, what, size in todo:
            try:
                engine.remove_image(image_id, force=True)  # force: untag every tag of this user's image
            except Exception as exc:  # noqa: BLE001 - an image in use since the plan: say so, go on
                left.append((image_id, what, size))
                errors[image_id] = str(exc)
        if len(left) == len(todo):
            break
        todo = left
    failed = []
    for image_id, what, _size in todo:
        if "dependent child" in errors[image_id]:
            if kept is not None:
                kept.append(f"{what}: other images are built on it")
        else:
            failed.append(f"{what}: {errors[image_id]}")
    return failed
