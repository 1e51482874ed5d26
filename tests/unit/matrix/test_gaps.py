"""What the matrix cannot fill, said and never guessed (envman/matrix/gaps.py): CUDA releases the
index has and the matrix lacks, an update without its toolkit driver, the newest patch without
images, and a GPU list that is stale by age or by a compute capability above every GPU of it."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest
from packaging.version import Version

from envman.matrix.load import load_matrix
from envman.matrix.model import Arch
from envman.matrix.gaps import GPU_LIST_MAX_AGE, cuda_report, gpu_list_age

V = Version


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


def test_a_cuda_release_the_matrix_lacks_is_new_and_says_what_is_unknown(shipped):
    new, unfilled = cuda_report(shipped, {V("99.1.0"): "2030-01-01"})
    assert new == ["99.1.0"]
    assert unfilled == ["CUDA 99.1.0 (released 2030-01-01): no [[release]] 99.1 in cuda.toml: its toolkit driver "
                        "(NVIDIA's release notes, Table 3), nvcc's compute capabilities and images are not known"]


def test_an_update_without_its_driver_is_reported_never_guessed(shipped):
    new, unfilled = cuda_report(shipped, {V("13.2.0"): None, V("13.2.1"): None, V("13.2.2"): "2026-07-16"})
    assert new == []
    assert ("CUDA 13.2.2 (released 2026-07-16): no toolkit driver recorded for this update (updates of cuda.toml 13.2); "
            "stacks on its images use 595.58.03, a lower bound") in unfilled
    assert not any("13.2.1" in u and "driver" in u for u in unfilled)  # 13.2 Update 1's driver is recorded
    assert not any(u.startswith("CUDA 13.2.0") for u in unfilled)  # the GA carries toolkit_driver


def test_images_are_asked_of_the_newest_patch_only(shipped):
    _, unfilled = cuda_report(shipped, {V("13.3.0"): None, V("13.3.1"): None})
    assert unfilled == []  # 13.3.1 has image rows; 13.3.0's are not expected
    _, unfilled = cuda_report(shipped, {V("13.3.0"): None, V("13.3.1"): None, V("13.3.2"): None})
    assert any(u.startswith("CUDA 13.3.2") and "no nvidia/cuda image row" in u for u in unfilled)


def test_a_ga_versioned_with_a_third_digit_needs_no_update_driver(shipped):
    _, unfilled = cuda_report(shipped, {V("13.4.1"): None, V("13.4.2"): None})
    assert not any(u.startswith("CUDA 13.4.1") and "driver" in u for u in unfilled)  # 13.4's GA is 13.4.1
    assert any(u.startswith("CUDA 13.4.2") and "driver" in u for u in unfilled)


def test_gpu_list_age_and_staleness(shipped):
    day = dt.date.fromisoformat(shipped.gpus_checked)
    assert gpu_list_age(shipped, day) == (0, [])
    age, why = gpu_list_age(shipped, day + dt.timedelta(days=GPU_LIST_MAX_AGE + 1))
    assert age == GPU_LIST_MAX_AGE + 1 and "days ago" in why[0]
    assert gpu_list_age(replace(shipped, gpus_checked=None), day)[1][0].startswith("the GPU list records no date")


def test_a_cuda_release_targeting_a_capability_above_every_gpu_makes_the_list_stale(shipped):
    newest = max(shipped.cuda, key=lambda r: r.version)
    grown = replace(newest, version=V("99.0"), sm=newest.sm + (Arch(15, 0),))
    m = replace(shipped, cuda=shipped.cuda + (grown,))
    why = gpu_list_age(m, dt.date.fromisoformat(shipped.gpus_checked))[1]
    assert why == ["CUDA 99.0 targets compute capability 15.0, above every GPU of the list (the newest: 12.1)"]


def test_the_gpu_list_is_stale_one_day_past_its_limit_and_not_at_it(shipped):
    day = dt.date.fromisoformat(shipped.gpus_checked)
    assert gpu_list_age(shipped, day + dt.timedelta(days=GPU_LIST_MAX_AGE)) == (GPU_LIST_MAX_AGE, [])
    assert gpu_list_age(shipped, day + dt.timedelta(days=GPU_LIST_MAX_AGE + 1))[1]


def test_no_version_on_the_index_leaves_nothing_to_report(shipped):
    assert cuda_report(shipped, {}) == ([], [])
