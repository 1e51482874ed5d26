"""`envman submit` and `node-check`'s whole-number options (envman/cli/slurm.py): ASCII digits only,
taken at their bounds and refused one past them, naming the option."""

from __future__ import annotations

import pytest

from envman.cli.slurm import count_option
from envman.errors import UserError


@pytest.mark.parametrize("value, minimum, expected", [(None, 1, None), ("1", 1, 1), ("0", 0, 0), ("100000", 1, 100000)])
def test_a_count_at_its_bounds_is_taken(value, minimum, expected):
    assert count_option(value, "--cpus", minimum) == expected


@pytest.mark.parametrize("value, minimum", [
    ("0", 1),  # one under the minimum
    ("100001", 1),  # one past the largest count
    ("-1", 0), ("1.5", 1), ("", 1), (" 4", 1), ("4 ", 1), ("\u0664", 1),  # an Arabic-Indic four: a digit, not ASCII
])
def test_a_count_that_is_not_one_is_refused_naming_its_option(value, minimum):
    with pytest.raises(UserError) as e:
        count_option(value, "--cpus", minimum)
    assert e.value.where == "--cpus" and "\n" not in e.value.what
