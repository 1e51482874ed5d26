"""The network options of a render (mirrors, CA bundle, indexes, wheelhouse, offline), validated
on construction by the validators of :mod:`envman.config`.

Its own module because both the Dockerfile plan (:mod:`envman.render.plan`) and the render's
entry point (:mod:`envman.render.dockerfile`) take it: the plan may not import the entry point.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from envman.config import (
    CREDENTIAL_KEYS, NETWORK_KEYS, NetworkConfig, load_network_config, redact, split_credentials, validate_network,
)
from envman.errors import UserError
from envman.config import MAX_CA_BYTES


@dataclass(frozen=True)
class RenderOptions(NetworkConfig):
    """The network options of a render: the keys of :class:`envman.config.NetworkConfig` (the
    ``[network]`` table, one field per CLI option), merged from the CLI and the user config and
    checked whole on construction (``offline`` is then a plain flag, and needs a wheelhouse).

    Build one from CLI values and the user config with ``RenderOptions.from_config``.
    """

    offline: bool = False

    def __post_init__(self) -> None:
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, False)}
        checked = validate_network(given, where=lambda k: NETWORK_KEYS[k])
        for k, v in checked.items():
            object.__setattr__(self, k, v)
        if self.offline and self.wheelhouse is None:
            raise UserError(
                "--offline needs a wheelhouse: with no index, every package must come from one",
                where="--offline",
                fix="pip download the stack's packages (and their dependencies) into a directory and pass --wheelhouse DIR",
            )

    @classmethod
    def from_config(
        cls,
        cli_overrides: Mapping[str, Any] | None = None,
        *,
        config_file: Path | None = None,
        project: Mapping[str, Any] | None = None,
    ) -> "RenderOptions":
        """CLI values > ``project`` values (none of today's callers pass any) > the user config file.

        ``cli_overrides`` uses the ``[network]`` key names (``pip_index``, ``ca_bundle``...);
        ``None`` means "not given".
        """
        merged: dict[str, Any] = load_network_config(config_file).given()
        if project:
            merged.update(validate_network(dict(project), where=lambda k: f"project file: [network].{k}"))
        cli = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
        merged.update(validate_network(cli, where=lambda k: NETWORK_KEYS.get(k, k)))
        return cls(**merged)

    def describe(self) -> dict[str, Any]:
        """The options that are set, as plain values (for messages and JSON)."""
        return {f.name: (str(v) if isinstance(v, Path) else redact(v) if isinstance(v, str) else v)
                for f in fields(self) if (v := getattr(self, f.name)) not in (None, False)}

    def ca_bytes(self) -> bytes | None:
        """The CA bundle's bytes for a build context (``None`` without one), read as it was
        checked: a regular file of at most the bundle size limit."""
        if self.ca_bundle is None:
            return None
        from envman.safefile import read_file

        return read_file(self.ca_bundle, what="CA bundle", limit=MAX_CA_BYTES)

    def credentials(self) -> dict[str, str]:
        """The index options that carry ``user[:password]@`` (key -> the CLI option)."""
        return {k: NETWORK_KEYS[k] for k in CREDENTIAL_KEYS
                if isinstance(getattr(self, k), str) and split_credentials(getattr(self, k))[1] is not None}


__all__ = ["RenderOptions"]
