"""Security by rule: the issue's surviving mutants.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError

from tests.support.cli import run_envman

from tests.support.security_rules import STACK, cli_env, pullable, slurm_job


@given(st.from_regex(r"/[a-z]{1,6}(/[a-z]{1,6}){0,2}", fullmatch=True), st.from_regex(r"[a-z0-9._-]{1,4}", fullmatch=True))
@settings(max_examples=200, deadline=None)
def test_inside_means_the_root_or_below_it_never_a_sibling_sharing_a_prefix(root, tail):
    from envman.safefile import is_within

    assert is_within(root, root) and is_within(root + "/" + tail, root)
    assert not is_within(root + tail, root)  # /w/proj-x is not inside /w/proj
    assert not is_within(os.path.dirname(root) or "/", root) or root == "/"


@pytest.mark.parametrize("case", ["group-writable", "world-writable", "other-owner", "dir-writable-no-sticky",
                                  "dir-other-owner"])
def test_a_project_file_others_can_change_is_not_the_user_s_own(home, tmp_path, case):
    from envman.project.file import find_project_file, unsafe_reason

    d = tmp_path / "w" / "proj"
    d.mkdir(parents=True)
    f = d / "envman.toml"
    f.write_text(STACK)
    os.chmod(f, 0o644)
    assert unsafe_reason(f) is None and find_project_file(d) == f
    {"group-writable": lambda: os.chmod(f, 0o664), "world-writable": lambda: os.chmod(f, 0o646),
     "other-owner": lambda: os.chown(f, 65534, -1), "dir-writable-no-sticky": lambda: os.chmod(d, 0o777),
     "dir-other-owner": lambda: os.chown(d, 65534, -1)}[case]()
    assert unsafe_reason(f) is not None
    with pytest.raises(UserError, match="was not used"):
        find_project_file(d)
    if case == "dir-writable-no-sticky":
        os.chmod(d, 0o1777)  # a sticky directory (like /tmp): others cannot replace the file
        assert unsafe_reason(f) is None


@pytest.mark.parametrize("root", ["~", "/", "/etc/x", "~/.ssh", "~/.config/fish"])
def test_a_project_root_that_is_protected_is_refused(home, root):
    from envman.project.file import ProjectConfig
    from envman.run.prepare import check_project_root

    path = Path(root.replace("~", str(home)))
    path.mkdir(parents=True, exist_ok=True) if str(path).startswith(str(home)) else None
    with pytest.raises(UserError, match="cannot be mounted"):
        check_project_root(ProjectConfig(name="p", root=path, file=path / "envman.toml"))
    (home / "code" / "p").mkdir(parents=True)
    check_project_root(ProjectConfig(name="p", root=home / "code" / "p", file=home / "code" / "p" / "envman.toml"))


def test_pull_takes_the_digest_it_is_given(home):
    from envman.images.remote import Registry, pull_stack
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.support.fake_engine import FakeEngine

    stack = resolve(load_matrix(), "torch-2.4-cpu")
    engine = FakeEngine()
    image_id = pullable(engine, stack, "c" * 64)
    wanted = engine.registry_digest(f"reg.example:5000/envman/{stack.name}:latest")
    engine.registry[f"reg.example:5000/envman/{stack.name}:latest"] = engine.add_image()  # :latest moved since
    pulled = pull_stack(engine, stack, Registry("reg.example:5000"), digest=wanted, allow_http=True,
                        render_hashes=frozenset({"c" * 64}))
    assert pulled.digest == wanted and pulled.image_id == image_id and pulled.ref.endswith("@" + wanted)


@pytest.mark.parametrize("status", ["fail", "untested"])
def test_a_failed_or_missing_verdict_is_never_pushed(home, status):
    from envman.images.remote import Registry, push_stack
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.support.fake_engine import FakeEngine

    stack = resolve(load_matrix(), "torch-2.4-cpu")
    engine = FakeEngine()
    layers_id = engine.add_image(f"envman/{stack.name}:latest")
    from envman import labels as L
    from envman.engine.api import ImageInfo
    from envman.images.store import rootfs_digest

    info = engine.inspect_image(layers_id)
    labels = L.SmokeVerdict(status=status, at=1, rootfs=rootfs_digest(info)).to_labels() if status != "untested" else {}
    engine._images[layers_id] = ImageInfo(layers_id, labels=labels, layers=info.layers)
    with pytest.raises(UserError, match="smoke verdict"):
        push_stack(engine, stack, Registry("127.0.0.1:5000"))
    assert engine.pushed == []


def test_the_builder_label_survives_another_user_s_smoke_test(home, monkeypatch):
    from envman import labels as L
    from envman.images import store
    from tests.support.fake_engine import FakeEngine

    engine = FakeEngine()
    built = engine.add_image("envman/s:cand", labels={**L.builder_labels(1001, "alice"), L.NAME: "s"})
    monkeypatch.setattr(store, "current_user", lambda: (1002, "bob"))
    new_id = store.record_verdict(engine, "s", {"overall": "pass", "image_id": built, "reason": "ok"})
    got = L.parse(engine.inspect_image(new_id).labels)
    assert (got.built_by_uid, got.built_by_user) == (1001, "alice")
    assert L.parse_smoke(engine.inspect_image(new_id).labels).by_user == "bob"


def test_an_untrusted_file_is_never_submitted_to_slurm(home, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text(STACK + 'command = ["python", "t.py"]\n[environment]\nK = "v"\n')
    r = run_envman(["submit", str(root), "--dry-run"], env=cli_env(tmp_path))
    assert r.returncode == 2 and "not trusted" in r.stderr and r.stdout == "", r.stderr


@pytest.mark.parametrize("gpus", [0, 1])
def test_apptainer_never_mounts_the_host_home(tmp_path, gpus):
    import shlex
    from dataclasses import replace

    from envman.cluster.slurm import Resources, render_script

    spec = replace(slurm_job("apptainer", tmp_path), resources=Resources(gpus=gpus))
    ex = next(shlex.split(line) for line in render_script(spec).splitlines() if line.startswith("apptainer "))
    assert "--no-home" in ex and ex.index("--no-home") < ex.index(spec.image)
    pyxis = next(shlex.split(line) for line in render_script(replace(spec, runtime="pyxis")).splitlines()
                 if line.startswith("srun "))
    assert "--no-container-mount-home" in pyxis


@pytest.mark.parametrize("pin_how", [None, "major"])
@pytest.mark.parametrize("prev_cuda,new_major,expected", [("12.8", 13, "13.0"), ("12.8", 12, "12.8"), ("11.8", 12, "12.0")])
def test_matrix_update_never_gives_a_new_cuda_major_the_previous_row_s_cuda(pin_how, prev_cuda, new_major, expected):
    """The first release of a framework on a new CUDA major inherits nothing from the older one."""
    from packaging.version import Version

    from envman.matrix.update import RowBuilder
    from envman.matrix.wheels import CudaPins, Pin

    prev = type("Row", (), {"cuda": Version(prev_cuda), "cudnn": "9", "framework": "torch", "version": Version("2.8.0"),
                            "variant": "cu128"})()
    pin = Pin(str(new_major), pin_how, f"nvidia-cuda-runtime-cu{new_major}") if pin_how else None
    rb = RowBuilder("torch", Version("2.9.0"), f"cu{new_major}0")
    rb.cuda(CudaPins(pin, None, new_major), type("Md", (), {"url": "https://x/y.whl"})(), prev)
    assert rb.data["cuda"] == expected and "cuda" in rb.unconfirmed
