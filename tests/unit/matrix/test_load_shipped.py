"""Every row of every shipped matrix file, and the facts that are easy to get wrong."""

import pytest
from packaging.version import Version

from envman.matrix.load import load_matrix
from envman.matrix.model import Arch
from envman.matrix.validate import validate
from envman.stack.resolve import resolve, resolve_row

SHOW_KEYS = ("name", "framework", "framework_version", "cuda", "cudnn", "python", "os", "base_image",
             "base_image_status", "min_driver", "toolkit_driver", "sass_archs", "ptx_archs", "sources")


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


def test_shipped_matrix_validates(shipped):
    problems = [str(p) for p in validate(shipped)]
    assert problems == []


def test_every_family_is_present(shipped):
    assert {b.framework for b in shipped.builds} >= {"torch", "tensorflow", "jax", "onnxruntime"}
    assert len(shipped.gpus) >= 30 and len(shipped.oses) >= 5


def test_every_row_resolves_and_show_is_complete(shipped):
    for b in shipped.builds:
        s = resolve_row(shipped, b)
        d = s.to_json()
        for k in SHOW_KEYS:
            assert k in d
        for k in ("name", "framework", "framework_version", "python", "os", "base_image", "base_image_status"):
            assert d[k], (b.name, k)
        assert d["sources"], b.name
        if b.cuda is not None:
            assert d["min_driver"] and d["toolkit_driver"] and (d["sass_archs"] or d["ptx_archs"]), b.name
        # the canonical name is a fixed point, and the row name resolves
        assert resolve(shipped, s.name) == s
        assert resolve(shipped, b.name).framework_version == str(b.version)


def test_cuda_releases_9_to_13_1(shipped):
    keys = [r.key for r in shipped.cuda]
    for k in ("9.0", "9.2", "10.0", "10.2", "11.0", "11.8", "12.0", "12.6", "12.8", "12.9", "13.0", "13.1"):
        assert k in keys
    assert "12.7" not in keys and "12.7" in {v for v, _ in shipped.never_released}


def test_cuda_10_has_no_minor_version_compat_and_11_12_13_do(shipped):
    for r in shipped.cuda:
        if r.version < Version("11.0"):
            assert r.minor_compat_driver is None and r.min_driver == r.toolkit_driver
        else:
            assert r.minor_compat_driver is not None
    assert str(shipped.cuda_release("11.8").min_driver) == "450.80.02"
    assert str(shipped.cuda_release("12.4").min_driver) == "525.60.13"
    assert str(shipped.cuda_release("12.4").toolkit_driver) == "550.54.14"


def test_cuda_13_dropped_maxwell_pascal_volta(shipped):
    sm13 = set(shipped.cuda_release("13.0").sm)
    for gone in ("5.0", "5.2", "6.0", "6.1", "7.0", "7.2"):
        assert Arch.parse(gone) not in sm13
    assert Arch.parse("7.5") in sm13 and Arch.parse("7.0") in set(shipped.cuda_release("12.9").sm)


def test_torch_arch_facts(shipped):
    def build(version, variant):
        return next(b for b in shipped.builds if b.framework == "torch" and str(b.version) == version and b.variant == variant)

    b27 = [b for b in shipped.builds if b.framework == "torch" and b.version.release[:2] == (2, 7) and b.variant == "cu128"]
    assert b27 and all(Arch(12, 0) in b.sass for b in b27)
    cu118 = [b for b in shipped.builds if b.framework == "torch" and b.variant == "cu118"]
    assert cu118 and all(Arch(9, 0) in b.sass for b in cu118)
    s = resolve(shipped, "torch-1.0-cuda10")
    assert (s.framework_version, s.cuda) == ("1.0.1", "10.0")
    assert build("1.0.1", "cu100").cuda == Version("10.0")


def test_every_torch_minor_1_0_to_2_11(shipped):
    minors = {b.version.release[:2] for b in shipped.builds if b.framework == "torch"}
    want = {(1, m) for m in range(0, 14)} | {(2, m) for m in range(0, 12)}
    assert want <= minors, sorted(want - minors)


def test_tensorflow_span_and_package_names(shipped):
    tf = [b for b in shipped.builds if b.framework == "tensorflow" and b.cuda is not None]
    versions = {b.version.release[:2] for b in tf}
    assert (1, 12) in versions and (2, 21) in versions
    old = next(b for b in tf if b.version.release[:2] == (1, 15))
    assert old.packages[0].startswith("tensorflow-gpu==") and old.system_cudnn
    new = resolve(shipped, "tf-2.13-cuda11")
    assert new.flavour == "cudnn-runtime"  # TF before 2.14/2.15 needs system CUDA and cuDNN


def test_pip_torch_uses_the_smallest_flavour(shipped):
    assert resolve(shipped, "torch-2.4-cuda12").flavour == "base"


def test_unconfirmed_facts_stay_marked(shipped):
    t10 = [b for b in shipped.builds if b.framework == "torch" and b.version.release[:2] == (1, 0)]
    assert not any(b.default for b in t10)  # PyPI default CUDA of torch 1.0 is unconfirmed
    assert shipped.cuda_release("13.0").minor_compat_status != "confirmed"
