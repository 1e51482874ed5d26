"""Security by rule: what is printed and written (mutation run).

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from envman.errors import UserError
from envman.project.file import load_project

from tests.support.security_rules import STACK, STATE, trusted_project


def test_the_trust_prompt_says_exactly_what_a_file_asks_for(home, tmp_path, monkeypatch):
    from envman.project.file import default_shm_size
    from envman.project.trust import require_trust, trust, trust_asks

    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "envman.toml").write_text(STACK + 'mounts = ["./d:/d", "/srv:/srv:ro"]\nports = [8888]\ncommand = ["python", "t.py"]\n'
                                      'gpus = "all"\nshm_size = "1t"\n[environment]\nK = "v"\n')
    monkeypatch.setattr("envman.project.file.host_ram", lambda: 2 * 1024**4)
    p = load_project(root)
    assert trust_asks(p) == [
        "mounts outside the project: /srv:/srv:ro", f"mounts: {root}/d:/d", "ports (127.0.0.1): 8888:8888",
        "environment: K", "command: python t.py", "gpus: all", f"shm_size: 1t (more than the default {default_shm_size()})"]
    with pytest.raises(UserError) as e:
        require_trust(p)
    assert e.value.what == "it is not trusted (new to you) and asks for " + "; ".join(trust_asks(p))
    assert e.value.fix == f"read it, then trust it: envman project trust {root}/envman.toml"
    trust(p.real_file, "0" * 64, root=p.root)
    with pytest.raises(UserError) as e:
        require_trust(p)
    assert e.value.what.startswith("it is not trusted (changed since you trusted it) and asks for mounts outside")
    (root / "envman.toml").write_text(STACK + f'shm_size = "{default_shm_size()}"\n')
    assert trust_asks(load_project(root)) == []  # the default itself asks for nothing


def test_a_foreign_file_asking_for_nothing_still_needs_trust(home, tmp_path):
    from envman.project.trust import require_trust

    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text(STACK)
    os.chmod(root / "envman.toml", 0o666)
    with pytest.raises(UserError) as e:
        require_trust(load_project(root))
    assert e.value.what == ("it is not trusted (new to you; others can write it (group/world-writable)) "
                            "and asks for nothing beyond a stack")


def test_the_trust_record_file(home, tmp_path, monkeypatch):
    import re as _re
    import time

    from envman.project import trust as T

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        root = trusted_project(tmp_path, "ports = [1]\n")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    path = T.trust_path()
    doc = json.loads(path.read_text())
    real = os.path.realpath(root / "envman.toml")
    entry = doc["files"][real]
    assert _re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["trusted"])
    import datetime as dt

    stamp = dt.datetime.strptime(entry["trusted"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert abs((dt.datetime.now(dt.timezone.utc) - stamp).total_seconds()) < 3600  # UTC, whatever the local zone
    assert path.read_text() == json.dumps(doc, indent=2) + "\n" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.with_name("trust.json.lock").exists()
    assert entry["roots"] == [os.path.realpath(root)] and set(entry) == {"sha256", "trusted", "roots", "uid"} and entry["uid"] == os.getuid()


def test_trust_records_in_another_file_and_legacy_records(home, tmp_path):
    from envman.project import trust as T

    other = tmp_path / "elsewhere" / "trust.json"
    T.trust("/x/p/envman.toml", "a" * 64, other, root="/x/p")
    assert T.is_trusted("/x/p/envman.toml", "a" * 64, other, root="/x/p")
    assert not T.is_trusted("/x/p/envman.toml", "a" * 64, root="/x/p")  # not in the default file
    assert not T.is_trusted("/x/p/envman.toml", "a" * 64, other, root="/x/q")
    assert T.untrust("/x/p/envman.toml", other) and not T.is_trusted("/x/p/envman.toml", "a" * 64, other)
    assert not T.untrust("/x/p/envman.toml", other)
    # a record written before trust was bound to directories: the file's own directory only
    other.write_text(json.dumps({"schema": 1, "files": {"/x/p/envman.toml": {"sha256": "a" * 64}}}))
    os.chmod(other, 0o600)
    assert T.is_trusted("/x/p/envman.toml", "a" * 64, other) and T.is_trusted("/x/p/envman.toml", "a" * 64, other, root="/x/p")
    assert not T.is_trusted("/x/p/envman.toml", "a" * 64, other, root="/x/q")
    other.write_text(json.dumps({"schema": 1, "files": {"/x/p/envman.toml": {"sha256": "a" * 64, "roots": [1]}}}))
    assert T.is_trusted("/x/p/envman.toml", "a" * 64, other) and not T.is_trusted("/x/p/envman.toml", "a" * 64, other, root="/x/q")


@pytest.mark.parametrize("entry", STATE, ids=[s[0] for s in STATE])
def test_the_warning_names_the_state_file(home, entry, capfd):
    name, path_fn, _good, reader = entry
    path = Path(path_fn())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    os.chmod(path, 0o666)
    reader()
    err = capfd.readouterr().err
    what = {"runs.json": "run-plan cache", "renders.json": "render cache", "pins.json": "state file pins.json",
            "trust.json": "trust record", "pushed.json": "push record", "report": "cached smoke report",
            "slurm job": "job record", "matrix-origins.json": "state file matrix-origins.json",
            "wheels.json": "wheelhouse cache", "buildkit-cli.json": "buildx probe cache"}[name]
    assert err == (f"envman: warning: ignoring the {what} {path}: writable by its group or by others "
                   "(remove it; envman writes a new one)\n")


@pytest.mark.parametrize("make,word", [(lambda p: p.mkdir(), "a directory"), (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
                                       ("socket", "a socket"), ("device", "a device")])
def test_read_file_names_what_is_in_the_way(tmp_path, make, word):
    from envman.safefile import read_text

    p = tmp_path / "thing"
    s = None
    if make == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
    elif make == "device":
        p = Path("/dev/null")
    else:
        make(p)
    try:
        with pytest.raises(UserError) as e:
            read_text(p, what="widget file", fix="give a widget")
    finally:
        if s:
            s.close()
    assert e.value.where == str(p) and e.value.fix == "give a widget"
    assert e.value.what in (f"is {word}, expected a regular widget file", "cannot open the widget file: No such device or address")


def test_read_text_names_the_file_in_decoding_errors(tmp_path):
    from envman.safefile import read_text

    p = tmp_path / "w.txt"
    p.write_bytes("x".encode("utf-16"))
    with pytest.raises(UserError) as e:
        read_text(p, what="widget file", fix="give a widget")
    assert (e.value.what, e.value.where, e.value.fix) == ("the widget file is UTF-16, expected UTF-8 text", str(p),
                                                          "give a widget")
    p.write_bytes(b"\xff\x00")
    with pytest.raises(UserError) as e:
        read_text(p, what="widget file")
    assert e.value.what == "the widget file is UTF-16, expected UTF-8 text" or "NUL" in e.value.what
