"""envman.project.lock by rule: the package-line grammar at its edges, every refusal whole, the
file's exact text, and each condition of a usable lock (docs/security.md, "Mutation testing")."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from hypothesis import given, settings, strategies as st

from envman.project import lock as K
from tests.support.refusal import refusal

H1, H2 = "a" * 64, "0123456789abcdef" * 4
BASE = "sha256:" + "c" * 64
FIX = "refresh it: envman lock --upgrade (or delete envman.lock)"


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


# --------------------------------------------------------------------------- the package-line grammar

NAME_CHARS = "abcXYZ019._-"


@given(st.text(alphabet="abcXYZ019", min_size=1, max_size=1), st.text(alphabet=NAME_CHARS, max_size=98),
       st.text(alphabet="abcXYZ019", min_size=1, max_size=1), st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
@settings(max_examples=100, deadline=None)
def test_every_name_of_the_grammar_is_a_pin_under_its_canonical_name(first, middle, last, sha):
    name = first + middle + last
    pin = K.parse_pin(f"{name}==1.0 --hash=sha256:{sha}", where="W")
    assert pin == K.Pin(K.canonical_name(name), "1.0", sha)


@pytest.mark.parametrize("name,canonical", [("Markdown_It.py", "markdown-it-py"), ("a--b__c..d", "a-b-c-d"),
                                            ("a-_.b", "a-b"), ("RICH", "rich"), ("x", "x")])
def test_canonical_names(name, canonical):
    assert K.canonical_name(name) == canonical


@pytest.mark.parametrize("n,ok", [(1, True), (2, True), (100, True), (101, False)])
def test_a_name_is_1_to_100_characters(n, ok):
    line = f"{'a' * n}==1 --hash=sha256:{H1}"
    assert (refusal(lambda: K.parse_pin(line, where="W")) if not ok else K.parse_pin(line, where="W").name) == (
        "a" * n if ok else ("UserError", f"package line {repr(line)[:120]} is not name==version --hash=sha256:<64 hex "
                                         "digits>", "W", FIX))


@pytest.mark.parametrize("n,ok", [(1, True), (64, True), (65, False)])
def test_a_version_is_1_to_64_characters(n, ok):
    line = f"rich=={'1' * n} --hash=sha256:{H1}"
    if ok:
        assert K.parse_pin(line, where="W").version == "1" * n
    else:
        assert refusal(lambda: K.parse_pin(line, where="W"))[1] == (
            f"package line {repr(line)[:120]} is not name==version --hash=sha256:<64 hex digits>")


@pytest.mark.parametrize("line", [None, 42, b"rich==1", ["rich==1"]])
def test_a_package_line_that_is_not_text_is_named_by_its_repr(line):
    assert refusal(lambda: K.parse_pin(line, where="W")) == (
        "UserError", f"package line {repr(line)[:120]} is not name==version --hash=sha256:<64 hex digits>", "W", FIX)


def test_pin_line_round_trips():
    pin = K.Pin("rich", "13.7.1", H2)
    assert pin.line() == f"rich==13.7.1 --hash=sha256:{H2}" and K.parse_pin(pin.line(), where="W") == pin


# --------------------------------------------------------------------------- a lock


def test_make_lock_sorts_keeps_one_of_each_and_hashes_the_requirements():
    a, b = K.Pin("b", "1", H1), K.Pin("a", "2", H2)
    lock = K.make_lock("s", BASE, "rich\n", [a, b, a])
    assert lock == K.Lock("s", BASE, K.requirements_sha256("rich\n"), (b, a))
    assert K.requirements_sha256("rich\n") == hashlib.sha256(b"rich\n").hexdigest()
    assert lock.requirements_text() == f"a==2 --hash=sha256:{H2}\nb==1 --hash=sha256:{H1}\n"


@pytest.mark.parametrize("other", [K.Pin("rich", "2", H1), K.Pin("rich", "1", H2)])
def test_a_second_different_pin_is_refused_whole(other):
    assert refusal(lambda: K.make_lock("s", BASE, "", [K.Pin("rich", "1", H1), other])) == (
        "UserError", "package rich is pinned twice with different versions or hashes", "envman.lock", FIX)


def _doc(**over):
    doc = {"version": 1, "stack": "torch-2.4-cpu", "base_image": BASE, "requirements_sha256": H1,
           "packages": [f"rich==1 --hash=sha256:{H2}"]}
    doc.update(over)
    return {k: v for k, v in doc.items() if v is not None}


def test_a_lock_document_is_read_field_by_field():
    assert K.parse_lock(_doc(), where="W") == K.Lock("torch-2.4-cpu", BASE, H1, (K.Pin("rich", "1", H2),))
    assert K.parse_lock(_doc(packages=[]), where="W").packages == ()


@pytest.mark.parametrize("over,what", [
    ({"extra": 1, "aaa": 2}, "unknown key 'aaa' in a lock file"),
    ({"version": 2}, "lock format version 2 is not 1"),
    ({"version": True}, "lock format version True is not 1"),
    ({"version": "1"}, "lock format version '1' is not 1"),
    ({"version": None}, "lock format version None is not 1"),
    ({"version": "v" * 50}, f"lock format version {repr('v' * 50)[:20]} is not 1"),
    ({"packages": ["rich"]}, "package line 'rich' is not name==version --hash=sha256:<64 hex digits>"),
    ({"stack": "Torch"}, "key stack: expected a stack name, got 'Torch'"),
    ({"stack": None}, "key stack: expected a stack name, got None"),
    ({"stack": 5}, "key stack: expected a stack name, got 5"),
    ({"base_image": "sha256:" + "c" * 63}, f"key base_image: expected an image id sha256:<64 hex>, got {repr('sha256:' + 'c' * 63)[:80]}"),
    ({"requirements_sha256": "x" * 100}, f"key requirements_sha256: expected 64 hex digits, got {repr('x' * 100)[:80]}"),
    ({"packages": None}, "key packages: expected a list of package lines"),
    ({"packages": "rich==1"}, "key packages: expected a list of package lines"),
    ({"packages": [f"rich==1 --hash=sha256:{H1}", f"rich==2 --hash=sha256:{H1}"]},
     "package rich is pinned twice with different versions or hashes"),
])
def test_every_lock_document_refusal_whole(over, what):
    doc = _doc(**over)
    got = refusal(lambda: K.parse_lock(doc, where="W"))
    assert got == ("UserError", what, "envman.lock" if "pinned twice" in what else "W", FIX)


def test_the_lock_text_exactly():
    lock = K.make_lock("torch-2.4-cpu", BASE, "rich\n", [K.Pin("rich", "1", H2), K.Pin("a", "2", H1)])
    assert K.lock_text(lock) == (
        "# Generated by envman from the project's requirements: do not edit. Refresh: envman lock --upgrade\n"
        "version = 1\n"
        'stack = "torch-2.4-cpu"\n'
        f'base_image = "{BASE}"\n'
        f'requirements_sha256 = "{K.requirements_sha256("rich" + chr(10))}"\n'
        "packages = [\n"
        f'    "a==2 --hash=sha256:{H1}",\n'
        f'    "rich==1 --hash=sha256:{H2}",\n'
        "]\n")


def test_write_then_read_is_the_same_lock_and_others_may_read_it(tmp_path):
    lock = K.make_lock("torch-2.4-cpu", BASE, "rich\n", [K.Pin("rich", "1", H2)])
    path = K.write_lock(tmp_path, lock)
    assert path == tmp_path / "envman.lock" == K.lock_path(tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644 and K.read_lock(tmp_path) == lock


def test_a_lock_that_is_not_toml_is_refused_at_its_path_with_the_lock_s_fix(tmp_path):
    (tmp_path / "envman.lock").write_text("packages = [\n")
    got = refusal(lambda: K.read_lock(tmp_path))
    assert got[0] == "UserError" and got[1].startswith("not valid TOML") and got[2:] == (str(tmp_path / "envman.lock"), FIX)
    (tmp_path / "envman.lock").write_bytes(b"a\xffb")
    assert refusal(lambda: K.read_lock(tmp_path)) == (
        "UserError", "the lock file is not UTF-8 (invalid byte at offset 1)", str(tmp_path / "envman.lock"), FIX)


def test_a_lock_that_is_not_a_regular_file_is_named_a_lock_file(tmp_path):
    os.mkfifo(tmp_path / "envman.lock")
    assert refusal(lambda: K.read_lock(tmp_path)) == (
        "UserError", "is a FIFO (named pipe), expected a regular lock file", str(tmp_path / "envman.lock"), FIX)


def test_a_lock_read_from_a_file_is_checked_as_a_document(tmp_path):
    (tmp_path / "envman.lock").write_text('version = 1\nstack = "s"\n')
    assert refusal(lambda: K.read_lock(tmp_path)) == (
        "UserError", "key base_image: expected an image id sha256:<64 hex>, got None", str(tmp_path / "envman.lock"), FIX)


@pytest.mark.parametrize("field", ["lock", "requirements", "stack", "base_image"])
def test_a_lock_is_usable_only_when_every_input_is_the_same(field):
    lock = K.make_lock("s", BASE, "rich\n", [])
    args = {"lock": lock, "requirements": "rich\n", "stack": "s", "base_image": BASE}
    assert K.usable(**args)
    args[field] = {"lock": None, "requirements": "rich>=2\n", "stack": "t", "base_image": "sha256:" + "d" * 64}[field]
    assert not K.usable(**args)


# --------------------------------------------------------------------------- pip's report


def _item(name="rich", version="1", **info):
    return {"metadata": {"name": name, "version": version}, "download_info": info}


@pytest.mark.parametrize("report", [{"install": "x"}, {"nothing": []}, [], None, "install"])
def test_a_report_without_an_install_list_is_refused_whole(report):
    assert refusal(lambda: K.pins_from_report(report, where="W")) == (
        "UserError", "pip's install report has no install list", "W", "use a stack image with pip >= 22.2")


@pytest.mark.parametrize("info,sha", [
    ({"archive_info": {"hashes": {"sha256": H1}}}, H1),
    ({"archive_info": {"hashes": {"sha256": H1}, "hash": f"sha256={H2}"}}, H1),  # the hashes table first
    ({"archive_info": {"hashes": {"sha256": "bad"}, "hash": f"sha256={H2}"}}, H2),  # else the legacy field
    ({"archive_info": {"hash": f"sha256={H2}"}}, H2),
    ({"archive_info": {"hashes": None, "hash": f"sha256={H2}"}}, H2),
])
def test_the_archive_hash_comes_from_hashes_else_the_legacy_field(info, sha):
    assert K.pins_from_report({"install": [_item(**info)]}, where="W") == [K.Pin("rich", "1", sha)]


@pytest.mark.parametrize("item", [
    _item(archive_info={"hash": f"md5={H1[:32]}"}),
    _item(archive_info={"hash": f"sha256={H1[:63]}"}),
    _item(archive_info={"hash": 5}),
    _item(archive_info=None),
    _item(dir_info={}),
    _item(version=None, archive_info={"hashes": {"sha256": H1}}),  # was locked as rich==None
    _item(name=None, archive_info={"hashes": {"sha256": H1}}),  # was locked as a package named "none"
    _item(version=1, archive_info={"hashes": {"sha256": H1}}),
    _item(archive_info={"hash": f"sha256={H1}={H2}"}),  # one hash, nothing after it
    {"metadata": ["rich", "1"], "download_info": {"archive_info": {"hashes": {"sha256": H1}}}},  # these crashed
    {"metadata": {"name": "rich", "version": "1"}, "download_info": "x"},
    {"metadata": {"name": "rich", "version": "1"}, "download_info": {"archive_info": [H1]}},
    {"metadata": {"name": "rich", "version": "1"}, "download_info": {"archive_info": {"hashes": [H1]}}},
    {"download_info": {"archive_info": {"hashes": {"sha256": H1}}}},
    "not a table", None,
])
def test_an_install_without_a_sha256_archive_hash_cannot_be_locked(item):
    name = item["metadata"]["name"] if isinstance(item, dict) and isinstance(item.get("metadata"), dict) else None
    assert refusal(lambda: K.pins_from_report({"install": [item]}, where="W")) == (
        "UserError", f"cannot lock {str(name)[:60]!r}: pip reports no version and sha256 archive hash for it", "W",
        "install it from an index or a wheel URL, not a directory or VCS checkout")


def test_a_long_name_is_cut_in_the_message():
    item = _item(name="n" * 200, dir_info={})
    assert refusal(lambda: K.pins_from_report({"install": [item]}, where="W"))[1].startswith(f"cannot lock {'n' * 60!r}:")
