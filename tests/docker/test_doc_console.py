"""The console blocks of README.md and docs/ marked ``<!-- console: docker -->``, run on the real
engine and compared with what the docs show (``tests/support/doc_console.py``).

Each block runs in its own HOME, config and state; the images whose names its output shows
(``envman/NAME:TAG``) are removed afterwards, and only those. Behind a TLS-inspecting proxy the
sandbox's config names this host's CA bundle first, as docs/getting-started.md tells a user to.
A block with ``setup=standin-tour`` runs on the stand-in stacks of ``tests/docker/test_projects.py``
(their matrix files and the smoke reports that promote them), as the docs say it was made."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.docker.conftest import host_ca_bundle
from tests.docker.test_projects import matrix_files, stacks, workdir  # noqa: F401 (fixtures)
from tests.support import doc_console as dc

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DOCKER = [b for b in dc.all_blocks() if b.check == "docker"]
IMAGE = re.compile(r"\benvman/[a-z0-9][a-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*")


def _with_ca_bundle(box: dc.Sandbox) -> None:
    config = box.home / ".config" / "envman"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f'[network]\nca_bundle = "{host_ca_bundle()}"\n')


def _standin_tour(request, box: dc.Sandbox) -> None:
    """The stand-in stacks' matrix files, and their smoke reports copied into the sandbox's state."""
    files = request.getfixturevalue("matrix_files")
    _ids, states = request.getfixturevalue("stacks")
    shutil.copytree(states["root"], box.root / "state")
    box.env.update(ENVMAN_MATRIX=":".join(files), ENVMAN_STATE_DIR=str(box.root / "state"))


@pytest.mark.parametrize("block", DOCKER, ids=[b.where for b in DOCKER])
def test_a_console_block_is_what_the_command_prints_on_the_engine(block, docker_engine, monkeypatch, request):
    shown = {m.group(0) for s in block.steps for line in s.shown for m in IMAGE.finditer(line)}
    before = set(_tags())

    def prepare(box: dc.Sandbox) -> None:
        _with_ca_bundle(box)
        if block.options.get("setup") == "standin-tour":
            _standin_tour(request, box)

    try:
        problems = dc.run_block(block, monkeypatch, engine=True, timeout=1800, prepare=prepare)
    finally:
        if block.options.get("setup") == "standin-tour":  # a container the block left behind
            subprocess.run(["docker", "rm", "-f", "alpha"], capture_output=True)
        made = [t for t in set(_tags()) - before if t in shown or t.rsplit(":", 1)[0] in {s.rsplit(":", 1)[0] for s in shown}]
        if made:
            subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)
    assert not problems, "\n".join(problems)


def _tags() -> list[str]:
    out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True)
    return out.stdout.split()
