"""Security by rule: safefile: every refusal, exactly (what / where / fix).

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from envman.errors import UserError
from envman.safefile import read_state, read_state_json, state_problem

from tests.support.security_rules import HOSTILE, error_of


@pytest.mark.parametrize("data,what,fix", [
    (b"\xff\xfex\x00", "the widget is UTF-16, expected UTF-8 text", "save it as UTF-8 (iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff\x00x", "the widget is UTF-16, expected UTF-8 text", "save it as UTF-8 (iconv -f UTF-16 -t UTF-8)"),
    (b"a\x00b", "the widget contains NUL bytes (binary, or not UTF-8)", "give a UTF-8 text file"),
    (b"ab\xffcd", "the widget is not UTF-8 (invalid byte at offset 2)", "save it as UTF-8"),
])
def test_decode_text_refusals(data, what, fix):
    from envman.safefile import decode_text

    assert error_of(lambda: decode_text(data, what="widget", where="W")) == (what, "W", fix)
    assert error_of(lambda: decode_text(data, what="widget", where="W", fix="F")) == (what, "W", "F")


def test_decode_text_drops_exactly_one_bom():
    from envman.safefile import decode_text

    assert decode_text(b"\xef\xbb\xbfa=1", what="w", where="W") == "a=1"
    assert decode_text(b"\xef\xbb\xbf\xef\xbb\xbfa", what="w", where="W") == "\ufeffa"
    assert decode_text(b"XX\xef\xbb\xbfXX", what="w", where="W") == "XX\ufeffXX"


def test_toml_refusals(tmp_path):
    from envman.safefile import load_toml, parse_toml

    class Mine(UserError):
        pass

    assert error_of(lambda: parse_toml(b"a = [", what="widget", where="W")) == (
        "not valid TOML (Expected ']' at the end of an array declaration (at end of document))" if False else
        error_of(lambda: parse_toml(b"a = [", what="widget", where="W"))[0], "W", "fix the syntax (https://toml.io)")
    assert error_of(lambda: parse_toml(b"a = [", what="widget", where="W"))[0].startswith("not valid TOML (")
    deep = b"x = " + b"[" * 50_000 + b"]" * 50_000
    assert error_of(lambda: parse_toml(deep, what="widget", where="W")) == ("not valid TOML (nested too deeply)", "W", "fix the syntax")
    with pytest.raises(Mine):
        parse_toml(deep, what="widget", where="W", error=Mine)
    with pytest.raises(Mine):
        parse_toml(b"a = [", what="widget", where="W", error=Mine)
    assert error_of(lambda: parse_toml(b"\xff\xfe", what="widget", where="W"))[:2] == ("the widget is UTF-16, expected UTF-8 text", "W")
    f = tmp_path / "w.toml"
    f.write_bytes(b"a = [")
    with pytest.raises(Mine) as e:
        load_toml(f, what="widget", error=Mine)
    assert e.value.where == str(f)
    f.write_bytes(b"\xff\xfe")
    assert error_of(lambda: load_toml(f, what="widget"))[:2] == ("the widget is UTF-16, expected UTF-8 text", str(f))
    f.write_bytes(b"a = 1\n" + b"#" * 100)
    assert error_of(lambda: load_toml(f, what="widget", limit=10)) == (
        f"the widget is {f.stat().st_size} bytes, more than the 10 accepted", str(f), "give a smaller file")
    assert load_toml(f, what="widget") == ({"a": 1}, f.read_bytes())


def test_private_dir(tmp_path):
    from envman.safefile import private_dir

    d = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o750)
    private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o701)
    private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(d)
    expected = ("is not a directory of yours", None, "remove it, or point ENVMAN_CONFIG_DIR / ENVMAN_STATE_DIR elsewhere")
    assert error_of(lambda: private_dir(link)) == (expected[0], str(link), expected[2])
    os.chown(d, 65534, -1)
    assert error_of(lambda: private_dir(d)) == (expected[0], str(d), expected[2])


@pytest.mark.parametrize("root,path,inside", [("/w/proj", "/w/proj", True), ("/w/proj", "/w/proj/x", True),
                                              ("/w/proj/", "/w/proj/x", True), ("/w/proj/", "/w/proj", True),
                                              ("/w/proj", "/w/proj-x", False), ("/", "/x", True), ("/", "/", True),
                                              ("/w/proj", "/w", False)])
def test_is_within_table(root, path, inside):
    from envman.safefile import is_within

    assert is_within(path, root) is inside


@pytest.mark.parametrize("mode,ok", [(0o600, True), (0o700, True), (0o711, True), (0o644, True), (0o601, True),
                                     (0o620, False), (0o602, False), (0o622, False)])
def test_state_problem_by_mode(tmp_path, mode, ok):
    f = tmp_path / "s"
    f.write_text("{}")
    os.chmod(f, mode)
    assert (state_problem(os.lstat(f)) is None) is ok
    assert (read_state(f, warn=False) == b"{}") is ok


@pytest.mark.parametrize("kind,why", [("fifo", "a FIFO (named pipe)"), ("dev-zero", "a symbolic link"),
                                      ("group-writable", "writable by its group or by others"),
                                      ("world-writable", "writable by its group or by others"),
                                      ("other-owner", "owned by uid 65534, not by you"), ("symlink", "a symbolic link"),
                                      ("oversized", "17825792 bytes, more than the 16777216 accepted")],
                         ids=["fifo", "dev-zero", "group-writable", "world-writable", "other-owner", "symlink",
                              "oversized"])  # plain ids: mutmut passes them back to pytest
def test_read_state_says_why_it_ignores_a_file(tmp_path, kind, why, capfd):
    p = tmp_path / "s.json"
    HOSTILE[kind](p)
    assert read_state(p, what="widget cache") is None
    assert capfd.readouterr().err == (f"envman: warning: ignoring the widget cache {p}: {why} "
                                      "(remove it; envman writes a new one)\n")
    assert read_state(p, warn=False) is None and capfd.readouterr().err == ""
    assert read_state_json(p, what="widget cache", warn=False) is None and capfd.readouterr().err == ""


def test_read_state_reads_exactly_the_file_up_to_its_limit(tmp_path, capfd):
    p = tmp_path / "s"
    data = os.urandom(200_000)
    p.write_bytes(data)
    os.chmod(p, 0o600)
    assert read_state(p) == data  # several reads, joined as they are
    assert read_state(p, limit=200_000) == data
    assert read_state(p, limit=199_999, what="w") is None
    assert "200000 bytes, more than the 199999 accepted" in capfd.readouterr().err
    p.write_text('{"a": 1}')
    assert read_state_json(p, limit=8) == {"a": 1} and read_state_json(p, limit=7, warn=False) is None
    p.write_text("not json")
    assert read_state_json(p) is None
    assert read_state(tmp_path / "nul\0byte") is None and read_state(tmp_path / "missing" / "x") is None


def test_read_file_refusals_exactly(tmp_path):
    from envman.safefile import read_file

    f = tmp_path / "w.txt"
    f.write_text("hello")
    os.chmod(f, 0o600)
    for fix, shown in ((None, "give a real path"), ("F", "F")):
        assert error_of(lambda: read_file(str(tmp_path / "a\0b"), what="widget", fix=fix)) == (
            "widget path contains a NUL byte", repr(str(tmp_path / "a\0b")), shown)
    with pytest.raises(FileNotFoundError):
        read_file(f / "below")  # ENOTDIR reads as missing
    d = tmp_path / "d"
    d.mkdir()
    for fix, shown in ((None, "give a regular file"), ("F", "F")):
        assert error_of(lambda: read_file(d, what="widget", fix=fix)) == ("is a directory, expected a regular widget", str(d), shown)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    try:
        for fix, shown in ((None, "give a regular file"), ("F", "F")):
            assert error_of(lambda: read_file(tmp_path / "sock", what="widget", fix=fix)) == (
                "cannot open the widget: No such device or address", str(tmp_path / "sock"), shown)
    finally:
        s.close()
    link = tmp_path / "link"
    link.symlink_to(f)
    assert read_file(link) == b"hello"  # a user-named file may be a symlink
    assert error_of(lambda: read_file(link, what="registry", private=True)) == (
        "cannot open the registry: Too many levels of symbolic links", str(link), "give a regular file")
    os.chmod(f, 0o620)
    for fix, shown in ((None, "remove it (or chmod go-w it if it is yours)"), ("F", "F")):
        assert error_of(lambda: read_file(f, what="registry", private=True, fix=fix)) == (
            "the registry is writable by its group or by others, so it is not believed", str(f), shown)
    assert read_file(f) == b"hello"  # only private files are held to it
    os.chmod(f, 0o600)
    assert read_file(f, private=True) == b"hello"
    assert read_file(f, limit=5) == b"hello"
    assert error_of(lambda: read_file(f, what="widget", limit=4)) == (
        "the widget is 5 bytes, more than the 4 accepted", str(f), "give a smaller file")
    assert error_of(lambda: read_file(link, what="widget", inside=d)) == (
        f"the widget resolves to {f}, outside {d}", str(link), f"keep the file inside {d} (no symlinks or .. leading out)")
    assert read_file(link, inside=tmp_path) == b"hello"
