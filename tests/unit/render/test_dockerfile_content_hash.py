"""A stack image's identity (envman.render.dockerfile.content_hash) is what the image is: no
network option (wheelhouse, mirrors, CA bundle, indexes) and no builder dialect changes it, and a
pull checks it, so a push -> pull round trip holds whatever options the pushing host used."""

from __future__ import annotations

import pytest

from envman import labels as L
from envman.render.dockerfile import content_hash, render_stack
from envman.render.options import RenderOptions
from tests.unit.render.test_wheels import house, ort_stack  # noqa: F401 (the wheelhouse fixture)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _options(kind: str, house, tmp_path) -> RenderOptions:  # noqa: F811
    if kind == "ca_bundle":
        (tmp_path / "ca.pem").write_text(CA)
        return RenderOptions(ca_bundle=tmp_path / "ca.pem")
    return RenderOptions(**{
        "wheelhouse": {"wheelhouse": house},
        "offline": {"wheelhouse": house, "offline": True},
        "pip_index": {"pip_index": "https://pypi.corp.example/simple"},
        "pip_extra_index": {"pip_extra_index": "https://extra.corp.example/simple"},
        "framework_index": {"framework_index": "https://mirror.corp.example/whl/cu124"},
        "registry_mirror": {"registry_mirror": "mirror.corp.example:5000"},
        "apt_mirror": {"apt_mirror": "https://apt.corp.example/ubuntu"},
        "python_install_mirror": {"python_install_mirror": "https://py.corp.example/releases"},
    }[kind])


NETWORK_OPTIONS = ("wheelhouse", "offline", "ca_bundle", "pip_index", "pip_extra_index", "framework_index",
                   "registry_mirror", "apt_mirror", "python_install_mirror")


@pytest.mark.parametrize("kind", NETWORK_OPTIONS)
@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_no_network_option_or_dialect_changes_the_identity_though_it_changes_the_render(kind, builder, house,
                                                                                       tmp_path):  # noqa: F811
    stack = ort_stack()
    plain = render_stack(stack)
    ctx = render_stack(stack, _options(kind, house, tmp_path), builder=builder)
    if kind not in ("framework_index", "python_install_mirror"):  # options this stack has no use for
        assert ctx.render_hash != plain.render_hash  # how packages are fetched is in the build context...
    assert ctx.content_hash == plain.content_hash == content_hash(stack)  # ...not in what the image is


def test_what_the_image_is_does_change_the_identity():
    stack = ort_stack()
    other = ort_stack(packages=("onnxruntime-gpu==1.19.2", "numpy==1.26.4"))
    assert content_hash(stack) != content_hash(other) and len(content_hash(stack)) == 64


def test_a_build_labels_its_candidate_with_its_identity(tmp_path, monkeypatch, mini):
    from envman.images import build as B
    from envman.stack.resolve import resolve
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    stack = resolve(mini, "torch-2.4-cpu")
    engine = FakeEngine()
    built = B.build_stack(engine, stack, RenderOptions(pip_index="https://pypi.corp.example/simple"))
    assert engine.inspect_image(built.image_id).labels[L.CONTENT_HASH] == content_hash(stack)
    assert B.expected_content_hash(stack) == content_hash(stack)


@pytest.mark.parametrize("kind", [k for k in NETWORK_OPTIONS if k != "offline"])  # the house has no torch CPU wheel
def test_a_push_pull_round_trip_holds_whatever_network_options_the_pushing_host_used(kind, house, tmp_path, monkeypatch):  # noqa: F811
    """Host A builds with ``kind`` and pushes; host B (no network option) pulls: the render hash
    label is A's (not B's), the identity is the same, so B takes it; an image of other content
    under the same labels is refused in one line and removed again."""
    from envman.engine.api import ImageInfo
    from envman.images import build as B
    from envman.images.remote import Registry, RegistryError, pull_stack
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from envman.state import stable_ref
    from tests.support.fake_engine import FakeEngine
    from tests.support.security_rules import pullable

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    stack = resolve(load_matrix(), "torch-2.4-cpu")
    on_a = render_stack(stack, _options(kind, house, tmp_path))
    for identity, accepted in ((on_a.content_hash, True), (content_hash(ort_stack()), False)):
        engine = FakeEngine()
        image = pullable(engine, stack, on_a.render_hash)
        info = engine._images[image]
        engine._images[image] = ImageInfo(image, labels={**info.labels, L.CONTENT_HASH: identity}, layers=info.layers,
                                          repo_digests=info.repo_digests)
        if accepted:
            pulled = pull_stack(engine, stack, Registry("reg.example:5000"), allow_http=True, trust_registry=True,
                                render_hashes=frozenset())  # no render hash of B's matches A's
            assert engine.inspect_image(stable_ref(stack)).id == pulled.image_id == image
        else:
            with pytest.raises(RegistryError) as e:
                pull_stack(engine, stack, Registry("reg.example:5000"), allow_http=True, trust_registry=True)
            assert f"its {L.CONTENT_HASH} label" in e.value.what and "\n" not in str(e.value)
            assert engine.inspect_image(stable_ref(stack)) is None
    assert B.expected_content_hash(stack) == on_a.content_hash
