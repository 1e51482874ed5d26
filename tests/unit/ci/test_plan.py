"""``envman ci plan`` (envman/ci/plan.py): rows selected by framework and name, split into shards
that keep each base image's rows together, balanced, the same whatever the order; a bad --shard
is one error."""

import random

import pytest

from envman.ci import plan as ci
from envman.errors import UserError


def _rows(spec):
    """{"base-a": 5, ...} → PlanRows, names unique per group."""
    return [ci.PlanRow(f"{g}-row{i}", g) for g, n in spec.items() for i in range(n)]


SPEC = {"ubuntu:22.04": 7, "cuda:12.4": 5, "cuda:11.8": 4, "cuda:12.8": 3, "cuda:10.0": 3, "cuda:12.1": 2, "solo": 1}


def test_groups_stay_together_and_every_row_is_planned_once():
    rows = _rows(SPEC)
    shards = ci.plan_shards(rows, 3)
    placed = [r for s in shards for r in s.rows]
    assert sorted(placed) == sorted(r.row for r in rows)
    for group in SPEC:
        holders = {s.index for s in shards for r in s.rows if r.startswith(group + "-")}
        assert len(holders) == 1, f"{group} split over shards {holders}"
    # rows of one base image are adjacent inside a shard (one pull, shared layers)
    for s in shards:
        seen = [r.rsplit("-row", 1)[0] for r in s.rows]
        assert seen == sorted(seen, key=seen.index)


def test_shards_are_balanced():
    rows = _rows(SPEC)
    for n in (2, 3, 4):
        weights = [s.weight for s in ci.plan_shards(rows, n)]
        # greedy over whole groups: the spread never exceeds the largest group
        assert max(weights) - min(weights) <= max(SPEC.values()), (n, weights)
    assert [s.weight for s in ci.plan_shards(rows, 2)] == [13, 12]


def test_plan_is_deterministic_and_independent_of_input_order():
    rows = _rows(SPEC)
    first = ci.plan_shards(rows, 3)
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    again = ci.plan_shards(shuffled, 3)
    assert [(s.rows, s.groups) for s in first] == [(s.rows, s.groups) for s in again]


def test_more_shards_than_groups_leaves_empty_shards_out_of_the_github_matrix():
    shards = ci.plan_shards(_rows({"a": 2, "b": 1}), 4)
    assert [len(s.rows) for s in shards] == [2, 1, 0, 0]
    gh = ci.github_matrix(shards)
    assert gh == {"include": [{"shard": "1/4", "rows": "a-row0 a-row1", "count": 2},
                              {"shard": "2/4", "rows": "b-row0", "count": 1}]}


def test_plan_rows_group_by_base_image_and_weigh_rebuilt_bases_as_builds(mini):
    rows = {r.row: r for r in ci.plan_rows(mini, mini.builds)}
    assert rows["torch-1.0.0-cuda10.0"].group == rows["torch-1.0.1-cuda10.0"].group == "nvidia/cuda:10.0-base-ubuntu18.04"
    assert rows["torch-1.0.0-cuda10.0"].weight == 1.0  # the deleted base is rebuilt from NVIDIA's recipe: a real build
    assert rows["torch-2.4.1-cpu"] == ci.PlanRow("torch-2.4.1-cpu", "ubuntu:22.04", 1.0)


@pytest.mark.parametrize("bad", ["0/3", "4/3", "x", "1/0", "2"])
def test_bad_shard_is_a_user_error(bad):
    with pytest.raises(UserError):
        ci.parse_shard(bad)


def test_split_names_accepts_spaces_commas_and_repeats():
    assert ci.split_names(["a b", "c,d", "a"]) == ["a", "b", "c", "d"]


def test_select_builds_by_row_or_stack_name(mini):
    picked = ci.select_builds(mini, rows=["torch-2.4.1-cpu", "torch-1.0-cuda10"])
    assert [b.name for b in picked] == ["torch-1.0.1-cuda10.0", "torch-2.4.1-cpu"]  # matrix order
    with pytest.raises(UserError):
        ci.select_builds(mini, rows=["torch-9.9-cpu"])
    with pytest.raises(UserError):
        ci.select_builds(mini, framework="caffe")


@pytest.mark.parametrize("text, expected", [("1/1", (1, 1)), ("4/4", (4, 4)), ("9999/9999", (9999, 9999))])
def test_a_shard_at_its_bounds_is_taken(text, expected):
    assert ci.parse_shard(text) == expected


@pytest.mark.parametrize("bad", ["10000/10000", " 1/2", "1/2 ", "-1/2", "1//2", "1/2/3", "\uff11/2"])
def test_a_shard_past_its_bounds_or_spelt_otherwise_is_refused_in_one_line(bad):
    with pytest.raises(UserError) as e:
        ci.parse_shard(bad.encode().decode("unicode_escape"))
    assert e.value.where == "--shard" and "\n" not in e.value.what


def test_no_shard_at_all_is_refused_and_one_shard_takes_every_row():
    with pytest.raises(UserError):
        ci.plan_shards([], 0)
    rows = [ci.PlanRow("a", "g1"), ci.PlanRow("b", "g2", 0.25)]
    (only,) = ci.plan_shards(rows, 1)
    assert only.rows == ["a", "b"] and only.weight == 1.25 and only.label == "1/1"


def test_split_names_of_nothing_is_nothing():
    assert ci.split_names(None) == [] and ci.split_names(["", " , "]) == []
