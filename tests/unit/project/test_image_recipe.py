"""Tests of ``envman/project/image.py``, moved unchanged from the former ``test_project.py``
(which tested several modules)."""

from __future__ import annotations

import os

from envman.project.image import project_context, project_dockerfile, project_image_ref, project_labels
from tests.unit.project.test_file import dirs, proj, write_project  # noqa: F401 (shared with that file)


def test_project_without_extras_needs_no_image(tmp_path):
    assert not proj(tmp_path, "").needs_image


def test_dockerfile_layers_apt_then_requirements_from_the_stack_image(tmp_path):
    p = proj(tmp_path, 'requirements = "requirements.txt"\napt = ["zlib1g-dev", "ffmpeg"]\n', req="einops==0.8.0\n")
    df = project_dockerfile(p, "torch-2.4.1-cuda12.4-py3.10", "sha256:" + "a" * 64)
    lines = df.splitlines()
    assert lines[1] == "FROM sha256:" + "a" * 64
    assert "envman/torch-2.4.1-cuda12.4-py3.10:latest" in lines[0]
    apt_at = next(i for i, ln in enumerate(lines) if "apt-get install" in ln)
    req_at = next(i for i, ln in enumerate(lines) if "pip install" in ln)
    assert apt_at < req_at and "ffmpeg zlib1g-dev" in df
    assert project_context(p, "s", "sha256:x")["requirements.txt"] == b"einops==0.8.0\n"


def test_project_tag_is_content_addressed(tmp_path):
    p = proj(tmp_path / "1", 'requirements = ["einops==0.8.0"]\n')
    base = "sha256:" + "b" * 64
    ref = project_image_ref(p, "stack", base)
    assert ref.startswith(f"envman/project-{p.identity}:") and p.identity.startswith("demo-") and len(ref.rsplit(":", 1)[1]) == 16
    assert project_image_ref(p, "stack", base) == ref  # same inputs, same tag
    assert project_image_ref(p, "stack", "sha256:" + "c" * 64) != ref  # re-promoted stack
    q = proj(tmp_path / "2", 'requirements = ["einops==0.8.1"]\n')
    assert project_image_ref(q, "stack", base) != ref
    labels = project_labels(p, "torch-2.4.1-cuda12.4-py3.10", ref)
    import os
    import pwd

    assert {k: v for k, v in labels.items() if not k.startswith("envman.smoke.")} == {
        "envman.managed": "true", "envman.project": "demo", "envman.name": "torch-2.4.1-cuda12.4-py3.10",
        "envman.role": "project", "envman.project-hash": ref.rsplit(":", 1)[1],
        "envman.project-id": p.identity, "envman.built-by.uid": str(os.getuid()), "envman.built-by.user": pwd.getpwuid(os.getuid()).pw_name}
    assert {v for k, v in labels.items() if k.startswith("envman.smoke.")} == {""}  # the base's verdict is not inherited


def test_build_project_image_reuses_an_existing_tag_this_user_built(tmp_path, monkeypatch):
    from envman.images.provenance import record_built

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    from envman.project.image import build_project_image

    p = proj(tmp_path, 'apt = ["ffmpeg"]\n')

    from tests.support.fake_engine import FakeEngine

    ref = project_image_ref(p, "stack", "sha256:base")
    e = FakeEngine.with_images({ref: "sha256:p"})
    record_built("sha256:p", ref, base="sha256:base")  # this user's earlier build
    assert build_project_image(e, p, "stack", "sha256:base") == ref and e.builds == []
    e = FakeEngine()
    assert build_project_image(e, p, "stack", "sha256:base") == ref
    assert [(c["tag"], c["labels"]["envman.project"], c["nocache"]) for c in e.build_calls] == [(ref, "demo", False)]
    assert e.image_exists(ref)


def test_a_project_image_planted_under_my_project_s_tag_is_not_run_as_mine(tmp_path, monkeypatch):
    """Attack (issue 35 item 2, for project images): bases and stack candidates are reused only when
    ``built.json`` says this user built them, but ``build_project_image`` reuses whatever image the
    engine has under ``envman/project-<name>-<hash of the root>:<content hash>``. Every user of a
    rootful engine sees that tag (``docker images``: it is the victim's own earlier build), or
    computes it (``envman run --dry-run`` on a copy of a public repository at the victim's path
    prints it). A neighbour runs ``docker tag evil envman/project-demo-…:…``; the victim's next
    ``envman run`` runs the planted image with the project at ``/workspace`` (and, for a trusted
    project, the config's tokens in its environment)."""
    from envman.project.image import build_project_image
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    p = proj(tmp_path / "p", 'apt = ["ffmpeg"]\n')
    ref = project_image_ref(p, "stack", "sha256:base")
    e = FakeEngine.with_images({ref: "sha256:" + "e" * 64})  # a neighbour's image, never built here
    build_project_image(e, p, "stack", "sha256:base")
    assert e.build_calls, "the planted project image was reused without a build of this user's"


def test_a_project_image_is_reused_only_when_i_built_it_on_this_very_stack_image(tmp_path, monkeypatch):
    """The rule's boundaries: the image this user's build recorded, on this base, is reused (no
    build); the same image re-tagged for another base, an image of this user's from another base
    put under the tag, or a record in another user's state (another ``ENVMAN_STATE_DIR``) is not."""
    from envman.images.provenance import built_image_id, built_here, record_built
    from envman.project.image import build_project_image
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    p = proj(tmp_path / "p", 'apt = ["ffmpeg"]\n')
    base, other_base = "sha256:" + "b" * 64, "sha256:" + "c" * 64
    e = FakeEngine()
    ref = build_project_image(e, p, "stack", base)
    mine = e.inspect_image(ref).id
    assert built_here(mine, base=base) and built_image_id(ref, base=base) == mine
    assert len(e.build_calls) == 1
    assert build_project_image(e, p, "stack", base) == ref and len(e.build_calls) == 1  # reused: built here
    # my image of another base, put under this base's tag: built again
    other_ref = project_image_ref(p, "stack", other_base)
    record_built("sha256:" + "d" * 64, other_ref, base=other_base)
    e.add_image(None, "sha256:" + "d" * 64)
    e.tag("sha256:" + "d" * 64, ref)
    build_project_image(e, p, "stack", base)
    assert len(e.build_calls) == 2 and e.inspect_image(ref).id != "sha256:" + "d" * 64
    # another user's state vouches for nothing here
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state-of-bob"))
    build_project_image(e, p, "stack", base)
    assert len(e.build_calls) == 3
    # record_built ignores what is not an image ID
    record_built("envman/x:1", "envman/x:1")
    assert built_image_id("envman/x:1") is None
