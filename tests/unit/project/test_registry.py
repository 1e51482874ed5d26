"""Tests of ``envman/project/registry.py``, moved unchanged from the former ``test_project.py``
(which tested several modules)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.project.file import load_project
from envman.project.registry import locate, lookup, read_registry, register, unregister, update_registry
from tests.unit.project.test_file import dirs, write_project  # noqa: F401 (shared with that file)


def test_register_lookup_remove(tmp_path):
    a = load_project(write_project(tmp_path / "a", 'stack = "torch-2.4"\nname = "a"\n', req=None))
    b = load_project(write_project(tmp_path / "b", 'stack = "torch-2.4"\nname = "b"\n', req=None))
    assert register(a) and register(b) and not register(a)
    assert read_registry() == {"a": tmp_path / "a", "b": tmp_path / "b"}
    assert lookup("b") == tmp_path / "b"
    assert locate("a", cwd=tmp_path / "b").name == "a"
    assert locate("./b", cwd=tmp_path).name == "b"
    with pytest.raises(UserError, match="did you mean a"):
        lookup("aa")
    assert unregister("a") == tmp_path / "a"
    assert list(read_registry()) == ["b"]
    with pytest.raises(UserError):
        unregister("a")


def test_name_taken_by_another_root_and_renames(tmp_path):
    a = load_project(write_project(tmp_path / "a", 'stack = "torch-2.4"\nname = "same"\n', req=None))
    other = load_project(write_project(tmp_path / "other", 'stack = "torch-2.4"\nname = "same"\n', req=None))
    register(a)
    with pytest.raises(UserError, match="already registered for"):
        register(other)
    (tmp_path / "a" / "envman.toml").write_text('stack = "torch-2.4"\nname = "renamed"\n')
    register(load_project(tmp_path / "a"))
    assert read_registry() == {"renamed": tmp_path / "a"}


@pytest.mark.parametrize("registered", [0, 5, 50])
def test_registering_resolves_no_root_registered_before(tmp_path, monkeypatch, registered):
    """One more registration costs the same however many projects are registered: it resolves
    only its own root and the entry under its name, never every root."""
    from envman.project.registry import update_registry

    update_registry(lambda projects: projects.update(
        {f"old{i}": (tmp_path / f"old{i}").resolve() for i in range(registered)}))
    a = load_project(write_project(tmp_path / "a", 'stack = "torch-2.4"\nname = "a"\n', req=None))
    resolved: list[Path] = []
    real = Path.resolve
    renamed = write_project(tmp_path / "a", 'stack = "torch-2.4"\nname = "renamed"\n', req=None)
    with monkeypatch.context() as m:
        m.setattr(Path, "resolve", lambda self, *a, **k: resolved.append(self) or real(self, *a, **k))
        assert register(a)
        assert register(load_project(renamed))  # a root under an older name is still renamed
    assert [r for r in resolved if r.name.startswith("old")] == []
    assert "a" not in read_registry() and read_registry()["renamed"] == (tmp_path / "a").resolve()
    assert len(read_registry()) == registered + 1


def test_a_registration_makes_no_path_of_the_roots_registered_before(tmp_path, monkeypatch):
    """The other entries stay strings while a registration reads, checks and writes the registry
    (a path object per root per registration was most of a registration with 1,000 projects):
    the paths made do not grow with the number registered."""
    import envman.project.registry as registry

    made: list[int] = []

    def count(*parts):
        made.append(1)
        return Path(*parts)

    def paths_made(registered: int) -> int:
        cfg = tmp_path / f"cfg{registered}"
        monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(cfg))
        update_registry(lambda projects: projects.update(
            {f"old{i}": (tmp_path / f"old{i}").resolve() for i in range(registered)}))
        a = load_project(write_project(tmp_path / f"a{registered}", 'stack = "torch-2.4"\nname = "a"\n', req=None))
        made.clear()
        with monkeypatch.context() as m:
            m.setattr(registry, "Path", count)
            assert register(a)
            assert not register(a)
        return len(made)

    assert paths_made(0) == paths_made(50) == paths_made(200)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1), st.text(min_size=1).map(lambda t: Path("/" + t)), max_size=6))
def test_the_registry_file_is_the_indented_json_dump_byte_for_byte(projects):
    import json

    from envman.project.registry import registry_text

    doc = {"schema": 1, "projects": {n: {"root": str(r)} for n, r in sorted(projects.items())}}
    assert registry_text(projects) == json.dumps(doc, indent=2, sort_keys=True) + "\n"


def test_corrupt_registry_is_one_line_user_error(tmp_path):
    reg = tmp_path / "config" / "projects.json"
    reg.parent.mkdir(parents=True)
    reg.write_text('{"schema": 1, "projects": {"a": ')
    with pytest.raises(UserError) as e:
        read_registry()
    assert str(reg) in e.value.line() and "envman project add" in e.value.line()


def test_crash_during_write_leaves_the_old_registry(tmp_path, monkeypatch):
    a = load_project(write_project(tmp_path / "a", 'stack = "torch-2.4"\nname = "a"\n', req=None))
    b = load_project(write_project(tmp_path / "b", 'stack = "torch-2.4"\nname = "b"\n', req=None))
    register(a)
    before = (tmp_path / "config" / "projects.json").read_bytes()

    def crash(src, dst):
        raise KeyboardInterrupt("killed between write and rename")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", crash)
        with pytest.raises(KeyboardInterrupt):
            register(b)
    assert (tmp_path / "config" / "projects.json").read_bytes() == before
    assert read_registry() == {"a": tmp_path / "a"}
    assert [p.name for p in (tmp_path / "config").iterdir() if p.suffix == ".tmp"] == []


def _start_writer(config: Path) -> tuple[int, int]:
    """A process (forked from this one) that rewrites a 200-project registry in ``config`` until
    it is killed; (its pid, a pipe that says "ready" once the first write is done)."""
    ready, say = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready)
            os.environ["ENVMAN_CONFIG_DIR"] = str(config)
            i = 0
            while True:
                i += 1

                def change(projects, i=i):
                    projects.clear()
                    for k in range(200):  # a registry big enough that a write takes a while
                        projects[f"p{k}"] = Path(f"/projects/{i}/{k}")

                update_registry(change)
                if i == 1:
                    os.write(say, b"ready\n")
        finally:
            os._exit(1)
    os.close(say)
    return pid, ready


def test_killing_envman_mid_write_never_corrupts_the_registry(tmp_path):
    for attempt in range(15):
        pid, ready = _start_writer(tmp_path / "config")
        with os.fdopen(ready) as said:
            assert said.readline().strip() == "ready"
        time.sleep(0.005 * (attempt % 5))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        projects = read_registry(tmp_path / "config" / "projects.json")
        assert len(projects) == 200
        assert len({str(r.parent) for r in projects.values()}) == 1  # one whole write, not a mix
    # the lock died with its holder: a new writer gets it at once
    update_registry(lambda p: p.clear(), tmp_path / "config" / "projects.json")
    assert read_registry(tmp_path / "config" / "projects.json") == {}
