"""A framework's wheels read for the matrix (envman/matrix/wheels.py): which Requires-Dist lines are
exact CUDA-library pins (with their markers, for the extras and Pythons asked), which apply to a
stack's Python, and a row's extras; a range, a wildcard or a contradiction is no exact version."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from envman.matrix.wheels import cuda_libraries, cuda_library_lines, exact_version, requirement_extras


@pytest.mark.parametrize("spec,want", [
    ("==12.4.5.8", "12.4.5.8"),
    ("===1.0", "1.0"),
    (">=0.4.30,<=0.4.30", "0.4.30"),  # how JAX pins its plugin
    (">=0.4.30,<=0.4.31", None),      # a range, one past the pin
    (">=12.1", None),
    ("<=12.1", None),
    ("==12.*", None),                 # a wildcard is not one version
    ("~=12.4", None),
    ("==12.4,!=12.5", None),
    ("==1.0,==2.0", None),            # no version satisfies both
    ("", None),
])
def test_exact_version_is_one_version_or_none(spec, want):
    got = exact_version(SpecifierSet(spec))
    assert (str(got) if got is not None else None) == want


def test_only_exact_pins_of_cuda_libraries_are_selected_with_their_markers():
    lines = [
        'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cuda-runtime>=13.0',                                   # not exact
        'numpy==1.26.4',                                               # not a CUDA library
        'Triton (==3.1.0) ; platform_system == "Linux" and python_version < "3.13"',
        'nvidia-nccl-cu12==2.21.5; platform_machine == "aarch64"',      # not on x86_64
        'jax-cuda12-plugin[with_cuda]<=0.4.30,>=0.4.30; extra == "cuda12"',
        'jax-cuda13-plugin==0.4.30; extra == "cuda13"',                 # an extra not asked for
        'cuda-toolkit[cudart,cufft]==13.0.2',
        'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',  # twice
        'not a requirement ((',
    ]
    got = cuda_library_lines(lines, ["cuda12"], ["3.10", "3.13"])
    assert got == (
        'nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"',
        'triton==3.1.0; platform_system == "Linux" and python_version < "3.13"',
        'jax-cuda12-plugin==0.4.30; extra == "cuda12"',
        'cuda-toolkit==13.0.2',
    )


def test_a_stack_gets_the_pins_that_apply_to_its_python_sorted():
    lines = ('triton==3.1.0; python_version < "3.13"', "nvidia-nccl-cu12==2.21.5", 'jax-cuda12-plugin==0.4.30; extra == "cuda12"',
             "nvidia-cublas-cu12==12.4.5.8")
    assert cuda_libraries(lines, [], "3.12") == ("nvidia-cublas-cu12==12.4.5.8", "nvidia-nccl-cu12==2.21.5", "triton==3.1.0")
    assert cuda_libraries(lines, [], "3.13") == ("nvidia-cublas-cu12==12.4.5.8", "nvidia-nccl-cu12==2.21.5")  # exactly at the bound
    assert cuda_libraries(lines, ["cuda12"], "3.13")[0] == "jax-cuda12-plugin==0.4.30"
    assert cuda_libraries(lines, [], "3.12", machine="aarch64") == cuda_libraries(lines, [], "3.12")  # no machine marker


def test_row_extras_come_from_its_packages():
    assert requirement_extras(["jax[cuda12]==0.4.30", "x[b,a]==1"]) == ("a", "b", "cuda12")
    assert requirement_extras(["torch==2.4.1", "((("]) == ()
