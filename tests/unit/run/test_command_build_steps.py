"""Tests of ``envman/run/command.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations


def test_a_project_build_shows_its_steps_but_not_one_line_per_label(capsys):
    """The classic builder turns each label into a LABEL step: a project build printed 22 steps,
    16 of them labels. Steps are shown; label steps are not."""
    from envman.engine.api import BuildEvent
    from envman.run.command import print_step

    steps = ["Step 1/22 : FROM sha256:abc", "Step 2/22 : USER root", "Step 3/22 : RUN pip install -r x",
             *[f"Step {i}/22 : LABEL envman.k{i}=v" for i in range(4, 20)], "Step 20/22 : label x=y",
             "Step 5/7 : RUN echo LABEL", "Step 2/5 : LABEL a=b c=d"]
    for s in steps:
        print_step(BuildEvent("step", s, step=s.split()[1]))
    shown = capsys.readouterr().err.splitlines()
    assert shown == [f"  {s}" for s in steps if " : LABEL " not in s.upper()]
    assert len(shown) == 4
