"""config.toml's ``[network]`` table, and the network options every render and build accepts: one
key per CLI option of the same meaning (:data:`NETWORK_KEYS`), each checked by one validator
(:data:`VALIDATORS`, the same for a config value, a project value and a CLI value), parsed into
one typed value, :class:`NetworkConfig`::

    [network]
    registry_mirror = "registry.corp.example:5000/hub"     # --registry-mirror
    ca_bundle = "~/corp-ca.pem"                             # --ca-bundle (relative: to this file)
    pip_index = "https://pypi.corp.example/simple"          # --pip-index
    pip_extra_index = "https://wheels.corp.example/simple"  # --pip-extra-index
    framework_index = "https://torch.corp.example/whl/cu124" # --framework-index
    wheelhouse = "/srv/wheels"                              # --wheelhouse
    offline = false                                         # --offline / --online
    apt_mirror = "http://apt.corp.example/ubuntu"           # --apt-mirror
    python_install_mirror = "https://pbs.corp.example/releases/download"  # --python-mirror

Index URLs (``pip_index``, ``pip_extra_index``, ``framework_index``) may carry
``user:password@``: BuildKit builds pass them as a build secret; the classic builder refuses
them. Precedence: CLI option > this file (project files carry no network settings).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from envman.config.values import (
    Invalid, check_bool, check_ca_bundle, check_registry_mirror, check_url, check_wheelhouse,
)
from envman.errors import UserError

#: [network] key -> the CLI option that sets the same thing.
NETWORK_KEYS: dict[str, str] = {
    "registry_mirror": "--registry-mirror",
    "ca_bundle": "--ca-bundle",
    "pip_index": "--pip-index",
    "pip_extra_index": "--pip-extra-index",
    "framework_index": "--framework-index",
    "wheelhouse": "--wheelhouse",
    "offline": "--offline",
    "apt_mirror": "--apt-mirror",
    "python_install_mirror": "--python-mirror",
}

PATH_KEYS = ("ca_bundle", "wheelhouse")
URL_KEYS = ("pip_index", "pip_extra_index", "framework_index", "apt_mirror", "python_install_mirror")

#: Index keys whose URL may carry ``user[:password]@``: on BuildKit the credentials travel as a
#: build secret (a netrc file mounted for one RUN), never in the Dockerfile, a layer or a label.
CREDENTIAL_KEYS = ("pip_index", "pip_extra_index", "framework_index")

VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "registry_mirror": check_registry_mirror,
    "ca_bundle": check_ca_bundle,
    "pip_index": lambda v: check_url(v, what="pip index", credentials=True),
    "pip_extra_index": lambda v: check_url(v, what="pip extra index", credentials=True),
    "framework_index": lambda v: check_url(v, what="framework index", credentials=True),
    "wheelhouse": check_wheelhouse,
    "offline": check_bool,
    "apt_mirror": lambda v: check_url(v, what="apt mirror", plain_http=True),
    "python_install_mirror": lambda v: check_url(v, what="Python install mirror"),
}


def validate_network(values: Mapping[str, Any], *, where: Callable[[str], str]) -> dict[str, Any]:
    """Validate ``[network]``-shaped values; ``where(key)`` names the source in errors."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in NETWORK_KEYS:
            raise UserError(
                f"unknown network option {key!r}",
                where=where(key),
                fix="known: " + ", ".join(NETWORK_KEYS),
            )
        if value is None:
            continue
        try:
            out[key] = VALIDATORS[key](value)
        except Invalid as exc:
            raise UserError(exc.what, where=where(key), fix=exc.fix) from None
    return out


@dataclass(frozen=True)
class NetworkConfig:
    """The ``[network]`` table, checked: each key that is set (``None``: not set; relative paths
    taken relative to the config file's folder)."""

    registry_mirror: str | None = None
    ca_bundle: Path | None = None
    pip_index: str | None = None
    pip_extra_index: str | None = None
    framework_index: str | None = None
    wheelhouse: Path | None = None
    offline: bool | None = None
    apt_mirror: str | None = None
    python_install_mirror: str | None = None

    @classmethod
    def parse(cls, table: Mapping[str, Any], *, folder: Path, where: Callable[[str], str]) -> "NetworkConfig":
        """``table`` (the keys of :data:`NETWORK_KEYS`, as config.toml holds them) checked: a path
        relative to ``folder``, each value by its validator; ``where(key)`` names it in errors."""
        resolved: dict[str, Any] = {}
        for key, value in table.items():
            if key in PATH_KEYS and isinstance(value, str) and value:
                p = Path(value).expanduser()
                value = p if p.is_absolute() else folder / p
            resolved[key] = value
        return cls(**validate_network(resolved, where=where))

    def given(self) -> dict[str, Any]:
        """The keys that are set, with their checked values (what ``RenderOptions`` merges)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


__all__ = ["CREDENTIAL_KEYS", "NETWORK_KEYS", "PATH_KEYS", "URL_KEYS", "VALIDATORS", "NetworkConfig", "validate_network"]
