"""A stack's stable tag names its content: a row of a user's own matrix never takes the tag of a
shipped stack or of another user's row of the same name (envman.stack.resolve.tag_key;
docs/security.md, "Sharing an engine")."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from envman.matrix.load import load_matrix
from envman.paths import matrices_dir
from envman.stack.resolve import resolve
from envman.state import stable_ref

QUERY = "torch-2.15.0-cpu-py3.12"


def _shipped_row() -> dict:
    doc = tomllib.loads((matrices_dir() / "torch.toml").read_text())
    return next(b for b in doc["build"] if b["version"] == "2.15.0" and b["variant"] == "cpu")


def _toml(value) -> str:
    if isinstance(value, dict):  # an inline table
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # strings and booleans are written alike in JSON and TOML


def _user_file(folder: Path, **changes) -> Path:
    """A user's matrix file holding the shipped 2.15.0 CPU row, with ``changes``."""
    row = {**_shipped_row(), **changes}
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "mine.toml"
    body = "\n".join(f"{k} = {_toml(v)}" for k, v in row.items())
    f.write_text(f'schema = 1\nkind = "framework"\nframework = "torch"\n\n[[build]]\n{body}\n')
    return f


def test_the_shipped_stack_keeps_the_plain_stable_tag():
    stack = resolve(load_matrix(), QUERY)
    assert stack.tag_key == "" and stable_ref(stack) == f"envman/{stack.name}:latest"


def test_a_user_row_identical_to_the_shipped_one_shares_its_tag(tmp_path):
    stack = resolve(load_matrix([_user_file(tmp_path)]), QUERY)
    assert stack.tag_key == "" and stable_ref(stack) == f"envman/{stack.name}:latest"


@pytest.mark.parametrize("change", [{"packages": ["torch==2.15.0", "evil==1.0"]}, {"index_url": "https://mirror.example/cpu"},
                                    {"note": "my own build of it"}])
def test_a_user_row_that_shadows_a_shipped_one_gets_a_tag_of_its_own(tmp_path, change):
    shipped = resolve(load_matrix(), QUERY)
    mine = resolve(load_matrix([_user_file(tmp_path, **change)]), QUERY)
    assert mine.name == shipped.name and len(mine.tag_key) == 12
    assert stable_ref(mine) == f"envman/{mine.name}:latest-{mine.tag_key}" != stable_ref(shipped)


def test_two_users_rows_of_one_name_but_other_content_never_share_a_stable_tag(tmp_path):
    a = resolve(load_matrix([_user_file(tmp_path / "a", packages=["torch==2.15.0", "a==1"])]), QUERY)
    b = resolve(load_matrix([_user_file(tmp_path / "b", packages=["torch==2.15.0", "b==1"])]), QUERY)
    again = resolve(load_matrix([_user_file(tmp_path / "c", packages=["torch==2.15.0", "a==1"])]), QUERY)
    assert a.name == b.name and stable_ref(a) != stable_ref(b)
    assert stable_ref(again) == stable_ref(a)  # named by content: the same row is the same image


def test_a_stack_only_a_user_row_gives_is_named_by_content(tmp_path):
    mine = resolve(load_matrix([_user_file(tmp_path, version="2.99.0", packages=["torch==2.99.0"])]),
                   "torch-2.99.0-cpu-py3.12")
    assert len(mine.tag_key) == 12 and stable_ref(mine).endswith(f":latest-{mine.tag_key}")


def test_the_tag_key_is_no_part_of_the_stack_s_json_and_survives_the_stack_cache(tmp_path, monkeypatch):
    from envman.matrix.source import MatrixSource

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    f = _user_file(tmp_path, packages=["torch==2.15.0", "x==1"])
    first = MatrixSource.of([f]).resolve(QUERY)
    cached = MatrixSource.of([f]).resolve(QUERY)  # a new source: read back from the stack cache
    assert "tag_key" not in first.to_json() and first.tag_key and cached.tag_key == first.tag_key


def test_promotion_moves_the_stack_s_own_stable_tag_only(tmp_path, monkeypatch, mini):
    from dataclasses import replace

    from envman.engine.api import EngineInfo, RunResult
    from envman.images import build as B
    from tests.support.fake_engine import FakeContext, FakeEngine
    from tests.support.probe_doc import probe_doc

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(B, "_render", lambda *a, **kw: FakeContext("ab" * 32))
    stack = replace(resolve(mini, "torch-2.4-cpu"), tag_key="0123456789ab")
    engine = FakeEngine(engine_info=EngineInfo(server_version="f", version="f", runtimes=("runc",)),
                        on_run=lambda image, cmd, kw: RunResult(0, json.dumps(probe_doc(kw["labels"]["envman.name"], "pass")), ""))
    shared = engine.add_image(f"envman/{stack.name}:latest")  # a shipped stack's (or another user's) image
    res = B.build_smoke_promote(engine, stack)
    assert res.promoted and engine.inspect_image(f"envman/{stack.name}:latest").id == shared
    assert engine.inspect_image(f"envman/{stack.name}:latest-0123456789ab").id == res.smoke.promotable_id


