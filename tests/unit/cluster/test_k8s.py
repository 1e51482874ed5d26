"""`envman export k8s`'s own logic (envman/cluster/k8s.py): the clone the Job's init container
makes (--git, its ref, the checked-out commit), and the variables file written privately, never
into the manifest."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from envman.cluster.k8s import K8sRequest, clone_source, export_env_file, head_commit
from envman.errors import UserError


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return root


def test_the_head_commit_of_a_checkout_is_its_full_sha(repo):
    sha = head_commit(repo)
    assert len(sha) == 40 and int(sha, 16) >= 0


def test_a_folder_without_a_commit_is_one_error_naming_git_ref(tmp_path):
    with pytest.raises(UserError) as e:
        head_commit(tmp_path)
    assert e.value.where == "--git" and "--git-ref" in e.value.fix


def test_the_clone_takes_the_given_ref_else_the_checked_out_commit(repo):
    proj = SimpleNamespace(root=repo)
    url = "https://git.example/org/proj.git"
    assert clone_source(proj, K8sRequest(git=url, git_ref="v1.2")) == (url, "v1.2")
    assert clone_source(proj, K8sRequest(git=url)) == (url, head_commit(repo))
    assert clone_source(proj, K8sRequest()) is None


@pytest.mark.parametrize("request_, where", [(K8sRequest(git_ref="main"), "--git-ref"),
                                             (K8sRequest(git_image="alpine/git:v2"), "--git-image")])
def test_a_clone_option_without_git_is_refused_naming_it(repo, request_, where):
    with pytest.raises(UserError) as e:
        clone_source(SimpleNamespace(root=repo), request_)
    assert e.value.where == where and "--git" in e.value.fix


@pytest.mark.parametrize("url, ref", [("http://git.example/x.git", "main"), ("https://git.example/x.git", "-x"),
                                      ("https://git.example/x.git", "a b"), ("ssh://git.example/x.git", "main")])
def test_a_clone_url_or_ref_that_is_not_safe_is_refused(repo, url, ref):
    with pytest.raises(UserError):
        clone_source(SimpleNamespace(root=repo), K8sRequest(git=url, git_ref=ref))


def test_the_variables_go_to_a_private_file_of_the_state_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    proj = SimpleNamespace(identity="demo-1234")
    assert export_env_file(proj, []) is None
    path = Path(export_env_file(proj, [("TOKEN", "s3cret value")]))
    assert path == tmp_path / "state" / "exports" / "demo-1234.env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "s3cret value" in path.read_text()
    sh = Path(export_env_file(proj, [("TOKEN", "x")], shell=True))
    assert sh.suffix == ".sh" and "export " in sh.read_text()
