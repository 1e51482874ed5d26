"""The mount points of a BuildKit stack's RUN steps, made by an ``ADD`` of one tar before the
first RUN (envman.render.mountpoints): which paths, files or folders, their parents with standard
modes, one time, the same bytes for the same points; only BuildKit renders get it. No Docker
needed (tests/docker/test_reproducible_layers.py builds it)."""

from __future__ import annotations

import io
import tarfile

import pytest

from envman.errors import RenderError
from envman.render.dockerfile import render_stack
from envman.render.mountpoints import BUILDKIT_FILES, MOUNT_POINTS_FILE, mount_points, mount_points_tar
from envman.render.options import RenderOptions
from envman.render.imagepaths import SETTLED_TIME
from envman.render.steps import AddStep, BindMount, CacheMount, CopyStep, RunStep, SecretMount
from tests.unit.render.test_dockerfile import PROBE, instructions, make_stack


def _entries(data: bytes) -> list[tarfile.TarInfo]:
    return tarfile.open(fileobj=io.BytesIO(data)).getmembers()


STEPS = (
    CopyStep(("a",), "/b"),
    RunStep(("true",), (CacheMount("c", "/var/cache/envman/pip"), BindMount("envman/ca-bundle.crt", "/run/envman/ca.crt"),
                        BindMount("wheels", "/opt/envman/wheels"), SecretMount("s", "/root/.netrc"))),
    RunStep(("true",)),
)


def test_each_mount_target_is_a_file_or_a_folder_as_its_mount_makes_it():
    points = mount_points(STEPS, {"envman/ca-bundle.crt": b"pem", "wheels/x.whl": b"w"})
    assert points == {**{f: False for f in BUILDKIT_FILES}, "/var/cache/envman/pip": True,
                      "/run/envman/ca.crt": False, "/opt/envman/wheels": True, "/root/.netrc": False}


def test_the_tar_holds_each_point_and_its_parents_empty_with_one_time_and_standard_modes():
    data = mount_points_tar({"/etc/hosts": False, "/var/cache/envman/pip": True, "/root/.netrc": False,
                             "/tmp/x": True}, SETTLED_TIME)
    got = {m.name: (m.type, m.mode, m.size, m.mtime, m.uid, m.gid) for m in _entries(data)}
    d, f = tarfile.DIRTYPE, tarfile.REGTYPE
    t = SETTLED_TIME
    assert got == {
        "etc": (d, 0o755, 0, t, 0, 0), "etc/hosts": (f, 0o644, 0, t, 0, 0),
        "root": (d, 0o700, 0, t, 0, 0), "root/.netrc": (f, 0o644, 0, t, 0, 0),
        "tmp": (d, 0o1777, 0, t, 0, 0), "tmp/x": (d, 0o755, 0, t, 0, 0),
        "var": (d, 0o755, 0, t, 0, 0), "var/cache": (d, 0o755, 0, t, 0, 0),
        "var/cache/envman": (d, 0o755, 0, t, 0, 0), "var/cache/envman/pip": (d, 0o755, 0, t, 0, 0),
    }
    # parents before their children: an unpacker makes the folder first
    names = [m.name for m in _entries(data)]
    assert names == sorted(names)


def test_the_same_points_give_the_same_bytes_whatever_their_order():
    a = mount_points_tar({"/etc/hosts": False, "/var/x": True}, SETTLED_TIME)
    b = mount_points_tar({"/var/x": True, "/etc/hosts": False}, SETTLED_TIME)
    assert a == b
    assert mount_points_tar({"/etc/hosts": False}, SETTLED_TIME) != mount_points_tar({"/etc/hosts": False}, SETTLED_TIME + 1)


def test_a_file_that_is_another_points_folder_is_refused():
    with pytest.raises(ValueError, match="is a file and the folder"):
        mount_points_tar({"/run/envman": False, "/run/envman/ca.crt": False}, SETTLED_TIME)


@pytest.mark.parametrize("target", ["relative/path", "/a/../etc", "/a//b", "/a/", "/"])
def test_a_target_that_is_not_a_plain_absolute_path_is_refused(target):
    with pytest.raises(ValueError, match="not a plain absolute path"):
        mount_points((RunStep(("true",), (CacheMount("c", "/x"),)), RunStep(("true",), (SecretMount("s", target),))), {})


@pytest.mark.parametrize("archive", ["https://example.org/a.tar", "envman/a.tar.gz", "envman/a"])
def test_add_takes_a_tar_of_the_context_only(archive):
    with pytest.raises(RenderError):
        AddStep(archive, "/").text  # noqa: B018


def _ctx(builder: str, **options):
    return render_stack(make_stack(), RenderOptions(**options), probe=PROBE, builder=builder)


def test_a_buildkit_stack_adds_the_mount_points_of_its_run_steps_before_the_first_run(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n")
    ctx = _ctx("buildkit", ca_bundle=pem)
    steps = instructions(ctx.dockerfile)
    add = steps.index(("ADD", f"{MOUNT_POINTS_FILE} /"))
    first_run = next(i for i, (k, _) in enumerate(steps) if k == "RUN")
    assert [k for k, _ in steps[:add]] == ["FROM", "ARG", "ENV"] and add < first_run
    names = {m.name: m.isdir() for m in _entries(ctx.files[MOUNT_POINTS_FILE])}
    # every --mount target of the Dockerfile is there, as the right kind
    for _, value in steps:
        for flag in value.split():
            if flag.startswith("--mount="):
                opts = dict(o.split("=", 1) for o in flag[len("--mount="):].split(","))
                assert names[opts["target"].lstrip("/")] is (opts["type"] == "cache" or opts["source"] == "wheels"), opts
    assert {"etc/hosts", "etc/resolv.conf", "etc/hostname", "run/envman/ca-bundle.crt"} <= names.keys()
    assert names["run/envman/ca-bundle.crt"] is False


def test_a_classic_stack_has_no_mount_points_layer():
    ctx = _ctx("classic")
    assert MOUNT_POINTS_FILE not in ctx.files
    assert all(k != "ADD" for k, _ in instructions(ctx.dockerfile))


def test_the_mount_points_are_in_the_render_hash():
    ctx = _ctx("buildkit")
    files = dict(ctx.files)
    files[MOUNT_POINTS_FILE] = mount_points_tar({"/etc/hosts": False}, SETTLED_TIME)
    from envman.render.dockerfile import render_hash

    assert render_hash(files) != ctx.render_hash
