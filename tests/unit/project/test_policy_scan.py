"""What a mounted folder holds: Unix sockets at any depth (an ssh agent, an X server, an engine),
hard links to protected files however large the other protected folders are, each folder looked
at once however often a file mounts it, and a bound on how many mounts one file may ask for."""

from __future__ import annotations

import os
import socket

import pytest

from envman.errors import UserError
from envman.project import policy
from envman.project.file import MAX_MOUNTS, load_project
from tests.support.security_rules import private_home


@pytest.fixture
def home(tmp_path, monkeypatch):
    yield private_home(tmp_path, monkeypatch, unset=("SSH_AUTH_SOCK",))
    policy._CACHE.clear()


class _Listed:
    """``os.scandir`` of a folder with its entries in name order, so a scan's order is known."""

    def __init__(self, path, scandir):
        with scandir(path) as it:
            self.entries = sorted(it, key=lambda e: e.name)

    def __enter__(self):
        return iter(self.entries)

    def __exit__(self, *exc):
        return False


def _socket(path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    return s


@pytest.mark.parametrize("depth", [0, 1, 2, 4])
def test_a_folder_with_a_unix_socket_at_any_depth_is_refused(tmp_path, home, depth):
    top = tmp_path / "shared"
    d = top.joinpath(*[f"d{i}" for i in range(depth)])
    d.mkdir(parents=True)
    for i in range(50):  # ordinary files beside it
        (top / f"f{i}").write_text("x")
    s = _socket(d / "agent.1234")
    try:
        why = policy.forbidden_reason(str(top))
        assert why is not None and "Unix socket" in why and "agent.1234" in why
        assert policy.forbidden_reason(str(tmp_path / "elsewhere")) is None
    finally:
        s.close()


def test_the_folder_of_the_ssh_agent_is_protected(tmp_path, home, monkeypatch):
    agent_dir = tmp_path / "ssh-XYZ"
    agent_dir.mkdir()
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent_dir / "agent.99"))
    policy._CACHE.clear()
    assert "ssh agent" in policy.forbidden_reason(str(agent_dir))
    assert policy.forbidden_reason(str(tmp_path)) is not None  # a parent of it


def test_a_hard_link_to_a_key_is_found_whatever_fills_the_other_protected_folders(home):
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("PRIVATE KEY\n")
    site = home / ".local" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for i in range(policy.HARDLINK_SCAN_LIMIT + 100):  # an ordinary pip install --user has more
        (site / f"f{i}").write_text("")
    os.link(key, home / "data" / "key")
    policy._CACHE.clear()
    assert "hard link" in policy.forbidden_reason(str(home / "data" / "key"))
    assert "hard link" in policy.forbidden_reason(str(home / "data"))


def test_a_folder_mounted_many_times_is_looked_at_once(home, tmp_path, monkeypatch):
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("k")  # so the hard-link scan is on
    root = tmp_path / "proj"
    (root / "big").mkdir(parents=True)
    for i in range(2000):
        (root / "big" / f"f{i}").write_text("")
    (root / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\nmounts = ['
                                      + ", ".join(f'"./big:/m{i}"' for i in range(MAX_MOUNTS)) + "]\n")
    scans = []
    real_scandir = os.scandir
    monkeypatch.setattr(policy.os, "scandir", lambda p: scans.append(p) or real_scandir(p))
    policy._CACHE.clear()
    project = load_project(root)
    assert len(project.mounts) == MAX_MOUNTS
    assert sum(1 for p in scans if str(p).endswith("big")) <= 2  # the engine-socket look and one scan


def test_more_mounts_than_the_bound_is_one_line(home, tmp_path):
    root = tmp_path / "proj"
    (root / "d").mkdir(parents=True)
    (root / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\nmounts = ['
                                      + ", ".join(f'"./d:/m{i}"' for i in range(5000)) + "]\n")
    with pytest.raises(UserError, match=f"5000 mounts, more than {MAX_MOUNTS}"):
        load_project(root)


@pytest.mark.parametrize("name", [".local/share/docker", ".config/docker", ".Xauthority", ".local/share/jupyter",
                                  ".config/uv", ".conda", "miniconda3", ".nvm", ".pyenv", ".vscode-server"])
def test_the_red_team_s_gaps_are_in_the_list(name):
    assert name in policy.HOME_NAMES


@pytest.mark.parametrize("linked", [False, True])
def test_the_protected_folders_are_scanned_only_when_a_mount_holds_a_multiply_linked_file(home, tmp_path, monkeypatch,
                                                                                        linked):
    """The scan of the home's protected folders (for the inodes of their files) is the larger part
    of a run's own work in a full home: it is done only for a mount that holds a file with more
    than one link, the only kind it can answer for."""
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("PRIVATE KEY\n")
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    for i in range(20):
        (root / "src" / f"m{i}.py").write_text("x")
    if linked:
        os.link(root / "src" / "m0.py", root / "m0-again.py")  # two names, neither protected
    scanned = []
    real_scan = policy._file_ids
    monkeypatch.setattr(policy, "_file_ids", lambda *a: (scanned.append(a[0]), real_scan(*a))[1])
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(root)) is None
    assert policy.forbidden_reason(str(root / "src" / "m1.py")) is None
    assert (str(key.parent) in scanned) == linked and bool(scanned) == linked
    if linked:  # a file with two names, neither protected, is no hard link to a protected file
        assert policy.forbidden_reason(str(root / "m0-again.py")) is None


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 9])
def test_the_inode_scan_looks_at_exactly_its_budget_of_entries(tmp_path, budget):
    """The folder itself counts as one entry, then one per file, until the budget is spent."""
    top = tmp_path / "creds"
    top.mkdir()
    for i in range(6):
        (top / f"f{i}").write_text(str(i))
    out, left = {}, [budget]
    policy._file_ids(str(top), out, left)
    assert left == [max(0, budget - 7)] and len(out) == min(budget - 1, 6)
    for (dev, ino), path in out.items():  # each inode names a file that has it
        st = os.lstat(path)
        assert (st.st_dev, st.st_ino) == (dev, ino) and path.startswith(str(top) + "/")


