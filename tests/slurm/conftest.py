"""The real one-node Slurm cluster (``tests/support/slurmcluster.py``) for tests marked ``slurm``.

Session-scoped: started once (about half a second), stopped and wiped at the end. Where Slurm
or munge is missing, or the tests do not run as root, tests marked ``slurm`` FAIL in CI and
skip elsewhere, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import in_ci
from tests.support import slurmcluster


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__) + os.sep
    for item in items:
        if str(item.path).startswith(here):
            for mark in ("slurm", "docker"):
                if item.get_closest_marker(mark) is None:
                    item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[slurmcluster.Cluster]:
    why = slurmcluster.missing()
    if why:
        if in_ci():
            pytest.fail(f"CI needs a Slurm test cluster: {why}", pytrace=False)
        pytest.skip(why)
    try:
        cluster = slurmcluster.start()
    except slurmcluster.ClusterError as exc:
        pytest.fail(f"the Slurm test cluster did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
