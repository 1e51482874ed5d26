"""Security by rule: never-mount lists.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os

import pytest

from envman.errors import UserError
from envman.project import policy
from envman.project.file import load_project, parse_mount

from tests.support.security_rules import STACK


#: Every setting the never-mount policy reads from the environment, and the value that points it at
#: folder ``d`` (the policy protects ``d`` or a file in it, so mounting ``d`` is refused).
POLICY_SETTINGS = [
    ("HOME", "{d}"),
    ("DOCKER_HOST", "unix://{d}/engine.sock"),
    ("CONTAINER_HOST", "unix://{d}/engine.sock"),
    ("XDG_RUNTIME_DIR", "{d}"),
    ("SSH_AUTH_SOCK", "{d}/agent.sock"),
    ("ENVMAN_CONFIG_DIR", "{d}"),
    ("ENVMAN_STATE_DIR", "{d}"),
]


def _setting_folders(tmp_path, monkeypatch, *names: str) -> list:
    """Folders ``tmp_path/w/NAME`` holding the files a setting may name (an engine socket, an
    agent's socket, a sibling of it), with the settings that name sockets cleared."""
    for other in ("DOCKER_HOST", "CONTAINER_HOST", "SSH_AUTH_SOCK"):
        monkeypatch.delenv(other, raising=False)
    folders = [tmp_path / "w" / name for name in names]
    for d in folders:
        d.mkdir(parents=True)
        for name in ("engine.sock", "agent.sock", "sibling"):
            (d / name).write_text("")
    return folders


@pytest.mark.parametrize("var, value", POLICY_SETTINGS, ids=[v for v, _ in POLICY_SETTINGS])
def test_the_policy_follows_each_setting_when_it_changes_within_one_process(home, tmp_path, monkeypatch, var, value):
    """The policy is resolved once per environment: a change of any setting it reads gives the
    policy of the new setting, never the cached one of the old."""
    first, second = _setting_folders(tmp_path, monkeypatch, "first", "second")
    monkeypatch.setenv(var, value.format(d=first))
    assert policy.forbidden_reason(str(first)) is not None
    assert policy.forbidden_reason(str(second)) is None
    monkeypatch.setenv(var, value.format(d=second))
    assert policy.forbidden_reason(str(second)) is not None
    assert policy.forbidden_reason(str(first)) is None


#: (setting, its value, the path mounted, the refusal) over folder ``d``: what each setting protects,
#: and how the refusal names it.
SETTING_REFUSALS = [
    ("XDG_RUNTIME_DIR", "{d}", "{d}", "{d} is the user's runtime directory (engine sockets) ({d})"),
    ("XDG_RUNTIME_DIR", "{d}", "{d}/y", "{d}/y lies inside the user's runtime directory (engine sockets) ({d})"),
    ("SSH_AUTH_SOCK", "{d}/agent.sock", "{d}/sibling",
     "{d}/sibling lies inside the folder of your ssh agent's socket (it signs as you) ({d})"),
    ("ENVMAN_CONFIG_DIR", "{d}", "{d}", "{d} is envman's own configuration (trust records) ({d})"),
    ("ENVMAN_STATE_DIR", "{d}", "{d}/z", "{d}/z lies inside envman's own state ({d})"),
    ("DOCKER_HOST", "unix://{d}/engine.sock", "{d}", "{d} contains the container engine's socket ({d}/engine.sock)"),
]


@pytest.mark.parametrize("var, value, mounted, reason", SETTING_REFUSALS, ids=[f"{r[0]}-{i}" for i, r in enumerate(SETTING_REFUSALS)])
def test_each_setting_s_protected_path_is_refused_with_its_exact_reason(home, tmp_path, monkeypatch, var, value, mounted,
                                                                          reason):
    (d,) = _setting_folders(tmp_path, monkeypatch, "d")
    monkeypatch.setenv(var, value.format(d=d))
    assert policy.forbidden_reason(mounted.format(d=d)) == reason.format(d=d)


def test_an_agent_socket_directly_under_the_root_protects_itself_not_the_root(home, tmp_path, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", "/envman-test-agent.sock")
    assert policy.forbidden_reason("/envman-test-agent.sock") == (
        "/envman-test-agent.sock is named like a container engine socket")
    paths = [p.path for p in policy.protected_paths()]
    assert "/envman-test-agent.sock" in paths and "/" not in paths
    assert policy.forbidden_reason(str(home / "data")) is None


@pytest.mark.parametrize("name", policy.HOME_NAMES)
def test_every_home_entry_is_refused_itself_inside_through_a_symlink_and_as_a_parent(home, tmp_path, name):
    target = home / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir()
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(target)) is not None
    assert policy.forbidden_reason(str(target / "inside" / "x")) is not None
    link = tmp_path / "innocent"
    link.symlink_to(target)
    assert policy.forbidden_reason(str(link)) is not None
    if "/" in name:  # the folder that holds it holds a protected path
        assert policy.forbidden_reason(str(target.parent)) is not None
    with pytest.raises(UserError, match="is refused"):
        parse_mount(f"~/{name}:/t", base=None, where="f")


@pytest.mark.parametrize("name", ["git-credentials", "zshenv", "zprofile", "bash_login", "config/fish", "kaggle",
                                  "ssh", "netrc", "local/lib"])
def test_the_issue_s_named_gaps_are_in_the_list(name):
    assert "." + name in policy.HOME_NAMES or name in policy.HOME_NAMES


@pytest.mark.parametrize("path", policy.SYSTEM_PATHS)
def test_every_system_path_is_refused_with_its_contents_and_its_parents(home, path):
    for p in (path, path + "/x/y", path + "/"):
        assert policy.forbidden_reason(p) is not None, p
    assert policy.forbidden_reason(os.path.dirname(path)) is not None
    with pytest.raises(UserError):
        parse_mount(f"{path}:/t:ro", base=None, where="f")


@pytest.mark.parametrize("name", ["/var/lib/containerd", "/var/lib/docker", "/etc", "/usr", "/var/spool/cron"])
def test_named_system_paths_stay_listed(name):
    assert name in policy.SYSTEM_PATHS


@pytest.mark.parametrize("name", [n for n in policy.HOME_NAMES if not n.startswith(".local/lib")])
def test_a_hard_link_to_a_protected_file_is_refused_as_a_file_and_inside_a_folder(home, tmp_path, name):
    """A hard link has its own path but the protected file's inode: compared by (device, inode)."""
    target = home / name / "id_ed25519"
    target.parent.mkdir(parents=True)
    target.write_text("PRIVATE KEY\n")
    link = home / "data" / "key"
    os.link(target, link)
    policy._CACHE.clear()
    assert "hard link" in policy.forbidden_reason(str(link))
    assert "hard link" in policy.forbidden_reason(str(home / "data"))
    other = home / "data" / "plain"
    other.write_text("x")
    link.unlink()
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(home / "data")) is None


def test_a_hard_link_to_a_protected_single_file_is_refused(home):
    cred = home / ".git-credentials"
    cred.write_text("https://u:t@host\n")
    os.link(cred, home / "data" / "creds")
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(home / "data" / "creds")) is not None


def test_a_file_with_thousands_of_mounts_is_checked_in_linear_time(home, tmp_path):
    """Checked by counting protected-path resolutions, not by the clock: the protected paths are
    resolved once per process, not once per mount."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    from envman.project.file import MAX_MOUNTS

    mounts = ", ".join(f'"./d:/t{i}"' for i in range(MAX_MOUNTS))
    (root / "envman.toml").write_text(STACK + f"mounts = [{mounts}]\n")
    calls = []
    real = policy.protected_paths
    policy._CACHE.clear()
    try:
        policy.protected_paths = lambda *a, **k: calls.append(1) or real(*a, **k)  # type: ignore[assignment]
        p = load_project(root)
    finally:
        policy.protected_paths = real  # type: ignore[assignment]
    assert len(p.mounts) == MAX_MOUNTS and len(calls) == 1
