"""The package's import rules (``[tool.importlinter]`` in pyproject.toml) hold.

The layers run from the command line down to the engine (``envman.cli`` above the domain, the
domain above ``envman.engine``); the shared modules at the top of the package import no layer;
only ``envman.engine`` imports the Docker SDK. A module that imports upwards fails here with
import-linter's report of the chain.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _lint_imports() -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports is missing: install the test extras (pip install -e '.[test]')")
    return subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)})


def test_every_import_contract_is_kept():
    r = _lint_imports()
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_the_contracts_catch_an_upward_import(tmp_path):
    """The contracts are not vacuous: a copy of the package whose stack module imports the CLI
    breaks the layers contract."""
    pkg = tmp_path / "envman"
    shutil.copytree(ROOT / "envman", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    names = pkg / "stack" / "names.py"
    names.write_text(names.read_text() + "\n\ndef _upward():\n    from envman.cli import app\n    return app\n")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    r = subprocess.run([exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)})
    assert r.returncode != 0
    assert "envman.stack.names -> envman.cli" in r.stdout
