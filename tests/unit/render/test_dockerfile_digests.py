"""Every Dockerfile envman renders over the shipped matrix stays the same bytes: each row under
several network option sets and both builders (and its base rebuilt from NVIDIA's recipe), and the
project and notebook images. A change of the plan's types or of where quoting happens must not
move one byte; a deliberate change of the render reruns ``python scripts/render-digests.py``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location("render_digests", ROOT / "scripts" / "render-digests.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["render_digests"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_rows_render_is_unchanged():
    script = _script()
    expected = json.loads(script.DIGEST_FILE.read_text(encoding="utf-8"))
    rendered = script.render_digests()
    assert rendered.keys() == expected.keys()
    differ = sorted(k for k in expected if expected[k] != rendered[k])
    assert not differ, f"{len(differ)} renders differ, first: {differ[:5]}"


def test_the_digests_cover_every_builder_and_option_set_and_render_some_rows():
    script = _script()
    expected = json.loads(script.DIGEST_FILE.read_text(encoding="utf-8"))
    rendered = [k for k, v in expected.items() if len(v) == 64 and " " in k and not k.startswith(("project", "notebook"))]
    assert len(rendered) > 1000
    for opt in script.OPTION_SETS:
        assert any(f" {opt} buildkit" in k for k in rendered)
        assert any(f" {opt} classic" in k for k in rendered) == (opt not in script.BUILDKIT_ONLY)
    assert any(k.endswith(" rebuilt-base") for k in rendered)
    assert sum(k.startswith("project ") for k in expected) == 6 * len(script.OPTION_SETS)
