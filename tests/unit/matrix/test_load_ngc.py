"""The NGC release table (``kind = "ngc"``): loaded strictly, validated, shown."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.errors import MatrixError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.validate import validate

ROW = """\
[[release]]
repository = "nvcr.io/nvidia/pytorch"
release = "20.12"
tags = ["20.12-py3"]
framework = "torch"
framework_version = "1.8.0a0+1606899"
cuda = "11.1.1"
cudnn = "8.0.5"
python = "3.8"
os = "ubuntu20.04"
source = ["https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel_20-12.html"]
status = "confirmed"
"""


def load(tmp_path, text):
    p = tmp_path / "ngc.toml"
    p.write_text('schema = 1\nkind = "ngc"\n\n' + text)
    return load_files([p])


def test_a_row_loads_and_answers_for_its_tags(tmp_path):
    m = load(tmp_path, ROW)
    r = m.ngc_lookup("nvcr.io/nvidia/pytorch:20.12-py3")
    assert (r.framework, r.framework_version, str(r.cuda), str(r.python), str(r.public_release)) == (
        "torch", "1.8.0a0+1606899", "11.1.1", "3.8", "1.8.0")
    assert m.ngc_lookup("nvcr.io/nvidia/pytorch:20.11-py3") is None and m.ngc_lookup("nvcr.io/nvidia/pytorch") is None


@pytest.mark.parametrize("old, new, key", [
    ('release = "20.12"', 'release = "2020.12"', "release"),
    ('tags = ["20.12-py3"]', 'tags = ["21.01-py3"]', "tags"),
    ('tags = ["20.12-py3"]', 'tags = []', "tags"),
    ('tags = ["20.12-py3"]', 'tags = ["20.12-py3; rm -rf /"]', "tags"),
    ('repository = "nvcr.io/nvidia/pytorch"', 'repository = "docker.io/library/python"', "repository"),
    ('framework = "torch"', 'framework = "caffe"', "framework"),
    ('framework_version = "1.8.0a0+1606899"', 'framework_version = "one point eight"', "framework_version"),
    ('cuda = "11.1.1"', 'cuda = 11.1', "cuda"),
    ('status = "confirmed"', 'status = "sure"', "status"),
    ('status = "confirmed"', 'status = "confirmed"\nfavourite = true', "favourite"),
])
def test_malformed_rows_are_refused_whole_naming_the_key(tmp_path, old, new, key):
    with pytest.raises(MatrixError) as e:
        load(tmp_path, ROW.replace(old, new))
    assert key in str(e.value)


def test_figures_are_optional_but_a_confirmed_row_gives_them(tmp_path):
    bare = ROW.replace('framework_version = "1.8.0a0+1606899"\n', "").replace('cuda = "11.1.1"\n', "")
    m = load(tmp_path, bare.replace('status = "confirmed"', 'status = "unconfirmed"'))
    assert m.ngc[0].public_release is None and m.ngc[0].cuda is None
    shipped = load_matrix()
    problems = validate(replace(shipped, ngc=load(tmp_path, bare).ngc))
    assert any("confirmed, but gives no framework_version, cuda" in str(p) for p in problems)


@pytest.mark.parametrize("drop", ['cudnn = "8.0.5"\n', 'os = "ubuntu20.04"\n', 'python = "3.8"\n'])
def test_a_confirmed_row_gives_cudnn_python_and_ubuntu_too(tmp_path, drop):
    """NVIDIA's contents list states all five; a row a source gives fewer of is not confirmed."""
    shipped = load_matrix()
    key = drop.split(" =")[0]
    problems = [str(p) for p in validate(replace(shipped, ngc=load(tmp_path, ROW.replace(drop, "")).ngc))]
    assert [p for p in problems if "ngc " in p] == [
        f"ngc nvcr.io/nvidia/pytorch:20.12: confirmed, but gives no {key}: mark it partially confirmed or add the figures"]
    ok = [str(p) for p in validate(replace(shipped, ngc=load(tmp_path, ROW).ngc)) if "ngc " in str(p)]
    assert ok == []
    partial = ROW.replace(drop, "").replace('status = "confirmed"', 'status = "partially confirmed"')
    assert [str(p) for p in validate(replace(shipped, ngc=load(tmp_path, partial).ngc)) if "ngc " in str(p)] == []


def test_two_rows_claiming_a_tag_and_an_unknown_cuda_are_problems(tmp_path):
    shipped = load_matrix()
    twice = load(tmp_path, ROW + ROW.replace('release = "20.12"', 'release = "20.11"').replace(
        'tags = ["20.12-py3"]', 'tags = ["20.11-py3"]').replace('cuda = "11.1.1"', 'cuda = "7.5.18"'))
    both = twice.ngc + (twice.ngc[0],)
    problems = [str(p) for p in validate(replace(shipped, ngc=both))]
    assert any("tag 20.12-py3 is listed by another row of this release" in p for p in problems)
    assert any("CUDA 7.5.18 is not a release" in p for p in problems)
