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


def test_build_project_image_reuses_an_existing_tag(tmp_path):
    from envman.project.image import build_project_image

    p = proj(tmp_path, 'apt = ["ffmpeg"]\n')

    from tests.support.fake_engine import FakeEngine

    ref = project_image_ref(p, "stack", "sha256:base")
    e = FakeEngine.with_images({ref: "sha256:p"})
    assert build_project_image(e, p, "stack", "sha256:base") == ref and e.builds == []
    e = FakeEngine()
    assert build_project_image(e, p, "stack", "sha256:base") == ref
    assert [(c["tag"], c["labels"]["envman.project"], c["nocache"]) for c in e.build_calls] == [(ref, "demo", False)]
    assert e.image_exists(ref)