def test_every_way_to_a_stack_names_a_user_row_by_content(tmp_path):
    """``resolve`` (a name) and ``resolve_row`` (``--all``, ``ci run``) agree on the key."""
    from envman.stack.resolve import resolve_row

    m = load_matrix([_user_file(tmp_path, packages=["torch==2.15.0", "x==1"])])
    row = next(b for b in reversed(m.builds) if b.name == "torch-2.15.0-cpu")
    by_row = resolve_row(m, row)
    assert by_row.tag_key and stable_ref(by_row) == stable_ref(resolve(m, by_row.name))


def _user_recipe(folder: Path, old: str, new: str) -> Path:
    """A user's recipes file holding the shipped recipe of nvidia/cuda:10.0-base-ubuntu18.04 with
    ``old`` replaced by ``new``."""
    doc = (matrices_dir() / "recipes.toml").read_text()
    start = doc.index('[[recipe]]\ntag = "10.0-base-ubuntu18.04"')
    block = doc[start:doc.index("[[recipe]]", start + 1)]
    assert old in block
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "recipes-mine.toml"
    f.write_text('schema = 1\nkind = "recipes"\n\n' + block.replace(old, new))
    return f


def test_a_user_recipe_of_the_stack_s_base_gives_the_stack_a_tag_of_its_own(tmp_path):
    """The row is the shipped one; only the recipe that rebuilds its base differs."""
    query = "torch-1.0.1-cuda10.0"
    shipped = resolve(load_matrix(), query)
    assert shipped.base_image == "nvidia/cuda:10.0-base-ubuntu18.04" and shipped.tag_key == ""
    same = resolve(load_matrix([_user_recipe(tmp_path / "same", '"cuda-compat-10-0"', '"cuda-compat-10-0"')]), query)
    assert same.tag_key == ""
    pins = '"cuda-compat-10-0", "planted=1"'
    mine = resolve(load_matrix([_user_recipe(tmp_path / "a", '"cuda-compat-10-0"', pins)]), query)
    again = resolve(load_matrix([_user_recipe(tmp_path / "b", '"cuda-compat-10-0"', pins)]), query)
    other = resolve(load_matrix([_user_recipe(tmp_path / "c", '"cuda-compat-10-0"', '"cuda-compat-10-0", "other=1"')]), query)
    assert mine.name == shipped.name and len(mine.tag_key) == 12
    assert stable_ref(mine) == stable_ref(again) != stable_ref(other)
    assert stable_ref(shipped) not in (stable_ref(mine), stable_ref(other))


def test_a_user_recipe_names_by_content_only_the_stacks_of_its_platform(tmp_path):
    """A recipe is per platform: one for arm64 of the base that the arm64 stack uses changes that
    stack's tag, not the amd64 stack on the same tag."""
    from envman.stack.names import nvidia_tag

    shipped = load_matrix()
    arm = resolve(shipped, "torch-2.15.0-cuda13.2-arm64")
    tag = nvidia_tag(arm)
    assert arm.platform == "linux/arm64" and arm.tag_key == "" and shipped.recipe_chain(tag, "linux/arm64") is None
    f = _user_recipe(tmp_path, 'tag = "10.0-base-ubuntu18.04"', f'tag = "{tag}"')
    f.write_text(f.read_text().replace('platform = "linux/amd64"', 'platform = "linux/arm64"'))
    mine = load_matrix([f])
    assert len(resolve(mine, "torch-2.15.0-cuda13.2-arm64").tag_key) == 12
    amd = resolve(mine, "torch-2.15.0-cuda13.2")
    assert nvidia_tag(amd) == tag and amd.tag_key == ""


def test_a_user_row_identical_to_the_shipped_one_shares_its_tag_in_a_fresh_process(tmp_path, monkeypatch):
    """The shipped matrix the user's row is compared with is loaded on first use (no cache yet)."""
    import envman.stack.resolve as resolve_module

    monkeypatch.setattr(resolve_module, "_SHIPPED", {})
    matrix = load_matrix([_user_file(tmp_path)])
    assert resolve(matrix, QUERY).tag_key == ""
    assert len(resolve(load_matrix([_user_file(tmp_path / "b", note="mine")]), QUERY).tag_key) == 12


def test_a_matrix_of_other_files_alone_stands_in_for_the_shipped_one(mini):
    """A matrix given instead of the shipped one (no shipped file in it: a test's, a CI's own)
    names its stacks by the plain stable tag, whatever the shipped matrix gives for those names."""
    stack = resolve(mini, "torch-2.4-cpu")
    assert stack.tag_key == "" and stable_ref(stack) == f"envman/{stack.name}:latest"
