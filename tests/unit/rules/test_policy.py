"""Security by rule: policy: the homes taken from passwd, engine sockets in folders, symlinks in mounted folders.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.project import policy
from envman.project.file import load_project
from envman.safefile import state_problem

from tests.support.security_rules import REQ_PIECES, error_of, is_refused, pip_reads_a_redirect, trusted_project


def test_the_homes_of_people_are_protected_not_those_of_system_accounts(home, monkeypatch):
    import pwd

    entries = [(0, "/root-like"), (999, "/srv/system"), (1000, "/home/first"), (59999, "/home/last"),
               (60000, "/home/nobody-range"), (65534, "/nonexistent"), (1001, "/"), (1002, "/nonexistent")]
    fake = [pwd.struct_passwd(("u", "x", uid, uid, "", d, "/bin/sh")) for uid, d in entries]
    monkeypatch.setattr(pwd, "getpwall", lambda: fake)
    homes = policy._homes()
    assert {"/root-like", "/home/first", "/home/last", str(home)} <= set(homes)
    assert not {"/srv/system", "/home/nobody-range", "/", "/nonexistent"} & set(homes)


def test_engine_sockets_in_a_folder_by_name_and_type(home, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "docker.sock").write_text("not a socket")  # a regular file by that name
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "agent"))  # a socket by another name
    try:
        assert policy._engine_socket_inside(str(d)) is None
        real = tmp_path / "run"
        real.mkdir()
        s2 = socket.socket(socket.AF_UNIX)
        s2.bind(str(real / "engine"))
        try:
            (d / "docker.sock").unlink()
            (d / "docker.sock").symlink_to(real / "engine")  # a link named like one, to a socket
            assert policy._engine_socket_inside(str(d)) == str(d / "docker.sock")
        finally:
            s2.close()
    finally:
        s.close()


def test_a_symlink_inside_a_mounted_folder_exposes_nothing_and_is_allowed(home, tmp_path):
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    os.link(home / ".ssh" / "id_ed25519", home / ".ssh" / "id_ed25519.bak")  # two names, one inode
    data = home / "data" / "set"
    data.mkdir(parents=True)
    (data / "keys").symlink_to(home / ".ssh")  # the container sees a dangling link, not the key
    (data / "key").symlink_to(home / ".ssh" / "id_ed25519")
    policy._CACHE.clear()
    assert policy.forbidden_reason(str(data)) is None


def test_expand_user():
    assert policy.expand_user("~") == os.path.expanduser("~")
    assert policy.expand_user("~/x") == os.path.expanduser("~") + "/x"
    assert policy.expand_user("/a/~b") == "/a/~b"
    with pytest.raises(ValueError) as e:
        policy.expand_user("~root/x")
    assert str(e.value) == "only ~ or ~/path (your own home) may be used, not ~user"


def test_state_problem_names_a_socket_and_odd_roots(tmp_path):
    from envman.safefile import is_within

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    try:
        assert state_problem(os.lstat(tmp_path / "sock")) == "a socket"
    finally:
        s.close()
    assert not is_within("/w/proj/a", "/w/projX") and is_within("/w/projX/a", "/w/projX/")


def test_trust_records_survive_odd_entries_and_legacy_roots(home, tmp_path):
    from envman.project import trust as T
    from envman.project.trust import require_trust

    f = tmp_path / "t.json"
    f.write_text(json.dumps({"schema": 1, "files": {"/a/envman.toml": "not a record", "/b/envman.toml": {"sha256": 1},
                                                    "/c/envman.toml": {"sha256": "c" * 64}}}))
    os.chmod(f, 0o600)
    assert T.records(f) == {"/c/envman.toml": {"sha256": "c" * 64}}
    T.trust("/c/envman.toml", "c" * 64, f, root="/elsewhere")  # the legacy record's own directory stays trusted
    assert json.loads(f.read_text())["files"]["/c/envman.toml"]["roots"] == ["/c", "/elsewhere"]
    good = trusted_project(tmp_path, "ports = [1]\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "envman.toml").symlink_to(good / "envman.toml")
    third = tmp_path / "third"
    third.mkdir()
    (third / "envman.toml").symlink_to(good / "envman.toml")
    T.trust(str(good / "envman.toml"), load_project(good).digest, root=third)
    p = load_project(other)
    with pytest.raises(UserError) as e:
        require_trust(p)
    assert e.value.where == str(other / "envman.toml")
    assert f"trusted only as the project file of {good}, {third}" in e.value.what


def test_a_private_file_read_never_waits_on_a_fifo(tmp_path):
    from envman.safefile import read_file

    p = tmp_path / "projects.json"
    os.mkfifo(p)
    result: list = []

    def read():
        try:
            read_file(p, what="registry", private=True)
        except UserError as exc:
            result.append(exc.what)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)  # a bound only so that a regression cannot hang the suite
    assert not t.is_alive() and result == ["is a FIFO (named pipe), expected a regular registry"]


def test_a_file_larger_than_its_size_says_is_cut_at_the_limit():
    """/proc files report size 0: the limit holds on what is read, not only on what fstat says."""
    from envman.safefile import read_file

    assert error_of(lambda: read_file("/proc/self/status", what="widget", limit=10)) == (
        "the widget is more than 10 bytes", "/proc/self/status", "give a smaller file")
    assert error_of(lambda: read_file("/proc/self/status", what="widget", limit=10, fix="F"))[2] == "F"
    assert b"Name:" in read_file("/proc/self/status", limit=1 << 20)


def test_each_protected_path_says_what_it_is(home, tmp_path, monkeypatch):
    for name in (".zshenv", ".ssh"):
        (home / name).mkdir()
    policy._CACHE.clear()
    real_home = os.path.realpath(home)
    assert policy.forbidden_reason("/etc") == "/etc is a host system directory (/etc)"
    assert policy.forbidden_reason(str(home)) == f"{real_home} is a home directory ({home})"
    assert policy.forbidden_reason(str(home / ".ssh")) == f"{real_home}/.ssh is a credentials file or folder ({home}/.ssh)"
    assert policy.forbidden_reason(str(home / ".zshenv")) == (
        f"{real_home}/.zshenv is a file a shell or a tool runs at start-up ({home}/.zshenv)")
    assert policy.forbidden_reason(str(home / ".ssh" / "x")) == (
        f"{real_home}/.ssh/x lies inside a credentials file or folder ({home}/.ssh)")
    for var in ("DOCKER_HOST", "CONTAINER_HOST"):
        sock = tmp_path / f"{var}-engine"
        prot = policy.protected_paths({var: f"unix://{sock}"})
        assert any(p.path == str(sock) and p.why == "the container engine's socket" for p in prot)
        assert not any(p.path == str(sock) for p in policy.protected_paths({}))
        monkeypatch.setenv(var, f"unix://{sock}")
        policy._CACHE.clear()
        assert policy.forbidden_reason(str(sock)) == f"{sock} is the container engine's socket ({sock})"


@given(st.lists(REQ_PIECES, min_size=1, max_size=12).map("".join))
@settings(max_examples=1500, deadline=None)
def test_no_requirements_file_pip_reads_as_a_redirect_is_accepted(text):
    """The rule, checked against pip's own parser: whatever envman accepts, pip reads as package
    requirements and the listed options only, whatever the quoting, escapes, tabs or joins."""
    if pip_reads_a_redirect(text):
        assert is_refused(text), repr(text)


@pytest.mark.parametrize("line", [
    '--pre "--index-url=http://evil.example/simple"', "--pre \\--extra-index-url=http://x", '--pre "-e" git+https://x/y',
    '--require-hashes "--trusted-host" evil.example', '--pre "-f" http://evil/links', "--pre '-ihttp://x'",
    "torch\t--index-url=http://x", "--pre --ind\\\nex-url=http://x", '--pre "unclosed', "--pre torch",
    "--hash",
])
def test_quoted_escaped_or_joined_options_are_refused(line):
    assert is_refused(line)
