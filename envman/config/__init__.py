"""The user's config file (``config.toml``) and the network options every render and build accepts.

One module per table group, each table parsed into one frozen, typed value in one place:

* :mod:`envman.config.file`: the one reader (:func:`read_config`, one parse per content), the
  check of each table's shape (:meth:`ConfigFile.table`) and the loader of each table here;
* :mod:`envman.config.network`: ``[network]`` (:class:`NetworkConfig`) and the network options'
  validators by key, shared with the CLI's options;
* :mod:`envman.config.build`: ``[build]`` (:class:`BuildConfig`: builder, base mode, build network);
* :mod:`envman.config.matrix`: ``[matrix]`` (:class:`MatrixConfig`), and
  :mod:`envman.config.matrix_files` the matrix files of an invocation;
* :mod:`envman.config.values`: the validators of URLs, a registry mirror, a CA bundle, a
  wheelhouse (what and the fix, as :class:`Invalid`; the caller names where).

Every value is validated where it enters (a malformed file fails whole with one line naming the
file and the key, exit 2). What this package offers is importable from ``envman.config``.
"""

from __future__ import annotations

from envman.config.build import BASE_MODES, BUILD_KEYS, BUILD_NETWORKS, BUILDERS, BaseMode, BuildConfig, base_mode, one_of
from envman.config.file import (
    CONFIG_NAME, TABLES, ConfigFile, config_path, load_base_config, load_build_config, load_build_network,
    load_builder_config, load_config, load_matrix_config, load_network_config, read_config,
)
from envman.config.matrix import MATRIX_KEYS, MatrixConfig
from envman.config.matrix_files import MATRIX_ENV, matrix_files, user_matrix_paths
from envman.config.network import CREDENTIAL_KEYS, NETWORK_KEYS, PATH_KEYS, URL_KEYS, VALIDATORS, NetworkConfig, validate_network
from envman.config.values import (
    CA_MARKER, MAX_CA_BYTES, NO_CREDENTIALS, Invalid, check_bool, check_ca_bundle, check_registry_mirror, check_url,
    check_wheelhouse, citable_url, ip_literal, is_loopback_host, looks_like_token, redact, secret_in_url, shown_url, split_credentials,
    token_in_path,
)

__all__ = [
    "BASE_MODES", "BUILDERS", "BUILD_KEYS", "BUILD_NETWORKS", "BaseMode", "BuildConfig", "base_mode", "one_of",
    "CONFIG_NAME", "TABLES", "ConfigFile", "config_path", "load_base_config", "load_build_config", "load_build_network",
    "load_builder_config", "load_config", "load_matrix_config", "load_network_config", "read_config",
    "MATRIX_KEYS", "MatrixConfig", "MATRIX_ENV", "matrix_files", "user_matrix_paths",
    "CREDENTIAL_KEYS", "NETWORK_KEYS", "PATH_KEYS", "URL_KEYS", "VALIDATORS", "NetworkConfig", "validate_network",
    "CA_MARKER", "MAX_CA_BYTES", "NO_CREDENTIALS", "Invalid", "check_bool", "check_ca_bundle", "check_registry_mirror",
    "check_url", "check_wheelhouse", "citable_url", "ip_literal", "is_loopback_host", "looks_like_token", "redact", "secret_in_url", "shown_url",
    "split_credentials", "token_in_path",
]
