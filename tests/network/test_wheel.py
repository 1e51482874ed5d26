"""envman's own wheel (marker ``pypi``: pip fetches the build backend from the index) ships the
probe package, and an installed envman renders the same ``probe.pyz`` as the source tree."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envman.probe import APP_DIR, probe_archive

pytestmark = pytest.mark.pypi

ROOT = Path(__file__).resolve().parents[2]

RENDER = """
import hashlib, json, envman
from envman.matrix.load import load_matrix
from envman.render.dockerfile import render_stack
from envman.stack.resolve import resolve
ctx = render_stack(resolve(load_matrix(), "torch-2.4.1-cpu"))
print(json.dumps({"envman": envman.__file__, "files": sorted(ctx.files),
                  "probe": hashlib.sha256(ctx.files["envman/probe.pyz"]).hexdigest()}))
"""


def test_the_wheel_ships_the_probe_package_and_renders_the_same_archive(tmp_path):
    import hashlib

    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = dist.glob("envman-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "site")
    modules = {"envman/probe/app/" + p.relative_to(APP_DIR).as_posix()
               for p in APP_DIR.rglob("*.py") if "__pycache__" not in p.parts}
    assert modules | {"envman/probe/__init__.py", "envman/probe/pyz.py"} <= names
    # the installed package (first on the path), not this checkout, renders the context
    r = subprocess.run([sys.executable, "-c", RENDER], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"), "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert Path(out["envman"]).is_relative_to(tmp_path / "site")
    assert "envman/probe.pyz" in out["files"]
    assert out["probe"] == hashlib.sha256(probe_archive()).hexdigest()
