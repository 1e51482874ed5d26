"""The words after a command's first ``--`` (envman/cli/_words.py): kept for the command to run,
never parsed as options."""

from __future__ import annotations

import types

import pytest

from envman.cli._words import keep_command_words


@pytest.mark.parametrize("args, before, after", [
    (["-e", "A=1", "--", "python", "-c", "x"], ["-e", "A=1"], ["python", "-c", "x"]),
    (["--", "--", "x"], [], ["--", "x"]),  # only the first -- splits
    (["a", "--"], ["a"], []),  # a -- at the end: an empty command
    (["a", "b"], ["a", "b"], []),  # none: nothing kept
    ([], [], []),
])
def test_the_first_double_dash_splits_options_from_the_command(args, before, after):
    ctx = types.SimpleNamespace(meta={})
    assert keep_command_words(ctx, list(args), "k") == before
    assert ctx.meta["k"] == after
