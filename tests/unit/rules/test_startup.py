"""What start-up loads: the commands that need no engine, and ``envman images``, never import the
Docker SDK; ``envman --version`` loads neither typer nor rich. (Start-up times are measured by
``benchmarks/bench_cli.py``, not asserted here.)"""

from __future__ import annotations

import json
import os
from tests.support.socket_engine import SocketEngine
import subprocess
import sys
import threading
from pathlib import Path

import pytest

#: Modules a command must not load: the Docker SDK everywhere, and the CLI's for --version.
NEVER = ("docker",)
PROBE = """
import sys
from envman.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
finally:
    sys.stderr.write("\\nLOADED " + " ".join(sorted(m for m in sys.modules if "." not in m or FULL)) + "\\n")
"""


def loaded(words: list[str], env: dict[str, str], full: bool = False) -> tuple[set[str], str]:
    """(the top-level modules ``envman WORDS`` loaded, or every module with ``full``; its stdout)."""
    p = subprocess.run([sys.executable, "-c", f"FULL = {full}\n" + PROBE, *words], env=env, capture_output=True, text=True, timeout=120)
    line = next(x for x in p.stderr.splitlines() if x.startswith("LOADED "))
    return set(line.split()[1:]), p.stdout


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ENVMAN_")}
    e.update(ENVMAN_CONFIG_DIR=str(tmp_path / "config"), ENVMAN_STATE_DIR=str(tmp_path / "state"),
             ENVMAN_CACHE_DIR=str(tmp_path / "cache"), DOCKER_HOST=f"unix://{tmp_path / 'none.sock'}")
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4"\n')
    subprocess.run([sys.executable, "-m", "envman", "project", "add", str(root)], env=e, check=True, capture_output=True)
    return e


@pytest.mark.parametrize("words", [
    ["--help"], ["--version"], ["run", "--help"], ["build", "--help"], ["images", "--help"],
    ["project", "ls"], ["project", "show", "p"], ["project", "trusted"],
    ["matrix", "ls"], ["matrix", "show", "torch-2.4"], ["matrix", "explain", "torch-2.4"],
], ids=" ".join)
def test_commands_that_need_no_engine_never_import_the_docker_sdk(env, words):
    mods, _ = loaded(words, env)
    assert [m for m in NEVER if m in mods] == []


@pytest.mark.parametrize("words", [["matrix", "ls"], ["matrix", "show", "torch-2.4"], ["matrix", "show", "torch-1.0"]],
                         ids=" ".join)
def test_reading_the_matrix_loads_no_dockerfile_renderer(env, words):
    loaded(words, env)  # the first read parses the matrix (and keeps the parse: envman.matrix.parsed)
    mods, out = loaded(words, env, full=True)
    assert out  # it printed the matrix
    assert sorted(m for m in mods if m.startswith("envman.render") or m == "packaging.tags") == []


def test_version_loads_no_cli_framework(env):
    mods, out = loaded(["--version"], env)
    from envman import __version__

    assert out == f"envman {__version__}\n"
    assert {"typer", "click", "rich"} & mods == set()


class ImagesAPI(SocketEngine):
    """``GET /images/json`` (one managed image)."""

    image = {"Id": "sha256:" + "a" * 64, "RepoTags": ["envman/torch-2.4.1-cpu-py3.11:latest"], "Size": 5_000_000,
             "Created": 1_700_000_000, "Labels": {"envman.managed": "true", "envman.name": "torch-2.4.1-cpu-py3.11",
                                                   "envman.role": "stack"}}

    def answer(self, path: str):
        return (200, [self.image]) if path.startswith("/images/json") else (404, {"message": "no"})


def test_images_asks_the_engine_socket_without_the_docker_sdk(env, tmp_path):
    path = str(tmp_path / "engine.sock")
    srv = ImagesAPI(path)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        mods, out = loaded(["images", "--json"], {**env, "DOCKER_HOST": f"unix://{path}"})
    finally:
        srv.shutdown()
        srv.server_close()
    assert [m for m in NEVER if m in mods] == []
    rows = json.loads(out)
    assert [(r["stack"], r["tags"], r["stable"]) for r in rows] == [
        ("torch-2.4.1-cpu-py3.11", ["envman/torch-2.4.1-cpu-py3.11:latest"], True)]
    assert any(r.startswith("/images/json") for r in srv.requests)
