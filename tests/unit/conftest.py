from pathlib import Path

import pytest

from envman.matrix.load import load_matrix

DATA = Path(__file__).resolve().parent.parent / "data"
MINI = sorted(DATA.glob("mini*.toml"))


@pytest.fixture(scope="session")
def mini():
    """A small hand-written matrix, independent of the shipped data."""
    return load_matrix(MINI, shipped=False)


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's caches (run plans, rendered Dockerfiles) in a folder of its own, never the user's."""
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
