"""Fixtures shared by the integration tests that build real stacks on stand-in bases.

``wheelhouse`` downloads the CPU wheel of torch 2.13.0 for Python 3.11 once per session (the
one real framework a build can install here); ``ca_bundle`` is this host's CA bundle, passed to
``--ca-bundle`` so pip inside the build trusts what the host trusts.

Every test here gives back the networks envman made during it (``envman run`` makes one per user,
project and root, :mod:`envman.run.network`): a fresh engine has about thirty address pools, and a
suite that kept them all would leave the last tests none.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from envman import labels as L

ROOT = Path(__file__).resolve().parents[2]
STANDIN_MATRIX = ROOT / "tests" / "data" / "standin-torch.toml"


def host_ca_bundle() -> str:
    paths = ssl.get_default_verify_paths()
    for p in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile):
        if p and Path(p).is_file():
            return p
    pytest.skip("no CA bundle on this host")


@pytest.fixture(scope="session")
def ca_bundle() -> str:
    return host_ca_bundle()


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(d), "-q"],
        check=True,
    )
    assert list(d.glob("torch-2.13.0*.whl"))
    return d


# --------------------------------------------------------------------------- a real registry

REGISTRY_PORT = int(os.environ.get("ENVMAN_TEST_REGISTRY_PORT", "5000"))


@pytest.fixture(scope="session")
def registry_server():
    """Debian's docker-registry on 127.0.0.1:5000 for the session (stopped, its storage removed,
    at the end). Missing or not starting: a failure in CI, a skip elsewhere."""
    from tests.conftest import in_ci
    from tests.support.registry import RegistryUnavailable, start_registry

    try:
        reg = start_registry(REGISTRY_PORT)
    except RegistryUnavailable as exc:
        if in_ci():
            pytest.fail(f"CI needs a registry: {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield reg
    finally:
        reg.stop()


def _envman_networks() -> set[str] | None:
    """The ids of the networks on the Docker engine that envman made (``None``: no engine answers)."""
    try:
        p = subprocess.run(["docker", "network", "ls", "-q", "--no-trunc", "--filter", f"label={L.MANAGED}={L.TRUE}",
                            "--filter", f"label={L.ROLE}={L.ROLE_NETWORK}"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(p.stdout.split()) if p.returncode == 0 else None


@pytest.fixture(autouse=True)
def _give_back_networks() -> object:
    """Remove the envman networks a test made once it ends (its containers are gone by then)."""
    before = _envman_networks()
    yield
    after = _envman_networks()
    if before is None or after is None:
        return
    for net in sorted(after - before):
        subprocess.run(["docker", "network", "rm", net], capture_output=True, text=True, timeout=30)
