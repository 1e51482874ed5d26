"""Parsed matrix files kept between invocations (envman.matrix.parsed): a kept parse is the parse,
exactly; any change of bytes, path or code is a miss; an entry in doubt is a miss and never runs
anything."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import envman.matrix.load as L
import envman.matrix.parsed as P
from envman.errors import MatrixError
from envman.config import matrix_files


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A private cache folder, the in-process cache emptied, and every real parse counted."""
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)
    monkeypatch.delenv("ENVMAN_PARSE_CACHE", raising=False)
    L._parse_bytes.cache_clear()
    calls: list[str] = []
    real = L._parse_fresh
    monkeypatch.setattr(L, "_parse_fresh", lambda file, data: calls.append(file) or real(file, data))
    yield calls
    L._parse_bytes.cache_clear()


def fresh(path: Path):
    L._parse_bytes.cache_clear()
    return L._parse_fresh(str(path), path.read_bytes())


@pytest.mark.parametrize("path", matrix_files(shipped=True), ids=lambda p: p.name)
def test_a_kept_parse_of_every_shipped_file_is_the_parse(counted, path):
    first = L.parse_file(path)
    L._parse_bytes.cache_clear()
    again = L.parse_file(path)
    assert counted == [str(path)]  # the second came from the kept parse
    assert again == first


def test_changed_bytes_a_moved_file_or_changed_code_are_misses(counted, tmp_path, monkeypatch):
    src = matrix_files(shipped=True)[0]
    a = tmp_path / "a.toml"
    a.write_bytes(src.read_bytes())
    L.parse_file(a)
    a.write_bytes(src.read_bytes() + b"\n# another byte\n")
    L._parse_bytes.cache_clear()
    L.parse_file(a)
    b = tmp_path / "b.toml"
    b.write_bytes(a.read_bytes())
    L._parse_bytes.cache_clear()
    L.parse_file(b)
    monkeypatch.setattr(P, "_code", ["another envman"])
    L._parse_bytes.cache_clear()
    L.parse_file(b)
    assert counted == [str(a), str(a), str(b), str(b)]


class Boom:
    def __reduce__(self):
        return (os.system, ("touch planted",))


@pytest.mark.parametrize("damage", ["foreign global", "not a pickle", "wrong shape", "group-writable", "symlink"])
def test_an_entry_in_doubt_is_a_miss_and_runs_nothing(counted, tmp_path, monkeypatch, damage):
    monkeypatch.chdir(tmp_path)
    src = matrix_files(shipped=True)[0]
    L.parse_file(src)
    (entry,) = (tmp_path / "cache" / "matrix").iterdir()
    if damage == "foreign global":
        entry.write_bytes(pickle.dumps(("cuda", Boom())))
    elif damage == "not a pickle":
        entry.write_bytes(b"\x80\x05junk")
    elif damage == "wrong shape":
        entry.write_bytes(pickle.dumps(["cuda"]))
    elif damage == "group-writable":
        entry.chmod(0o664)
    else:
        other = tmp_path / "other"
        other.write_bytes(entry.read_bytes())
        entry.unlink()
        entry.symlink_to(other)
    L._parse_bytes.cache_clear()
    result = L.parse_file(src)
    assert counted == [str(src), str(src)]  # parsed again
    assert result == fresh(src)
    assert not (tmp_path / "planted").exists()


def test_a_file_that_fails_to_parse_is_never_kept(counted, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = 1\nkind = "nonsense"\n')
    for _ in range(2):
        L._parse_bytes.cache_clear()
        with pytest.raises(MatrixError, match="key kind"):
            L.parse_file(bad)
    assert counted == [str(bad), str(bad)]
    assert not (tmp_path / "cache" / "matrix").exists() or list((tmp_path / "cache" / "matrix").iterdir()) == []


def test_the_folder_keeps_the_newest_entries_and_the_switch_turns_it_off(counted, tmp_path, monkeypatch):
    src = matrix_files(shipped=True)[0].read_bytes()
    monkeypatch.setattr(P, "MAX_ENTRIES", 3)
    for i in range(5):
        f = tmp_path / f"m{i}.toml"
        f.write_bytes(src)
        L.parse_file(f)
    folder = tmp_path / "cache" / "matrix"
    assert len(list(folder.iterdir())) == 3
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert {oct(e.stat().st_mode & 0o777) for e in folder.iterdir()} == {"0o600"}
    monkeypatch.setenv("ENVMAN_PARSE_CACHE", "0")
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "off"))
    L._parse_bytes.cache_clear()
    L.parse_file(tmp_path / "m4.toml")
    assert not (tmp_path / "off").exists()


