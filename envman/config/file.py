"""The user's config file, ``config.toml`` in envman's config folder: one reader,
:func:`read_config` (one parse per content), one check of each table's shape
(:meth:`ConfigFile.table`: a table, holding only its keys, one wording), and one loader per table
that returns it typed (:func:`load_network_config`, :func:`load_build_config`,
:func:`load_matrix_config`; ``[run]``/``[project]`` in ``envman.project.settings``, ``[engine]`` in
``envman.engine.select``, ``[registry]`` in ``envman.images.remote``, ``[slurm]`` in
``envman.cluster.batch``). Tables envman does not know are left alone. Every error is one line
naming the file and the key (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from envman.config.build import BUILD_KEYS, BaseMode, BuildConfig
from envman.config.matrix import MATRIX_KEYS, MatrixConfig
from envman.config.network import NETWORK_KEYS, NetworkConfig
from envman.config.values import Invalid, check_bool
from envman.errors import UserError
from envman.paths import config_dir

CONFIG_NAME = "config.toml"


def config_path() -> Path:
    """The user's config file: ``config.toml`` in envman's config folder (``ENVMAN_CONFIG_DIR``)."""
    return config_dir() / CONFIG_NAME


#: Every table config.toml may hold and the keys of each: what :func:`read_config` checks.
TABLES: dict[str, tuple[str, ...]] = {
    "network": tuple(NETWORK_KEYS),
    "build": BUILD_KEYS,
    "engine": ("host",),
    "registry": ("default", "allow_http", "pull_on_run", "trust_registry"),
    "matrix": MATRIX_KEYS,
    "run": ("gpus", "shm_size", "environment", "mounts"),
    "project": ("stack",),
    "slurm": ("runtime", "partition"),
}


@dataclass(frozen=True)
class ConfigFile:
    """config.toml as parsed by :func:`read_config` (``found``: it exists)."""

    path: Path
    document: Mapping[str, Any]
    found: bool = True

    def table(self, name: str) -> dict[str, Any]:
        """The table ``[name]`` of :data:`TABLES`, checked (empty when the file has none): a
        table, holding only its keys; else one ``UserError`` line naming the file and the key."""
        keys = TABLES[name]
        table = self.document.get(name, {})
        if not isinstance(table, dict):
            raise UserError(f"[{name}] must be a table", where=self.where(name),
                            fix=f"write [{name}] on a line of its own, then its keys (key = value)")
        unknown = [k for k in table if k not in keys]
        if unknown:
            raise UserError(f"unknown key {name}.{unknown[0]}", where=self.where(name, unknown[0]),
                            fix=f"known keys in [{name}]: " + ", ".join(keys))
        return dict(table)

    def flag(self, table: str, key: str) -> bool:
        """``[table] key``, a boolean (false when unset), in the one wording of :func:`check_bool`."""
        value = self.table(table).get(key, False)
        try:
            return check_bool(value, key)
        except Invalid as exc:
            raise UserError(exc.what, where=self.where(table, key), fix=exc.fix) from None

    def where(self, table: str, key: str | None = None) -> str:
        """How errors name a table or one of its keys: ``FILE: [table].key``."""
        return f"{self.path}: [{table}]" + (f".{key}" if key else "")


_READ: dict[tuple[str, bytes], ConfigFile] = {}


def read_config(path: Path | None = None) -> ConfigFile:
    """The user's config file, read now and parsed once per content in this process. A file that
    is missing is an empty config; a file that cannot be read or parsed, or that is not the
    user's own (another uid's, writable by its group or others, or a symlink to such a file:
    its mounts, environment and index would apply to every run), is one ``UserError`` line
    naming it. Its tables are checked by :meth:`ConfigFile.table`."""
    from envman.safefile import parse_toml, read_file

    path = Path(path) if path is not None else config_path()
    try:
        data = read_file(path, what="config file", private=True, follow=True,
                         fix="make it yours and not writable by others (chown, chmod go-w), or remove it")
    except FileNotFoundError:
        return ConfigFile(path, {}, found=False)
    key = (str(path), data)
    if key not in _READ:
        doc = parse_toml(data, what="config file", where=str(path))
        _READ.clear()  # one config file per process, as a rule: keep only the latest
        _READ[key] = ConfigFile(path, doc)
    return _READ[key]


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The whole config file as a dict ({} when there is none); malformed TOML → UserError."""
    return dict(read_config(path).document)


def load_network_config(path: Path | None = None) -> NetworkConfig:
    """The ``[network]`` table of the user config, checked (nothing set when it is absent);
    relative paths (``ca_bundle``, ``wheelhouse``) are taken relative to the config file."""
    cfg = read_config(path)
    return NetworkConfig.parse(cfg.table("network"), folder=cfg.path.parent, where=lambda k: cfg.where("network", k))


def load_build_config(path: Path | None = None) -> BuildConfig:
    """The ``[build]`` table of the user config, checked (the defaults when it is absent)."""
    cfg = read_config(path)
    return BuildConfig.parse(cfg.table("build"), where=lambda k: cfg.where("build", k))


def load_builder_config(path: Path | None = None) -> str:
    """``[build] builder`` of the user config: ``auto`` (the default), ``buildkit`` or ``classic``."""
    return load_build_config(path).builder


def load_base_config(path: Path | None = None) -> BaseMode:
    """``[build] base`` of the user config: ``auto`` (the default), ``pull`` or ``rebuild``."""
    return load_build_config(path).base


def load_build_network(path: Path | None = None) -> str | None:
    """``[build] network`` of the user config: ``None`` for the engine's default, or ``host``."""
    return load_build_config(path).network


def load_matrix_config(path: Path | None = None) -> MatrixConfig:
    """The ``[matrix]`` table of the user config, checked (nothing set when it is absent)."""
    cfg = read_config(path)
    return MatrixConfig.parse(cfg.table("matrix"), folder=cfg.path.parent, where=lambda k: cfg.where("matrix", k))


__all__ = ["CONFIG_NAME", "TABLES", "ConfigFile", "config_path", "load_base_config", "load_build_config",
           "load_build_network", "load_builder_config", "load_config", "load_matrix_config", "load_network_config",
           "read_config"]
