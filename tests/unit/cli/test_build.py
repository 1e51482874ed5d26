"""Tests of ``envman/cli/build.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

import pytest


def test_images_lists_own_tags_and_project_names():
    from envman.images.prune import ImageRow
    from envman.cli.build import own_tags

    r = own_tags(ImageRow("torch-2.4.1-cuda12.4-py3.10", ("envman/torch-2.4.1-cuda12.4-py3.10:latest", "me/x:latest"),
                          "sha256:1", 1, 0, True, "pass"))
    assert r.tags == ("envman/torch-2.4.1-cuda12.4-py3.10:latest",) and r.stable
    foreign = own_tags(ImageRow("s", ("envman/s:abc", "someone/s:latest"), "sha256:2", 1, 0, True, "pass"))
    assert foreign.tags == ("envman/s:abc",) and not foreign.stable  # a foreign :latest is not the stable tag
    proj = own_tags(ImageRow("s", ("envman/project-alpha:0123",), "sha256:3", 1, 0, False, "untested", project="alpha"))
    assert proj.project == "alpha" and proj.tags == ("envman/project-alpha:0123",)


def test_prune_reports_what_the_engine_freed_and_names_the_build_cache(tmp_path, monkeypatch, capsys):
    """prune added up image sizes (shared layers counted once per image); it now reports the
    engine's image storage before minus after, and says who reclaims the build cache."""
    from envman.cli import build as CB
    import envman.project.image as PI
    from tests.unit.images.test_build import image_store

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    store = image_store()
    for i in range(3):  # three images of 1000 bytes each in the fake's listing...
        store.add(f"envman/torch-0.0.{i}-cpu-py3.11:old{i}", f"sha256:{i}" * 2, **{"envman.name": f"torch-0.0.{i}-cpu-py3.11"})
    sizes = iter([(10_000_000, 3_200_000_000), (8_500_000, 3_200_000_000)])  # ...that free 1.5 MB together
    monkeypatch.setattr(store, "storage", lambda: next(sizes), raising=False)

    from tests.support.fake_engine import patch_connect

    patch_connect(monkeypatch, store)
    monkeypatch.setattr(PI, "project_images_in_use", lambda engine, resolve: (set(), set()))
    CB.prune(dry_run=False, all_users=False, as_json=False)
    out = capsys.readouterr().out
    assert "3 images removed, 2 MB freed (the engine's image storage before and after)" in " ".join(out.split())
    assert "build cache holds 3200 MB" in out and "docker builder prune" in " ".join(out.split())


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_a_build_result_is_one_line_that_never_ends_in_its_dash(width):
    """rich wrapped the success line at a space: at 100 columns the first line ended in '— '."""
    import io

    from rich.console import Console

    from envman.cli.build import print_rows

    name = "torch-2.4.1-cuda12.4-py3.10"
    rows = [{"name": name, "image": f"envman/{name}:0123456789abcdef", "cached": c, "smoke": smoke, "reason": reason,
             "promoted": smoke == "pass", "stable": f"envman/{name}:latest" if smoke == "pass" else None}
            for c in (True, False) for smoke, reason in (("pass", ""), ("cpu-only", "no GPU visible to the engine"))]
    out = io.StringIO()
    print_rows(rows, Console(file=out, width=width), Console(file=io.StringIO(), width=width))
    lines = out.getvalue().splitlines()
    assert len(lines) == len(rows)
    assert not any(line.rstrip().endswith("—") for line in lines)
    assert lines[0].endswith(f"— promoted to envman/{name}:latest")


# --- the full path of `envman build` without loading the matrix ------------------------------


@pytest.fixture
def fresh_source(tmp_path, monkeypatch):
    """A private state folder and an invocation's matrix source that has loaded nothing."""
    import envman.cli as cli
    import envman.matrix.load as L

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)

    def reset():
        cli.STATE.matrix = None
        L._CACHE.clear()

    reset()
    yield reset
    reset()


def test_named_stacks_resolve_through_the_stack_cache_and_a_published_base_needs_no_matrix(fresh_source, monkeypatch):
    import envman.matrix.load as L
    from envman.cli import get_matrix, matrix_source
    from envman.images.stacks import StackPlan, plan_stacks, select_stacks
    from envman.render.options import RenderOptions

    first = select_stacks(matrix_source(), ["torch-2.4-cuda12.4"], False)
    fresh_source()  # the next invocation
    monkeypatch.setattr(L, "load_matrix", lambda *a, **k: pytest.fail("the matrix was loaded"))
    again = select_stacks(matrix_source(), ["torch-2.4-cuda12.4"], False)
    assert again == first and again[0].base_image_status == "published"
    assert plan_stacks(again, get_matrix, "auto", RenderOptions()) == [StackPlan(again[0], None, None)]


def test_a_deleted_base_still_loads_the_matrix_for_its_recipe(fresh_source):
    from envman.cli import get_matrix, matrix_source
    from envman.images.stacks import plan_stacks, select_stacks
    from envman.render.options import RenderOptions

    stacks = select_stacks(matrix_source(), ["torch-1.0-cuda10"], False)
    assert stacks[0].base_image_status == "deleted"
    [plan] = plan_stacks(stacks, get_matrix, "auto", RenderOptions())
    assert plan.base is not None and "rebuilding it from NVIDIA's recipe" in (plan.note or "")