def test_the_inode_scan_skips_what_it_cannot_read_and_goes_on(tmp_path, monkeypatch):
    top = tmp_path / "creds"
    for sub in ("a", "b", "c"):
        (top / sub).mkdir(parents=True)
        (top / sub / "key").write_text(sub)
    (top / "gone").write_text("x")
    os.link(top / "a" / "key", top / "a" / "key2")  # one inode, two names: the first one seen is kept
    real_lstat, real_scandir = os.lstat, os.scandir

    def lstat(p):
        if str(p).endswith("/gone"):
            raise FileNotFoundError(p)  # removed while the scan runs
        return real_lstat(p)

    def scandir(p):  # the stack pops "gone", "c", "c/key", then "b" (unreadable), then "a"
        if str(p).endswith("/b"):
            raise PermissionError(p)
        return _Listed(p, real_scandir)

    monkeypatch.setattr(policy.os, "lstat", lstat)
    monkeypatch.setattr(policy.os, "scandir", scandir)
    out, left = {}, [100]
    policy._file_ids(str(top), out, left)
    assert sorted(os.path.relpath(p, top) for p in out.values()) in (["a/key", "c/key"], ["a/key2", "c/key"])
    assert left == [100 - 7]  # top, a, b, c, a/key, a/key2, c/key: not "gone", nothing inside b


@pytest.mark.parametrize("limit,found", [(3, False), (4, False), (5, True), (6, True)])
def test_a_folder_is_opened_while_fewer_than_the_limit_of_entries_were_looked_at(tmp_path, monkeypatch, limit, found):
    top = tmp_path / "shared"
    (top / "d").mkdir(parents=True)
    for i in range(3):
        (top / f"f{i}").write_text("x")  # with d: 4 entries in the folder itself
    monkeypatch.setattr(policy, "HARDLINK_SCAN_LIMIT", limit)
    s = _socket(top / "d" / "agent.1")
    try:
        why = policy.forbidden_reason(str(top), policy.Policy.of([]))
    finally:
        s.close()
    assert (why == f"{top} holds a Unix socket ({top / 'd' / 'agent.1'}): an agent, a display or an engine answers there"
            if found else why is None)


def _reason_with_socket_listed_last(monkeypatch, top, name: str) -> str | None:
    """Why ``top`` may not be mounted, with a socket ``name`` made in it and folders listed in name
    order (so the socket comes after what the test put before it)."""
    real_scandir = os.scandir
    monkeypatch.setattr(policy.os, "scandir", lambda p: _Listed(p, real_scandir))
    s = _socket(top / name)
    try:
        return policy.forbidden_reason(str(top), policy.Policy.of([]))
    finally:
        s.close()


@pytest.mark.parametrize("before", ["a-folder", "a-link"])
def test_a_socket_listed_after_a_folder_or_a_symlink_is_still_found(tmp_path, monkeypatch, before):
    top = tmp_path / "shared"
    top.mkdir()
    if before == "a-folder":
        (top / before).mkdir()
    else:
        (top / before).symlink_to(tmp_path)
    why = _reason_with_socket_listed_last(monkeypatch, top, "b-agent")
    assert why == f"{top} holds a Unix socket ({top / 'b-agent'}): an agent, a display or an engine answers there"


def test_a_folder_s_finding_is_the_same_the_second_time_it_is_asked(tmp_path):
    top = tmp_path / "shared"
    top.mkdir()
    pol = policy.Policy.of([])
    s = _socket(top / "agent.1")
    try:
        first = policy.forbidden_reason(str(top), pol)
    finally:
        s.close()
    assert first is not None and policy.forbidden_reason(str(top), pol) == first  # from the scan made once


def test_a_hard_link_inside_a_folder_is_named_with_the_file_it_links_to(home):
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("PRIVATE KEY\n")
    os.link(key, home / "data" / "k")
    policy._CACHE.clear()
    data = os.path.realpath(home / "data")
    assert policy.forbidden_reason(str(home / "data")) == (
        f"{data} is or holds a hard link to a protected file ({data}/k → {os.path.realpath(key)})")


