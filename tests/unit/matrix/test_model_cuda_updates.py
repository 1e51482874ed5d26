"""A CUDA update through the CLI: ``matrix show --cuda 12.4.1`` answers with the update's toolkit
driver, ``show``/``explain NAME --cuda`` take a base image of that update, and a user's image row
may give the release (``cuda = "12.9"``) with a tag of one of its updates."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from envman.matrix.load import load_matrix
from envman.matrix.validate import validate
from tests.support.cli import run_envman


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


@pytest.mark.parametrize("text, release, patch, driver", [
    ("12.4.1", "12.4", "12.4.1", "550.54.15"),
    ("12.4 Update 1", "12.4", "12.4.1", "550.54.15"),
    ("12.4u1", "12.4", "12.4.1", "550.54.15"),
    ("12.4.1-cudnn-runtime-ubuntu22.04", "12.4", "12.4.1", "550.54.15"),
    ("12.4", "12.4", None, "550.54.14"),  # the GA
    ("13.0 Update 1", "13.0", "13.0.1", "580.82.07"),
    ("11.0.3", "11.0", "11.0.3", "450.51.06"),
])
def test_a_cuda_update_is_named_any_way_nvidia_writes_it(shipped, text, release, patch, driver):
    rel, p = shipped.cuda_update(text)
    assert (rel.key, p and str(p), str(rel.toolkit_driver_for(p))) == (release, patch, driver)


@pytest.mark.parametrize("text, why", [
    ("12.4 Update 2", "has no Update 2"),  # one past the last update the matrix lists
    ("12.4 Update 0", "has no Update 0"),
    ("12.4.2", "past what the matrix knows"),
    ("12.7", "never released"),
    ("99.1", "not a release in the matrix"),
    ("twelve", "names no CUDA version"),
    ("12.4.1; rm -rf /", "names no CUDA version"),
])
def test_a_cuda_update_the_matrix_cannot_answer_says_why(shipped, text, why):
    with pytest.raises(ValueError, match=why):
        shipped.cuda_update(text)


def test_show_cuda_alone_answers_with_the_update_s_toolkit_driver():
    r = run_envman(["matrix", "show", "--cuda", "12.4.1", "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["cuda"], d["update"], d["toolkit_driver"], d["min_driver"]) == ("12.4.1", "Update 1", "550.54.15", "525.60.13")
    assert d["images"] and all(":12.4.1-" in i for i in d["images"])


def test_show_with_a_stack_takes_a_base_image_of_that_update():
    r = run_envman(["matrix", "show", "torch-2.4-cuda12.4", "--cuda", "12.4 Update 1", "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["base_image"].startswith("nvidia/cuda:12.4.1-") and d["toolkit_driver"] == "550.54.15"


@pytest.mark.parametrize("args, words", [
    (["matrix", "show", "torch-2.4-cuda12.4", "--cuda", "12.8.1"], "is CUDA 12.4, not CUDA 12.8.1"),
    (["matrix", "show", "--cuda", "12.4.9"], "--cuda: CUDA 12.4.9 is past"),
    (["matrix", "show"], "give a stack name or --cuda"),
    (["matrix", "explain", "torch-2.4-cuda12.4", "--cuda", "x", "--driver", "560.35.03", "--sm", "8.0"], "names no CUDA version"),
])
def test_a_cuda_the_stack_or_matrix_lacks_is_one_line_exit_2(args, words):
    r = run_envman(args)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_explain_judges_the_driver_against_the_update():
    r = run_envman(["matrix", "explain", "torch-2.4-cuda12.4", "--cuda", "12.4.1", "--driver", "550.54.14", "--sm", "8.0", "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert any("550.54.15" in reason for reason in d["reasons"]), d  # below the update's own driver: minor-version compatibility


def _user_image(tmp_path, tag: str, cuda: str = "12.9"):
    f = tmp_path / "mine.toml"
    f.write_text(f'''schema = 1
kind = "images"

[[image]]
repository = "nvidia/cuda"
tag = "{tag}"
cuda = "{cuda}"
flavour = "cudnn-runtime"
cudnn = "9"
os = "ubuntu24.04"
status = "published"
source = ["test"]
''')
    return f


def test_a_user_row_may_give_the_release_with_an_update_tag(tmp_path):
    m = load_matrix([_user_image(tmp_path, "12.9.1-cudnn-runtime-ubuntu24.04")])
    img = next(i for i in m.images if i.tag == "12.9.1-cudnn-runtime-ubuntu24.04")
    assert img.cuda_patch == Version("12.9.1")
    assert [str(p) for p in validate(m) if "12.9.1-cudnn-runtime" in str(p)] == []


def test_a_user_row_whose_tag_names_another_release_is_refused(tmp_path):
    m = load_matrix([_user_image(tmp_path, "12.8.1-cudnn-runtime-ubuntu24.04")])
    assert ("image nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04: tag does not follow the naming rules of its era: "
            "expected '12.9.N-cudnn-runtime-ubuntu24.04'") in [str(p) for p in validate(m)]


@pytest.mark.parametrize("text", ["١٢.٤.١", "１２.４.１", "12.4 Update １"])
def test_a_cuda_version_in_other_digits_is_refused(shipped, text):
    with pytest.raises(ValueError, match="names no CUDA version"):
        shipped.cuda_update(text)
