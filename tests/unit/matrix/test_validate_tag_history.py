"""Tag histories (``[[history]]`` of ``kind = "tags"``): per tag, published when and served now.

One negative test per ``matrix validate`` rule on the small matrix, the loader's errors, and the
shipped data held to the facts it records (every published nvidia/cuda tag has a history; every
image row's status agrees with it).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.errors import MatrixError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.model import SERVED_UNKNOWN, PublishedTags, TagHistory
from envman.matrix.validate import validate

IMG = "12.4.1-base-ubuntu22.04"
REPO = "nvidia/cuda"


def _with(m, tags=(IMG,), history=((IMG, "2024-04-09", True),)):
    """``m`` with a published list and histories for nvidia/cuda (the mini matrix has neither)."""
    published = m.published + (PublishedTags(REPO, frozenset(tags) | {i.tag for i in m.images if i.repository == REPO},
                                             ("test",), "confirmed"),)
    hist = tuple(TagHistory(REPO, t, d, s, ("test",), "confirmed") for t, d, s in history)
    others = tuple(TagHistory(REPO, i.tag, None, i.status == "published", ("test",), "confirmed")
                   for i in m.images if i.repository == REPO and i.tag not in {h.tag for h in hist})
    return replace(m, published=published, history=hist + others)


@pytest.fixture(scope="module")
def clean(mini):
    m = _with(mini)
    assert validate(m) == []
    return m


def _only(m) -> tuple[str, str]:
    # an image said not to be served leaves its rows nothing to build on unless a recipe rebuilds
    # it: that is its own rule (tests/unit/render/test_base.py), set aside here
    problems = [p for p in validate(m) if "can be rebuilt from NVIDIA's recipe" not in p.what]
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0].where, problems[0].what


def _hist(m, tag, **kw):
    return replace(m, history=tuple(replace(h, **kw) if h.tag == tag else h for h in m.history))


def test_a_history_of_an_unpublished_tag_is_reported(clean):
    m = replace(clean, history=clean.history + (TagHistory(REPO, "12.4.9-base-ubuntu22.04", None, True, ("t",), "confirmed"),))
    assert _only(m) == ("tag nvidia/cuda:12.4.9-base-ubuntu22.04",
                        "has a history but is not in the repository's published tags (kind = \"tags\")")


def test_a_publication_date_in_the_future_is_reported(clean):
    assert _only(_hist(clean, IMG, published="2999-01-01")) == (
        f"tag nvidia/cuda:{IMG}", "published 2999-01-01 lies in the future")


def test_a_published_tag_without_history_is_reported(clean):
    m = replace(clean, history=tuple(h for h in clean.history if h.tag != IMG))
    where, what = _only(m)
    assert where == "tags nvidia/cuda"
    assert what == f"1 published tags have no history (published, served): {IMG}"


@pytest.mark.parametrize("served, status, said, want", [
    (False, "published", "no longer serves", "deleted"),
    (True, "deleted", "still serves", "published"),
    (True, "unknown", "still serves", "published"),
    (False, "unknown", "no longer serves", "deleted"),
])
def test_an_image_status_that_contradicts_the_history_is_reported(clean, served, status, said, want):
    m = _hist(clean, IMG, served=served)
    m = replace(m, images=tuple(replace(i, status=status) if i.tag == IMG else i for i in m.images))
    assert _only(m) == (f"image nvidia/cuda:{IMG}",
                        f"status is {status!r}, but the tag history says the registry {said} it: set status = {want!r}")


@pytest.mark.parametrize("status", ["published", "deleted", "unknown"])
def test_an_unsettled_history_accepts_any_status(clean, status):
    m = _hist(clean, IMG, served=SERVED_UNKNOWN)
    m = replace(m, images=tuple(replace(i, status=status) if i.tag == IMG else i for i in m.images))
    assert [p for p in validate(m) if "can be rebuilt from NVIDIA's recipe" not in p.what] == []


# --- the loader ---------------------------------------------------------------------------------

HEAD = 'schema = 1\nkind = "tags"\n[[repository]]\nname = "x/y"\nsource = ["s"]\nstatus = "confirmed"\ntags = ["1"]\n'


def _load(tmp_path, entry: str):
    p = tmp_path / "t.toml"
    p.write_text(HEAD + f'[[history]]\nrepository = "x/y"\nsource = ["s"]\nstatus = "unconfirmed"\ntags = [{entry}]\n')
    return load_files([p])


def test_a_history_loads_with_its_source_and_status(tmp_path):
    m = _load(tmp_path, '{ tag = "1", published = "2020-01-02", served = false }')
    h = m.tag_history("x/y", "1")
    assert (h.published, h.served, h.deleted, h.source, h.status) == ("2020-01-02", False, True, ("s",), "unconfirmed")
    assert m.tag_history("x/y", "2") is None


@pytest.mark.parametrize("entry", [
    '{ tag = "1", served = "maybe" }',
    '{ tag = "1", served = 1 }',
    '{ tag = "1" }',
    '{ served = true }',
    '{ tag = "1", served = true, published = "yesterday" }',
    '{ tag = "1", served = true, deleted = true }',
    '"1"',
])
def test_a_malformed_history_entry_is_rejected_naming_the_key(tmp_path, entry):
    with pytest.raises(MatrixError) as exc:
        _load(tmp_path, entry)
    assert "history[0].tags" in str(exc.value)


# --- the shipped data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


def test_every_shipped_nvidia_tag_has_a_history(shipped):
    tags = shipped.published_tags(REPO)
    assert tags and all(shipped.tag_history(REPO, t) is not None for t in tags)


def test_every_shipped_image_status_agrees_with_its_tag_history(shipped):
    for img in shipped.images:
        h = shipped.tag_history(img.repository, img.tag)
        if h is not None and isinstance(h.served, bool):
            assert img.status == ("published" if h.served else "deleted"), img.ref


@pytest.mark.parametrize("tag, served", [
    ("11.0-base-ubuntu20.04", False),  # the legacy X.Y tag is gone ...
    ("11.0.3-base-ubuntu20.04", True),  # ... while the X.Y.Z tag of the same release is served
    ("13.0.1-base-ubuntu24.04", True),  # a point release between two the matrix had
    ("13.2.0-cudnn-runtime-ubuntu22.04", True),
    ("10.0-cudnn7-devel-ubuntu18.04", False),
])
def test_shipped_served_state_of_known_tags(shipped, tag, served):
    assert shipped.tag_history(REPO, tag).served is served


def test_shipped_unconfirmed_histories_say_so(shipped):
    h = shipped.tag_history(REPO, "13.4.1-devel-ubuntu24.04")
    assert h.status == "unconfirmed" and h.published == "2026-09-09"


def test_matrix_show_says_when_the_base_image_was_published_and_whether_it_is_served():
    import json

    from tests.support.cli import run_envman

    served = json.loads(run_envman(["matrix", "show", "torch-1.7-cuda11.0", "--json"]).stdout)
    assert served["base_image"] == "nvidia/cuda:11.0.3-base-ubuntu20.04"  # not the deleted legacy 11.0-* tag
    assert (served["base_image_published"], served["base_image_served"]) == ("2021-01-14", "yes")
    deleted = json.loads(run_envman(["matrix", "show", "torch-1.0-cuda10", "--json"]).stdout)
    assert deleted["base_image"] == "nvidia/cuda:10.0-base-ubuntu18.04"
    assert deleted["base_image_served"].startswith("no (deleted)")
    indirect = run_envman(["matrix", "show", "torch-2.15-cuda13.2"]).stdout
    assert "base_image_published  2026-04-14 (unconfirmed)" in indirect  # an indirect date says so


def test_a_publication_date_of_today_is_not_in_the_future_and_tomorrow_is(clean):
    import datetime

    today = datetime.date.today()
    assert [p for p in validate(_hist(clean, IMG, published=today.isoformat())) if "future" in p.what] == []
    tomorrow = (today + datetime.timedelta(days=1)).isoformat()
    assert _only(_hist(clean, IMG, published=tomorrow)) == (f"tag nvidia/cuda:{IMG}", f"published {tomorrow} lies in the future")


@pytest.mark.parametrize("count, shown", [
    (5, "12.4.91-x, 12.4.92-x, 12.4.93-x, 12.4.94-x, 12.4.95-x"),
    (6, "12.4.91-x, 12.4.92-x, 12.4.93-x, 12.4.94-x, 12.4.95-x and 1 more"),
])
def test_published_tags_without_history_show_five_and_count_the_rest(mini, count, shown):
    extra = tuple(f"12.4.{90 + i}-x" for i in range(1, count + 1))
    assert _only(_with(mini, tags=(IMG, *extra))) == (
        "tags nvidia/cuda", f"{count} published tags have no history (published, served): {shown}")