class _Unreadable:
    """A folder entry whose type cannot be read (it vanished while the folder was listed)."""

    def __init__(self, entry):
        self.path, self.name = entry.path, entry.name

    def is_dir(self, follow_symlinks=True):
        raise FileNotFoundError(self.path)


@pytest.mark.parametrize("fails", ["entry", "folder"])
def test_the_scan_goes_on_past_an_entry_or_a_folder_it_cannot_read(tmp_path, monkeypatch, fails):
    top = tmp_path / "shared"
    (top / "a").mkdir(parents=True)
    (top / "a" / "x").write_text("x")
    (top / "b").mkdir()
    real_scandir = os.scandir

    def scandir(p):
        if fails == "folder" and str(p).endswith("/a"):
            raise PermissionError(p)
        listed = _Listed(p, real_scandir)
        if fails == "entry":
            listed.entries = [_Unreadable(e) if e.name in ("a", "x") else e for e in listed.entries]
        return listed

    monkeypatch.setattr(policy.os, "scandir", scandir)
    s = _socket(top / "b" / "agent.1")  # in the folder listed after the one that fails
    try:
        why = policy.forbidden_reason(str(top), policy.Policy.of([]))
    finally:
        s.close()
    assert why == f"{top} holds a Unix socket ({top / 'b' / 'agent.1'}): an agent, a display or an engine answers there"


def test_an_engine_socket_listed_after_an_unreadable_one_is_still_named(tmp_path, monkeypatch):
    top = tmp_path / "run"
    top.mkdir()
    (top / "docker.sock").symlink_to(tmp_path / "gone")  # its stat fails
    why = _reason_with_socket_listed_last(monkeypatch, top, "podman.sock")
    assert why == f"{top} holds a container engine socket ({top / 'podman.sock'})"


def test_a_list_of_protected_paths_answers_as_the_policy_made_of_it(tmp_path):
    secret = tmp_path / "secret"
    (secret / "in").mkdir(parents=True)
    listed = [policy.Protected(str(secret), "a test secret")]
    for source in (secret, secret / "in", tmp_path, tmp_path / "other"):
        assert policy.forbidden_reason(str(source), listed) == policy.forbidden_reason(str(source), policy.Policy.of(listed))
    assert policy.forbidden_reason(str(secret / "in"), listed) == f"{secret / 'in'} lies inside a test secret ({secret})"


@pytest.mark.parametrize("name", [".netrc", ".pgpass", ".git-credentials"])
def test_a_hard_link_to_a_protected_file_is_that_file(home, tmp_path, name):
    """Same (device, inode) as a protected file: refused as that file, by its name in the list."""
    (home / name).write_text("secret\n")
    link = tmp_path / "elsewhere"
    os.link(home / name, link)
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(link)) == f"{link} is {policy.CREDENTIALS} ({home / name})"


def test_a_folder_with_the_inode_of_a_protected_path_s_parent_contains_it(tmp_path, monkeypatch):
    """A parent of a protected path reached by another path (a bind mount, another spelling on a
    case-insensitive file system) is found by (device, inode): here the other path is simulated."""
    secret = tmp_path / "a" / "secret"
    secret.mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.mkdir()
    real_ident = policy._ident
    monkeypatch.setattr(policy, "_ident", lambda p: real_ident(str(alias)) if p == str(tmp_path / "a") else real_ident(p))
    pol = policy.Policy.of([policy.Protected(str(secret), "a test secret")])
    assert policy.forbidden_reason(str(alias), pol) == f"{alias} contains a test secret ({secret})"


@pytest.mark.parametrize("name", policy.ENGINE_SOCKET_NAMES[:-2])  # the last two name folders
def test_every_engine_socket_file_name_is_refused_by_its_name_alone(tmp_path, name):
    path = tmp_path / name
    path.write_text("")  # a plain file, or nothing at all: the name is enough
    assert policy.forbidden_reason(str(path), policy.Policy.of([])) == f"{path} is named like a container engine socket"
    assert policy.forbidden_reason(str(tmp_path / "x" / name), policy.Policy.of([])) == (
        f"{tmp_path / 'x' / name} is named like a container engine socket")


def test_a_path_inside_a_folder_with_the_inode_of_a_protected_folder_lies_inside_it(tmp_path, monkeypatch):
    """The protected folder reached by another path (simulated as above): what lies in it is refused."""
    secret = tmp_path / "secret"
    secret.mkdir()
    alias = tmp_path / "alias"
    (alias / "x").mkdir(parents=True)
    pol = policy.Policy.of([policy.Protected(str(secret), "a test secret")])
    real_ident = policy._ident
    monkeypatch.setattr(policy, "_ident", lambda p: real_ident(str(secret)) if p == str(alias) else real_ident(p))
    assert policy.forbidden_reason(str(alias / "x"), pol) == f"{alias / 'x'} lies inside a test secret ({secret})"
