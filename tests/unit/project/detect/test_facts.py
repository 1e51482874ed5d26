"""What one statement of a repository says, how it reads, how much it weighs, and what of its
line is shown as evidence."""

from __future__ import annotations

import pytest

from envman.project.detect.facts import (
    COMMAND, CUDA, CUDNN, FRAMEWORK, IMAGE, IMPORTS, PIN, PROSE, PYTHON, RANGE, STRENGTH, UNSUPPORTED, Fact, Statement,
    clip_text,
)


@pytest.mark.parametrize("fact, means", [
    (Fact(FRAMEWORK, framework="torch", spec="==1.7.1"), "torch ==1.7.1"),
    (Fact(FRAMEWORK, framework="torch", spec="==1.7.1", gpu=True), "torch ==1.7.1 (GPU build)"),
    (Fact(FRAMEWORK, framework="onnxruntime", spec="", gpu=False), "onnxruntime (CPU build)"),
    (Fact(FRAMEWORK, framework="torch", companion="torchvision==0.2.1"), "torch as torchvision==0.2.1 needs it"),
    (Fact(CUDA, version="11.0"), "CUDA 11.0"),
    (Fact(CUDA, spec=">=", version="11", framework="jax"), "CUDA >=11 (of jax)"),
    (Fact(CUDA), "no CUDA (a CPU build)"),
    (Fact(CUDNN, version="8"), "cuDNN 8"),
    (Fact(PYTHON, spec=">=3.8"), "Python >=3.8"),
    (Fact(UNSUPPORTED, framework="mxnet"), "MXNet, which envman does not build"),
    (Fact(UNSUPPORTED, framework="not-in-the-table"), "not-in-the-table, which envman does not build"),
    (Fact(IMPORTS, framework="torch", count=1), "imports torch in 1 file"),
    (Fact(IMPORTS, framework="torch", count=2), "imports torch in 2 files"),
])
def test_a_fact_reads_in_a_few_words(fact, means):
    assert fact.means() == means


def test_a_facts_json_leaves_out_what_it_does_not_say():
    assert Fact(FRAMEWORK, framework="torch", spec="==2.0.0").to_json() == {"kind": FRAMEWORK, "framework": "torch",
                                                                             "spec": "==2.0.0"}
    assert Fact(IMPORTS, framework="jax", count=0).to_json() == {"kind": IMPORTS, "framework": "jax", "count": 0}
    assert Fact(FRAMEWORK, framework="torch", gpu=False).to_json()["gpu"] is False


def test_strengths_are_ordered_pin_image_command_range_prose():
    assert STRENGTH[PIN] > STRENGTH[IMAGE] > STRENGTH[COMMAND] > STRENGTH[RANGE] > STRENGTH[PROSE]


def _st(strength, source="requirements", kind=FRAMEWORK, notes=()):
    return Statement("r.txt", 3, "x", source, strength, Fact(kind, framework="torch", version="11.8"), notes=notes)


@pytest.mark.parametrize("strength, source, hard", [
    (PIN, "requirements", True), (IMAGE, "dockerfile", True), (COMMAND, "dockerfile", True),
    (RANGE, "requirements", False), (PROSE, "readme", False),
    (COMMAND, "readme", False),  # what a README says, even as a command, is advice
    (PIN, "readme", False),
])
def test_a_statement_is_a_pin_from_an_install_command_up_except_in_a_readme(strength, source, hard):
    assert _st(strength, source).hard is hard
    assert _st(strength, source).weight == STRENGTH[strength]


@pytest.mark.parametrize("kind", [CUDA, PYTHON, CUDNN])
def test_an_ngc_images_cuda_and_python_are_never_pins(kind):
    assert _st(IMAGE, "dockerfile", kind).hard is True
    assert _st(IMAGE, "dockerfile", kind, notes=("NGC 21.06-py3",)).hard is False
    assert _st(IMAGE, "dockerfile", FRAMEWORK, notes=("NGC 21.06-py3",)).hard is True


def test_where_and_the_decision_and_its_json():
    s = _st(PIN)
    assert s.where == "r.txt:3" and Statement("a", 0, "", "code", PROSE, Fact(IMPORTS, "torch")).where == "a"
    d = s.decided(False, "set aside: a newer pin")
    assert (d.used, d.why) == (False, "set aside: a newer pin") and s.used is None
    j = d.to_json()
    assert j["used"] is False and j["means"] == "torch" and j["file"] == "r.txt" and j["line"] == 3


def test_evidence_shows_control_characters_and_is_clipped_at_its_limit():
    assert clip_text("  torch==1.0\x1b[31m  ") == "torch==1.0\\x1b[31m"
    assert clip_text("a\u202eb") == "a\\u202eb"
    assert clip_text("x" * 160) == "x" * 160  # exactly at the limit: whole
    assert clip_text("x" * 161) == "x" * 159 + "…"  # one past: clipped to the limit with the mark
    assert len(clip_text("\x00" * 10_000_000)) == 160  # a huge line costs no more than its first characters
