"""Security by rule: verdicts.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tests.support.security_rules import pullable, verdict_labels


@pytest.mark.parametrize("case", ["missing", "blank", "other-layers", "extra-layer-on-top", "no-layers"])
def test_a_verdict_label_not_bound_to_these_layers_is_no_verdict(home, case):
    from envman.engine.api import ImageInfo
    from envman.images.store import image_verdict, rootfs_digest

    layers = ("sha256:l1", "sha256:l2")
    tested = rootfs_digest(ImageInfo("x", layers=layers))
    labels = {"missing": {k: v for k, v in verdict_labels(tested).items() if not k.endswith("rootfs")},
              "blank": {**verdict_labels(tested), **{k: "" for k in verdict_labels(tested) if k.endswith("rootfs")}},
              "other-layers": verdict_labels("sha256:" + "9" * 64),
              "extra-layer-on-top": verdict_labels(tested),
              "no-layers": verdict_labels(tested)}[case]
    image_layers = {"extra-layer-on-top": (*layers, "sha256:l3"), "no-layers": ()}.get(case, layers)
    assert image_verdict(ImageInfo("sha256:img", labels=labels, layers=image_layers)) is None
    assert image_verdict(ImageInfo("sha256:img", labels=verdict_labels(tested), layers=layers)).status == "pass"


@given(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
@settings(max_examples=10, deadline=None)
def test_pull_promotes_only_a_render_hash_this_host_renders(other):
    from envman.images.remote import Registry, RegistryError, pull_stack
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.support.fake_engine import FakeEngine

    stack = resolve(load_matrix(), "torch-2.4-cpu")
    mine = "a" * 64
    engine = FakeEngine()
    pullable(engine, stack, other)
    if other != mine:
        with pytest.raises(RegistryError, match="not what this host renders"):
            pull_stack(engine, stack, Registry("reg.example:5000"), allow_http=True, render_hashes=frozenset({mine}),
                       trust_registry=True)
        assert engine.inspect_image(f"envman/{stack.name}:latest") is None
    pulled = pull_stack(engine, stack, Registry("reg.example:5000"), allow_http=True, render_hashes=frozenset({other}),
                        trust_registry=True)
    assert engine.inspect_image(f"envman/{stack.name}:latest").id == pulled.image_id


def test_expected_render_hashes_are_the_builds_of_both_dialects():
    from envman.images.build import expected_render_hashes
    from envman.matrix.load import load_matrix
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from envman.stack.resolve import resolve

    stack = resolve(load_matrix(), "torch-2.4-cpu")
    got = expected_render_hashes(stack, RenderOptions())
    assert got == {render_stack(stack, RenderOptions(), builder=k).render_hash for k in ("classic", "buildkit")}
    assert len(got) == 2


def test_a_stale_cached_report_naming_a_removed_verdict_image_is_not_kept(home):
    """Images removed, a rebuild killed during smoke: the cached report names a verdict image
    that is gone. It must not be kept (promoting it fails with "No such image" on every retry)."""
    from envman.images import build as B
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.support.fake_engine import FakeEngine

    stack = resolve(load_matrix(), "torch-2.4-cpu")
    engine = FakeEngine()
    image_id = engine.add_image(f"envman/{stack.name}:abcd")
    rep = B.SmokeReport(stack=stack.name, image=f"envman/{stack.name}:abcd", image_id=image_id, overall="pass",
                        reason="ok", gpus_requested=False, probe=None, exit_code=0, stderr_tail="",
                        verdict_image_id="sha256:" + "e" * 64)  # the verdict image, removed since
    B.save_report(rep)
    b = B.BuildResult(stack, f"envman/{stack.name}:abcd", image_id, "abcd" * 16, True, 0.0)
    assert B.kept_report(engine, b) is None  # smoke again instead
    rep.verdict_image_id = None
    B.save_report(rep)
    assert B.kept_report(engine, b).overall == "pass"  # a report about an image that is there is kept
