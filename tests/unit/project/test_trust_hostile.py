"""Trust is bound to a file's owner as well as its path, content and directory: a project folder
you deleted in a shared place (``/tmp``, a scratch file system) and someone else made again, with
the very file you trusted in it, is theirs, and their code would run with your trusted mounts and
your config's tokens. A record is believed only while the file has the owner it had when you
trusted it (a record from before owners were kept: while the file is yours)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from envman.errors import UserError
from envman.project import trust as T
from envman.project.file import load_project

OTHER = 65534 if os.getuid() != 65534 else 65533
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="changing a file's owner needs root")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    root = tmp_path / "shared" / "proj"
    (root / "data").mkdir(parents=True)
    (root / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\nmounts = ["./data:/data"]\n'
                                      'command = ["python", "train.py"]\n')
    return root


def _trusted(root) -> bool:
    return T.project_trusted(load_project(root))


@needs_root
@pytest.mark.parametrize("at_trust,now", [("me", "me"), ("me", "other"), ("other", "other"), ("other", "me")])
def test_a_record_holds_exactly_while_the_file_has_the_owner_it_had(project, at_trust, now):
    uid = {"me": os.getuid(), "other": OTHER}
    f = project / "envman.toml"
    os.chown(f, uid[at_trust], -1)
    p = load_project(project)
    T.trust(p.real_file, p.digest, root=p.root)
    os.chown(f, uid[now], -1)
    assert _trusted(project) == (at_trust == now)


@needs_root
def test_a_deleted_folder_made_again_by_someone_else_with_the_same_file_is_not_trusted(project):
    text = (project / "envman.toml").read_bytes()
    p = load_project(project)
    T.trust(p.real_file, p.digest, root=p.root)
    assert _trusted(project)
    shutil.rmtree(project)
    (project / "data").mkdir(parents=True)
    (project / "envman.toml").write_bytes(text)  # the very bytes you trusted, at the very path
    os.chown(project / "envman.toml", OTHER, -1)
    os.chown(project, OTHER, -1)
    with pytest.raises(UserError) as e:
        T.require_trust(load_project(project))
    assert "its owner is not the one it had when you trusted it" in e.value.what
    assert e.value.fix == f"read it, then trust it: envman project trust {project / 'envman.toml'}"


@needs_root
@pytest.mark.parametrize("owner,believed", [("me", True), ("other", False)])
def test_a_record_without_an_owner_holds_only_for_a_file_of_yours(project, owner, believed):
    f = project / "envman.toml"
    p = load_project(project)
    path = T.trust_path()
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text(json.dumps({"schema": 1, "files": {p.real_file: {"sha256": p.digest, "trusted": "t",
                                                                     "roots": [str(project)]}}}))
    path.chmod(0o600)
    os.chown(f, os.getuid() if owner == "me" else OTHER, -1)
    assert _trusted(project) is believed


@pytest.mark.parametrize("uid", [None, True, "0", 1.0, [0]], ids=repr)
def test_a_record_whose_owner_is_not_a_number_holds_only_for_a_file_of_yours(project, uid):
    p = load_project(project)
    assert T.owner_changed(p.real_file, {"uid": uid}) is False  # the file is the test user's own


def test_trusting_records_the_owner(project):
    p = load_project(project)
    T.trust(p.real_file, p.digest, root=p.root)
    assert T.records()[p.real_file]["uid"] == os.stat(p.real_file).st_uid