@pytest.mark.parametrize("value", ["0", "false", "no", "OFF", " off "])
def test_the_full_path_still_reads_kept_parses_only_the_parse_switch_turns_them_off(counted, tmp_path, monkeypatch, value):
    """ENVMAN_RUN_CACHE=0 (the full path of run and build) parses nothing a kept parse answers: the
    key is the file's bytes and envman's code. ENVMAN_PARSE_CACHE with the same values turns it off."""
    f = tmp_path / "m.toml"
    f.write_bytes(matrix_files(shipped=True)[0].read_bytes())
    L.parse_file(f)
    assert counted == [str(f)]
    monkeypatch.setenv("ENVMAN_RUN_CACHE", value)
    L._parse_bytes.cache_clear()
    L.parse_file(f)
    assert counted == [str(f)]  # served by the kept parse
    monkeypatch.setenv("ENVMAN_PARSE_CACHE", value)
    L._parse_bytes.cache_clear()
    L.parse_file(f)
    assert counted == [str(f), str(f)]
    monkeypatch.setenv("ENVMAN_PARSE_CACHE", "1")  # anything else: on
    L._parse_bytes.cache_clear()
    L.parse_file(f)
    assert counted == [str(f), str(f)]


def test_envman_clean_removes_the_kept_parses_and_nothing_beside_them(counted, tmp_path, monkeypatch):
    from envman.run.clean import apply, plan as clean_plan

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    L.parse_file(matrix_files(shipped=True)[0])
    folder = tmp_path / "cache" / P.PARSED_FOLDER
    (tmp_path / "cache" / "mine.txt").write_text("keep")
    p = clean_plan()
    assert folder in p.paths
    apply(p)
    assert not folder.exists() and (tmp_path / "cache" / "mine.txt").exists()


def _global(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


#: A pickle that reaches os.system through builtins.getattr and a module attribute
#: (``datetime.sys.modules.get("os").system``), the shape any "allowed module" list invites.
GETATTR_CHAIN = (b"cbuiltins\ngetattr\n(cbuiltins\ngetattr\n(cbuiltins\ngetattr\n(cdatetime\nsys\nVmodules\ntRVget\ntR"
                 b"(Vos\ntRVsystem\ntR(Vtouch planted\ntR.")


def _every_attribute_but_the_allowed():
    import builtins
    import datetime
    import importlib

    import envman.matrix.model as model

    for mod in (model, importlib.import_module("packaging.version"), datetime, builtins):
        for name in dir(mod):
            if (mod.__name__, name) not in P.allowed_globals():
                yield mod.__name__, name


def test_only_the_row_classes_a_version_and_containers_are_ever_named(tmp_path, monkeypatch):
    """By rule: every attribute of the row module, packaging.version, datetime and builtins that
    is not a row class, Version or a container is refused by name (functions, imported modules,
    getattr, eval), and the getattr chain runs nothing."""
    import io

    import envman.matrix.model as model

    monkeypatch.chdir(tmp_path)
    refused = 0
    for module, name in _every_attribute_but_the_allowed():
        with pytest.raises(pickle.UnpicklingError):
            P._RowsUnpickler(io.BytesIO(_global(module, name) + b".")).load()
        refused += 1
    assert refused > 100
    with pytest.raises(pickle.UnpicklingError):
        P._RowsUnpickler(io.BytesIO(GETATTR_CHAIN)).load()
    assert not (tmp_path / "planted").exists()
    rows = {n for m, n in P.allowed_globals() if m == "envman.matrix.model"}
    assert rows == {n for n, o in vars(model).items() if isinstance(o, type) and o.__module__ == model.__name__}
    assert "Path" not in rows and "dataclass" not in rows  # what the module imports is not a row type
