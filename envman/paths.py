"""Where envman's data lives: shipped templates and matrices, the user's own state, and, inside
every run's container, the project and its HOME.

Only ``os`` and ``sys`` at import (``pathlib`` inside the functions that return paths):
:func:`cache_dir` is on the hot path of every ``envman run``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Mapping

#: Where the project root is mounted, and the working directory of every run.
WORKSPACE = "/workspace"
#: The HOME of every run (the stack image makes it, usable by any uid, and sets ``HOME`` to it); a
#: per-project host directory is mounted there so ``pip install --user`` and dotfiles persist.
CONTAINER_HOME = "/home/envman"


def package_dir() -> Path:
    """The installed ``envman`` package."""
    from pathlib import Path

    return Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """A folder of the data shipped with envman (``templates``, ``matrices``): inside the installed
    package, else beside it in a source checkout."""
    pkg = package_dir()
    installed = pkg / "_data" / name
    if installed.is_dir():
        return installed
    return pkg.parent / name  # source checkout / editable install


def templates_dir() -> Path:
    return data_dir("templates") / "dockerfiles"


def matrices_dir() -> Path:
    return data_dir("matrices")


def config_dir() -> Path:
    """User config (``config.toml``, the project registry). ``ENVMAN_CONFIG_DIR`` overrides."""
    from pathlib import Path

    env = os.environ.get("ENVMAN_CONFIG_DIR")
    if env:
        return Path(env)
    if not sys.platform.startswith("linux"):
        from platformdirs import user_config_dir

        return Path(user_config_dir("envman", appauthor=False))
    return Path(xdg_home("XDG_CONFIG_HOME", ".config"), "envman")


def state_dir() -> Path:
    """Build logs, smoke reports, locks. ``ENVMAN_STATE_DIR`` overrides."""
    from pathlib import Path

    return Path(state_folder())


def state_folder() -> str:
    """:func:`state_dir` as a string, without pathlib (the run's fast path uses it)."""
    env = os.environ.get("ENVMAN_STATE_DIR")
    if env:
        return env
    if not sys.platform.startswith("linux"):
        from platformdirs import user_state_dir

        return str(user_state_dir("envman", appauthor=False))
    return os.path.join(xdg_home("XDG_STATE_HOME", os.path.join(".local", "state")), "envman")


def xdg_home(variable: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """An XDG base directory on Linux, as platformdirs gives it (without its import, on every
    run's path): ``$variable`` when it is an absolute path (the XDG spec ignores a relative one),
    else ``default`` under the home: ``$HOME`` when absolute, else the password database's."""
    env = os.environ if environ is None else environ
    value = env.get(variable, "")
    if os.path.isabs(value):
        return value
    home = env.get("HOME")
    if home is None or not os.path.isabs(home):
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    return os.path.join(home.rstrip("/") or "/", default)


def cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """The user's envman cache folder (the run-plan cache, rendered layer Dockerfiles):
    ``ENVMAN_CACHE_DIR``, else ``$ENVMAN_STATE_DIR/cache``, else the user's cache directory
    (``$XDG_CACHE_HOME`` or ``~/.cache``; ``~/Library/Caches`` on macOS) ``/envman``."""
    env = os.environ if environ is None else environ
    if env.get("ENVMAN_CACHE_DIR"):
        return env["ENVMAN_CACHE_DIR"]
    if env.get("ENVMAN_STATE_DIR"):
        return os.path.join(env["ENVMAN_STATE_DIR"], "cache")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), "envman")
    return os.path.join(xdg_home("XDG_CACHE_HOME", ".cache", env), "envman")


def caches_enabled(environ: Mapping[str, str] | None = None, *, switch: str = "ENVMAN_RUN_CACHE") -> bool:
    """Whether envman's caches are on: ``switch`` unset or anything but ``0``, ``false``, ``no``,
    ``off``. ``ENVMAN_RUN_CACHE`` switches the run-plan cache, wheel facts and the buildx probe's
    answer; ``ENVMAN_PARSE_CACHE`` the kept matrix parses (:func:`envman.matrix.parsed.enabled`)."""
    env = os.environ if environ is None else environ
    return env.get(switch, "1").strip().lower() not in ("0", "false", "no", "off")
