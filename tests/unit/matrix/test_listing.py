"""``envman matrix ls``'s selection (envman/matrix/listing.py): rows by framework alias, CUDA
version or prefix (``cpu`` for CPU builds) and platform; a value that names nothing is one clear
error, not an empty list."""

from __future__ import annotations

import json

import pytest

from envman.errors import UserError
from envman.matrix.listing import row_json, select_rows
from envman.matrix.load import load_matrix


@pytest.fixture(scope="module")
def rows():
    return load_matrix().builds


def test_no_filter_is_every_row(rows):
    assert select_rows(rows, None, None, None) == list(rows)


def test_a_framework_alias_selects_that_frameworks_rows(rows):
    torch = select_rows(rows, "PyTorch", None, None)
    assert torch and all(b.framework == "torch" for b in torch)
    assert select_rows(rows, "torch", None, None) == torch


def test_cpu_selects_the_cpu_builds_and_a_prefix_the_releases_under_it(rows):
    cpu = select_rows(rows, None, "CPU", None)
    assert cpu and all(b.cuda is None for b in cpu)
    twelve = select_rows(rows, None, "12", None)
    assert twelve and all(b.cuda is not None and b.cuda.major == 12 for b in twelve)
    exact = select_rows(rows, None, "12.4", None)
    assert set(b.name for b in exact) <= set(b.name for b in twelve)
    assert all((b.cuda.major, b.cuda.minor) == (12, 4) for b in exact)


def test_a_platform_selects_the_rows_that_build_for_it(rows):
    arm = select_rows(rows, None, None, "arm64")
    assert all("linux/arm64" in b.platforms for b in arm)
    assert select_rows(rows, None, None, "linux/arm64") == arm


@pytest.mark.parametrize("framework, cuda, where", [
    ("caffe", None, "--framework"),
    (None, "12.x", "--cuda"),
    (None, "1234", "--cuda"),  # four digits: one past the longest field
    (None, "12.4.1.2", "--cuda"),
    (None, "12; rm", "--cuda"),
])
def test_a_filter_that_names_nothing_is_one_error_naming_the_option(rows, framework, cuda, where):
    with pytest.raises(UserError) as e:
        select_rows(rows, framework, cuda, None)
    assert e.value.where == where and e.value.fix and "\n" not in e.value.what


def test_a_rows_json_is_plain_values(rows):
    gpu = next(b for b in rows if b.cuda is not None)
    doc = row_json(gpu)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["name"] == gpu.name and doc["cuda"] == f"{gpu.cuda.major}.{gpu.cuda.minor}"
    cpu = next(b for b in rows if b.cuda is None)
    assert row_json(cpu)["cuda"] is None
