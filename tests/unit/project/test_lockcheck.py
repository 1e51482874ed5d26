"""The check every locked project build runs (envman/project/lockcheck.py, copied into the build
context), run here directly with this interpreter's pip and installed packages standing in for the
image's: it reads requirements as pip does (pip-compile's continued, hashed, commented lines), and
refuses a lock that names a package the requirements do not need or installs a version they
exclude."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import envman.project
from envman.project.lock import CLOSURE_CHECK_MODULE, closure_check

MODULE = Path(envman.project.__file__).with_name(CLOSURE_CHECK_MODULE)

H = "a" * 64
RICH = metadata.version("rich")
NEEDED = f"rich=={RICH} --hash=sha256:{H}\n"


def _check(tmp_path, requirements: str, lock: str) -> subprocess.CompletedProcess:
    (tmp_path / "req.txt").write_text(requirements)
    (tmp_path / "lock.txt").write_text(lock)
    return subprocess.run([sys.executable, str(MODULE), "req.txt", "lock.txt"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


#: The same requirement in the forms pip reads (pip-compile --generate-hashes writes the first).
SPELLINGS = [
    f"rich=={RICH} \\\n    --hash=sha256:{H} \\\n    --hash=sha256:{'b' * 64}\n    # via -r requirements.in\n",
    f"rich=={RICH}\t# pinned\n",
    f"# top\nrich\\\n=={RICH}\n",
    f"rich>={RICH} ; python_version >= '3'\n",
    f"--require-hashes\nrich=={RICH} --hash=sha256:{H}\n",
    "rich\n\n\n",
]


@pytest.mark.parametrize("requirements", SPELLINGS)
def test_every_spelling_pip_reads_is_read(tmp_path, requirements):
    r = _check(tmp_path, requirements, NEEDED)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("spec", [">=999", f"<{RICH}", f"!={RICH}", "==0.1", "~=0.1"])
def test_a_lock_outside_the_requirements_versions_is_refused(tmp_path, spec):
    r = _check(tmp_path, f"rich{spec}\n", NEEDED)
    assert r.returncode != 0 and "versions the requirements exclude" in r.stderr and "rich" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_lock_naming_what_nothing_needs_is_refused(tmp_path):
    r = _check(tmp_path, "rich\n", NEEDED + f"typer==1.0 --hash=sha256:{H}\n")
    assert r.returncode != 0 and "do not need: typer" in r.stderr, r.stderr


def test_the_context_carries_the_shipped_module_byte_for_byte():
    assert closure_check() == MODULE.read_bytes()
    assert closure_check().startswith(b"\nimport re\n") and b"sys.argv[2]" in closure_check()


def test_no_module_imports_the_check_it_runs_only_in_the_image():
    root = Path(envman.project.__file__).parents[1]
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.endswith("project.lockcheck") for n in names), path
