from pathlib import Path

import pytest

from envman.matrix.load import load_matrix

DATA = Path(__file__).resolve().parent.parent / "data"
MINI = sorted(DATA.glob("mini*.toml"))


@pytest.fixture(scope="session")
def mini():
    """A small hand-written matrix, independent of the shipped data."""
    return load_matrix(MINI, shipped=False)
