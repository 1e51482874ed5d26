"""Shared fixtures: the Docker engine, per-session labels and cleanup, stand-in base images.

* ``docker_engine`` (session): an :class:`envman.engine.docker.Engine` that answered a ping. When none
  answers, tests that need it FAIL in CI (``CI`` set to a true value) and SKIP elsewhere, with
  the reason. Every test marked ``docker`` (all of ``tests/docker/`` is, by
  folder) gets it requested automatically.
* ``test_session_id`` / ``test_labels``: ``{"envman.test": <session id>}``; put these labels on
  every container and image a test creates. At the end of the session, containers and images
  carrying them are removed. Cached fixtures (``envman.test-fixture=true``: the rootfs and the
  stand-ins) never carry ``envman.test`` and are kept for the next session.
* ``unique_tag``: ``unique_tag("name")`` → ``envman-test/name:<session>-<n>``, unique per call.
* ``standin``: ``standin(ref, suite=..., cuda_version=..., flavour=...)`` builds (or reuses) a
  stand-in tagged ``ref`` (see ``tests/support/standin.py``); ``standin.rootfs(suite)`` gives the
  bare root filesystem image; ``standin.default`` is the default CUDA stand-in's reference.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

# The Ryuk reaper image cannot be pulled here; the session finalizer below reaps by label
# instead. Set before any test module imports testcontainers (it reads this lazily, but early
# is safest).
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

if TYPE_CHECKING:
    from envman.engine.docker import Engine

SESSION_ID = uuid.uuid4().hex[:12]
TEST_LABEL = "envman.test"
DEFAULT_STANDIN = "nvidia/cuda:12.8.1-base-ubuntu24.04"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docker_dir = os.path.join(str(config.rootpath), "tests", "docker") + os.sep
    for item in items:
        if str(item.path).startswith(docker_dir) and item.get_closest_marker("docker") is None:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(autouse=True)
def _requirements_from_markers(request: pytest.FixtureRequest) -> None:
    """``docker`` tests need a daemon (fail in CI, skip elsewhere); ``gpu`` tests need a driver."""
    if request.node.get_closest_marker("docker") is not None:
        request.getfixturevalue("docker_engine")
    if request.node.get_closest_marker("pypi") is not None:
        reason = _pypi_missing_reason()
        if reason:
            if in_ci():
                pytest.fail(f"CI needs PyPI for this test: {reason}")
            pytest.skip(reason)
    if request.node.get_closest_marker("gpu") is not None:
        reason = _gpu_missing_reason()
        if reason:
            pytest.skip(reason)


_PYPI_REASON: list[str | None] = []


def _pypi_missing_reason() -> str | None:
    """Why PyPI's simple API cannot be read from here (None: it can); asked once per session."""
    if not _PYPI_REASON:
        import urllib.request

        try:
            with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15) as resp:
                resp.read(1)
            _PYPI_REASON.append(None)
        except Exception as exc:  # any failure means: not reachable
            _PYPI_REASON.append(f"PyPI is not reachable from here ({type(exc).__name__}: {exc})")
    return _PYPI_REASON[0]


def _gpu_missing_reason() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if proc.returncode != 0 or "GPU" not in proc.stdout:
        return f"nvidia-smi lists no GPU: {(proc.stderr or proc.stdout).strip()[:200]}"
    return None


@pytest.fixture(scope="session")
def test_session_id() -> str:
    return SESSION_ID


@pytest.fixture(scope="session")
def test_labels() -> dict[str, str]:
    """Labels for everything a test creates; the session cleanup removes what carries them."""
    return {TEST_LABEL: SESSION_ID}


@pytest.fixture
def unique_tag() -> Callable[[str], str]:
    counter = itertools.count(1)
    node = uuid.uuid4().hex[:6]

    def make(name: str = "img") -> str:
        return f"envman-test/{name}:{SESSION_ID}-{node}-{next(counter)}"

    return make


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    from envman.engine.docker import Engine
    from envman.errors import EngineError

    try:
        engine = Engine.connect(timeout=30)
    except EngineError as err:
        cause = f" ({type(err.__cause__).__name__}: {' '.join(str(err.__cause__).split())[:200]})" if err.__cause__ else ""
        reason = f"{err}{cause}"
        if in_ci():
            pytest.fail(f"CI needs a Docker engine: {reason}", pytrace=False)
        pytest.skip(reason)
    try:
        yield engine
    finally:
        _cleanup(engine)
        engine.close()


def _cleanup(engine: Engine) -> None:
    """Remove this session's containers, then its images (tests may have missed a finally)."""
    label = {TEST_LABEL: SESSION_ID}
    for container in engine.list_containers(label):
        engine.remove_container(container.id, force=True)
    for image in engine.list_images(label):
        if image.labels.get("envman.test-fixture") == "true" and image.labels.get("envman.standin-for") in image.tags:
            continue  # a cached stand-in: never a session's to remove
        for ref in image.tags or (image.id,):
            engine.remove_image(ref, force=True)


class Standins:
    """Access to ``tests/support/standin.py`` bound to the session's engine."""

    default = DEFAULT_STANDIN

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __call__(self, ref: str = DEFAULT_STANDIN, *, suite: str = "bookworm",
                 cuda_version: str | None = None, flavour: str | None = None) -> str:
        from tests.support.standin import ensure_standin

        return ensure_standin(ref, suite=suite, cuda_version=cuda_version, flavour=flavour, engine=self._engine)

    def rootfs(self, suite: str = "bookworm") -> str:
        from tests.support.standin import ensure_rootfs_image

        return ensure_rootfs_image(suite, engine=self._engine)


@pytest.fixture(scope="session")
def standin(docker_engine: Engine) -> Standins:
    return Standins(docker_engine)
