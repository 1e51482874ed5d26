"""Wheel digests and Requires-Dist kept per file: a second render of the same wheelhouse (in a
new process) hashes no wheel and opens no wheel's zip directory, and gives the render hash a
render without the cache gives; a wheel written since, a file too fresh to trust, a cache file
others can write and ``ENVMAN_RUN_CACHE=0`` all read the wheels as without the cache."""

from __future__ import annotations

import json
import os

import pytest

import envman.render.wheelfacts as wheelfacts
import envman.render.wheels as render_wheels
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from tests.support.index_server import make_wheel
from tests.unit.render.test_wheels import ORT, house, ort_stack  # noqa: F401 - the fixture

__all__ = ["house"]


@pytest.fixture
def counted(monkeypatch):
    """Counts the zip directories read and the wheel bytes hashed; each render runs as in a new
    process (a fresh :class:`WheelFacts`)."""
    calls = {"zip": 0, "hash": 0}
    real_requires = render_wheels.requires_dist

    def requires(path):
        calls["zip"] += 1
        return real_requires(path)

    class Hashlib:
        @staticmethod
        def sha256(data):
            calls["hash"] += 1
            import hashlib

            return hashlib.sha256(data)

    monkeypatch.setattr(render_wheels, "requires_dist", requires)
    monkeypatch.setattr(wheelfacts, "hashlib", Hashlib)
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)
    return calls


def render(house_dir, builder="classic"):  # noqa: F811
    wheelfacts.FACTS = wheelfacts.WheelFacts()  # a new process
    return render_stack(ort_stack(), RenderOptions(wheelhouse=house_dir), builder=builder)


def uncached_hash(house_dir, monkeypatch, builder="classic"):  # noqa: F811
    with monkeypatch.context() as m:
        m.setenv("ENVMAN_RUN_CACHE", "0")
        return render(house_dir, builder).render_hash


@pytest.mark.parametrize("builder", ["classic", "buildkit"])
def test_a_second_render_hashes_no_wheel_and_reads_no_zip_directory(house, counted, monkeypatch, builder):  # noqa: F811
    monkeypatch.setattr(wheelfacts, "SETTLED_NS", 0)
    first = render(house, builder)
    assert counted["zip"] > 0 and counted["hash"] > 0
    counted.update(zip=0, hash=0)
    second = render(house, builder)
    assert counted == {"zip": 0, "hash": 0}
    assert second.render_hash == first.render_hash == uncached_hash(house, monkeypatch, builder)
    assert second.files == first.files  # the bytes are still read: a build sends them
    assert oct(os.stat(wheelfacts._path()).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("change", ["same size", "other size", "replaced"])
def test_a_wheel_written_since_is_read_and_hashed_again(house, counted, monkeypatch, change):  # noqa: F811
    monkeypatch.setattr(wheelfacts, "SETTLED_NS", 0)
    before = render(house).render_hash
    wheel = house / ORT
    data = make_wheel(ORT, ["coloredlogs", "Numpy>=1.21.6", "protobuf", "humanfriendly"])[0]
    if change == "same size":
        old = wheel.read_bytes()
        data = (data + b"\0" * len(old))[: len(old)] if len(data) < len(old) else data[: len(old)]
        st = wheel.stat()
        wheel.write_bytes(data)
        os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back: the change time is not
    elif change == "other size":
        wheel.write_bytes(data + b"\0")
    else:
        tmp = house / ".new"
        tmp.write_bytes(data)
        os.replace(tmp, wheel)
    counted.update(zip=0, hash=0)
    after = render(house)
    assert counted["hash"] >= 1
    assert after.files[f"wheels/{ORT}"] == wheel.read_bytes()
    assert after.render_hash == uncached_hash(house, monkeypatch) != before


def test_a_file_changed_just_now_is_never_kept(house, counted):  # noqa: F811
    render(house)  # every wheel of the fixture was written a moment ago
    kept = json.loads(open(wheelfacts._path()).read())["wheels"] if os.path.exists(wheelfacts._path()) else {}
    assert all(set(entry) == {"sig"} for entry in kept.values())
    counted.update(zip=0, hash=0)
    render(house)
    assert counted["zip"] > 0 and counted["hash"] > 0


def test_a_cache_file_others_can_write_is_not_believed(house, counted, monkeypatch):  # noqa: F811
    monkeypatch.setattr(wheelfacts, "SETTLED_NS", 0)
    good = render(house).render_hash
    path = wheelfacts._path()
    data = json.loads(open(path).read())
    for entry in data["wheels"].values():
        entry["sha256"] = "0" * 64
    with open(path, "w") as fh:
        json.dump(data, fh)
    os.chmod(path, 0o666)
    assert render(house).render_hash == good
    # and the next write replaces it with the user's own file, digests as they are
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert "0" * 64 not in open(path).read()


def test_envman_run_cache_0_keeps_nothing(house, counted, monkeypatch):  # noqa: F811
    monkeypatch.setattr(wheelfacts, "SETTLED_NS", 0)
    monkeypatch.setenv("ENVMAN_RUN_CACHE", "0")
    render(house)
    assert not os.path.exists(wheelfacts._path())
