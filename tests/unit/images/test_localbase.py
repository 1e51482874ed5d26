"""``envman base make``'s pure parts: the release, the mirror, the rows copied onto the base, the
matrix files written (they load back and validate) and the config edit. No engine needed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envman.errors import UserError
from envman.images import localbase as lb
from envman.images.aptsources import AptSource, archive_mirror, parse_deb822, parse_one_line
from envman.paths import matrices_dir

SHIPPED = sorted(matrices_dir().glob("*.toml"))
BOOKWORM = lb.release("bookworm")
REF = lb.base_ref(BOOKWORM)


def row(**kw):
    base = {"version": "2.7.1", "variant": "cu128", "cuda": "12.8", "python": ["3.11", "3.12"],
            "packages": ["torch==2.7.1"], "sass": ["8.0"], "source": ["x"], "status": "confirmed"}
    return {**base, **kw}


# --------------------------------------------------------------------------- releases


@pytest.mark.parametrize("name", ["bookworm", "debian12", "noble", "ubuntu24.04"])
def test_release_by_codename_or_os_name(name):
    assert name in (lb.release(name).codename, lb.release(name).os_name)


@pytest.mark.parametrize("name", ["bookworm; rm -rf /", "$(id)", "../etc", "Bookworm", "sid", "", "bookworm\n",
                                  "x" * 500])
def test_hostile_or_unknown_release_is_one_user_error(name):
    with pytest.raises(UserError) as exc:
        lb.release(name)
    msg = str(exc.value)
    assert "\n" not in msg and len(msg) < 400 and "bookworm" in msg  # names the releases it can make


def test_host_release_reads_os_release(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('ID=debian\nVERSION_CODENAME=trixie\nPRETTY_NAME="Debian GNU/Linux 13 (trixie)"\n')
    assert lb.host_release(f).os_name == "debian13"
    f.write_text('ID=ubuntu\nVERSION_CODENAME=trixie\n')  # codename of another distribution
    with pytest.raises(UserError):
        lb.host_release(f)
    with pytest.raises(UserError):
        lb.host_release(tmp_path / "missing")


# --------------------------------------------------------------------------- mirror


def test_archive_mirror_skips_pockets_and_unsafe_uris():
    sources = parse_one_line(
        "deb http://sec.example/debian-security bookworm-security main\n"
        "deb http://bad.example/$(id) bookworm main\n"
        "deb [signed-by=/k.gpg] http://arch.example/debian/ bookworm main contrib\n")
    assert archive_mirror(sources) == "http://arch.example/debian"
    assert archive_mirror(sources, "trixie") is None
    deb822 = parse_deb822("Types: deb\nURIs: http://a.example/debian\nSuites: trixie trixie-updates\nComponents: main\n")
    assert archive_mirror(deb822, "trixie") == "http://a.example/debian"


def test_mirror_for_another_release_of_the_host_distribution():
    sources = [AptSource("http://arch.example/debian", ("bookworm",), ("main",))]
    assert lb.mirror_for(lb.release("trixie"), BOOKWORM, sources) == "http://arch.example/debian"
    with pytest.raises(UserError) as exc:
        lb.mirror_for(lb.release("noble"), BOOKWORM, sources)  # Ubuntu is not in a Debian archive
    assert "--mirror" in str(exc.value)


@pytest.mark.parametrize("url", ["ftp://x/debian", "http://x/deb ian", "http://x/;id", "-oProxy=x", "http://x/\n"])
def test_hostile_mirror_refused(url):
    with pytest.raises(UserError):
        lb.check_mirror(url)


# --------------------------------------------------------------------------- rows


def test_rows_that_take_cuda_from_the_base_are_refused_by_family():
    plan = lb.plan_rows([
        ("torch", row()),
        ("tensorflow", row(version="2.13.0", system_cuda=True, system_cudnn=True, variant="gpu")),
        ("tensorflow", row(version="2.4.0", system_cuda=True, variant="gpu")),
        ("jax", row(version="0.4.20", system_nvcc=True)),
        ("torch", row(version="2.7.1", variant="cu126", index_url="https://download.pytorch.org/whl/cu126")),
    ], BOOKWORM, REF)
    assert [fw for fw, _ in plan.rows] == ["torch"]
    assert plan.system_cuda == {"tensorflow": ["2.13.0", "2.4.0"], "jax": ["0.4.20"]}
    assert plan.own_index == {"torch": ["2.7.1"]}
    line = lb.refused_line(plan)
    assert "tensorflow 2.4.0–2.13.0" in line and "jax 0.4.20" in line


def test_copied_row_is_pinned_to_the_base_and_the_release_python():
    plan = lb.plan_rows([("torch", row(platforms=["linux/amd64", "linux/arm64"], packages_arm64=["torch==2.7.1"],
                                       python_freethreaded=["3.11", "3.13"], os=[]))], BOOKWORM, REF)
    (_, copied), = plan.rows
    assert copied["base_image"] == REF and copied["os"] == ["debian12"] and copied["python"] == ["3.11"]
    assert "platforms" not in copied and "packages_arm64" not in copied and copied["python_freethreaded"] == ["3.11"]


@pytest.mark.parametrize("python, kept", [(["3.11"], 1), (["3.10", "3.12"], 0), ([], 0)])
def test_rows_without_the_release_python_are_left_out(python, kept):
    plan = lb.plan_rows([("torch", row(python=python))], BOOKWORM, REF)
    assert len(plan.rows) == kept and plan.other_python == 1 - kept


def test_rows_of_another_os_or_platform_or_base_are_left_out():
    plan = lb.plan_rows([("torch", row(os=["ubuntu22.04"])), ("torch", row(platforms=["linux/arm64"])),
                         ("torch", row(base_image="mine:1"))], BOOKWORM, REF)
    assert plan.rows == []


def test_shipped_rows_name_no_system_cuda_row():
    raw = lb.shipped_framework_rows(SHIPPED)
    plan = lb.plan_rows(raw, BOOKWORM, REF)
    assert plan.rows, "some shipped rows build on a base of the distribution's own"
    for fw, r in plan.rows:
        assert not any(r.get(k) for k in ("system_cuda", "system_cudnn", "system_nvcc", "index_url", "find_links"))
    assert "tensorflow" in plan.system_cuda  # TensorFlow < 2.14 GPU rows take CUDA from the image


# --------------------------------------------------------------------------- files


def _write_plan(tmp_path: Path, rel=BOOKWORM, rows=None):
    ref = lb.base_ref(rel)
    plan = lb.plan_rows(rows if rows is not None else lb.shipped_framework_rows(SHIPPED), rel, ref)
    from envman.matrix.load import load_files

    shipped_oses = {o.name for o in load_files(SHIPPED).oses}
    texts = lb.file_texts(rel, ref, plan, shipped_os=rel.os_name in shipped_oses)
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    return plan, [tmp_path / n for n in texts]


@pytest.mark.parametrize("name", ["bookworm", "trixie", "noble"])
def test_written_files_load_back_validate_and_resolve_onto_the_base(tmp_path, name):
    from envman.matrix.load import load_files
    from envman.matrix.validate import validate
    from envman.stack.resolve import resolve

    rel = lb.release(name)
    plan, files = _write_plan(tmp_path, rel)
    assert (rel.distro == "debian") == any(f.name.endswith("-os.toml") for f in files)
    m = load_files([*SHIPPED, *files])
    assert {str(p) for p in validate(m)} <= {str(p) for p in validate(load_files(SHIPPED))}  # no new problem
    for fw, stack_name in lb.newest(plan).items():
        stack = resolve(m, stack_name)
        assert stack.base_image == lb.base_ref(rel) and str(stack.python) == rel.python


def test_hostile_row_text_is_written_as_toml_data(tmp_path):
    evil = row(note='"]\n[[build]]\nversion = "6.6.6', source=['x"\ny = "z'])
    _, files = _write_plan(tmp_path, rows=[("torch", evil)])
    from envman.matrix.load import load_files

    m = load_files([*SHIPPED, *files])
    copied = [b for b in m.builds if b.base_image == REF]
    assert len(copied) == 1 and copied[0].note.startswith('"]\n[[build]]')


# --------------------------------------------------------------------------- config


def test_register_into_a_missing_config(tmp_path):
    cfg = tmp_path / "config.toml"
    text, by_hand = lb.register_files(cfg, ["a.toml", "b.toml"])
    cfg.write_text(text)
    from envman.config import load_matrix_config

    assert load_matrix_config(cfg).files == (tmp_path / "a.toml", tmp_path / "b.toml") and by_hand == []
    assert lb.register_files(cfg, ["a.toml"]) == (None, [])  # already there: no change


def test_register_keeps_other_tables_and_a_matrix_table_without_files(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[network]\noffline = false\n\n[matrix]  # mine\ntorch_index = "https://t.example/whl"\n\n[build]\nnetwork = "host"\n')
    text, _ = lb.register_files(cfg, ["a.toml"])
    cfg.write_text(text)
    import tomllib

    doc = tomllib.loads(text)
    assert doc["matrix"] == {"files": ["a.toml"], "torch_index": "https://t.example/whl"}
    assert doc["build"] == {"network": "host"} and doc["network"] == {"offline": False}


def test_register_leaves_a_users_files_list_alone_and_says_so(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[matrix]\nfiles = [\n  "ours.toml",\n]\n')
    assert lb.register_files(cfg, ["a.toml"]) == (None, ["a.toml"])


def test_debootstrap_as_another_user_says_root_first(tmp_path, monkeypatch):
    monkeypatch.setattr(lb.shutil, "which", lambda _: "/usr/sbin/debootstrap")
    monkeypatch.setattr(lb.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError) as exc:
        lb.debootstrap_tarball(BOOKWORM, "http://arch.example/debian", tmp_path / "r.tar", run=pytest.fail)
    assert "root" in str(exc.value) and 'sudo "$(command -v envman)" base make' in str(exc.value)
    assert "written for you" in str(exc.value)


def test_debootstrap_failure_is_one_line_and_nothing_left(tmp_path, monkeypatch):
    monkeypatch.setattr(lb.shutil, "which", lambda _: "/usr/sbin/debootstrap")
    monkeypatch.setattr(lb.os, "geteuid", lambda: 0)
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "I: Retrieving InRelease\n", "E: Failed getting release file\n")

    tar = tmp_path / "rootfs.tar"
    with pytest.raises(UserError) as exc:
        lb.debootstrap_tarball(BOOKWORM, "http://arch.example/debian", tar, run=fake_run)
    assert "E: Failed getting release file" in str(exc.value) and "\n" not in str(exc.value)
    assert not tar.exists()
    assert calls[0][-3:] == ["bookworm", calls[0][-2], "http://arch.example/debian"]


def test_report_suggests_the_newest_cpu_row_and_names_refusals():
    plan = lb.plan_rows([("torch", row()), ("tensorflow", row(version="2.20.0", variant="cpu", cuda=None)),
                         ("tensorflow", row(version="2.9.0", variant="cpu", cuda=None)),
                         ("tensorflow", row(version="2.4.0", variant="gpu", system_cuda=True))], BOOKWORM, REF)
    made = lb.Made(REF, "sha256:" + "ab" * 32, "http://arch.example/debian", (Path("/c/x.toml"),), plan, ())
    lines = lb.report(made)
    assert lines[0] == f"made {REF} (abababababab)"
    assert "next: envman build tensorflow-2.20.0-cpu   (newest of each: tensorflow-2.20.0-cpu, torch-2.7.1-cuda12.8)" in lines
    assert any(line.startswith("not on this base") and "tensorflow 2.4.0 (1 row)" in line for line in lines)
    assert all("\n" not in line for line in lines)
    assert not any("arch.example" in line for line in lines)


def test_report_writes_the_home_folder_as_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    plan = lb.plan_rows([], BOOKWORM, REF)
    made = lb.Made(REF, "sha256:" + "0" * 64, "", (tmp_path / ".config/envman/a.toml", Path("/etc/b.toml")), plan, ())
    assert lb.report(made)[1] == "wrote ~/.config/envman/a.toml, /etc/b.toml"
    assert lb.report(made)[2] == "builds on it: no row"


@pytest.mark.parametrize("args, word", [
    (["--release", "bookworm; touch /tmp/pwned"], "--release"),
    (["--release", "$(id)"], "--release"),
    (["--release", "bookworm", "--mirror", "http://x/;id"], "--mirror"),
    (["--release", "bookworm", "--mirror", "--oops"], "--mirror"),
])
def test_cli_refuses_hostile_input_in_one_line_before_any_work(tmp_path, args, word):
    import os
    import sys

    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(tmp_path / "cfg"), "ENVMAN_STATE_DIR": str(tmp_path / "state"),
           "DOCKER_HOST": "unix:///nonexistent.sock"}  # no engine: the check comes first
    r = subprocess.run([sys.executable, "-m", "envman", "base", "make", *args], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1 and word in r.stderr
    assert not (tmp_path / "cfg").exists()  # nothing written


def test_wheel_python_of_an_arm64_only_package_is_dropped_with_it():
    plan = lb.plan_rows([("tensorflow", row(version="2.16.2", variant="cpu", cuda=None, packages=["tensorflow-cpu==2.16.2"],
                                            platforms=["linux/amd64", "linux/arm64"],
                                            packages_arm64=["tensorflow==2.16.2"],
                                            wheel_python={"tensorflow-cpu": ["3.11"], "tensorflow": ["3.11"]}))],
                        BOOKWORM, REF)
    (_, copied), = plan.rows
    assert copied["wheel_python"] == {"tensorflow-cpu": ["3.11"]}


class _Info:
    def __init__(self, id_, tags):
        self.id, self.tags = id_, tags


class FakeEngine:
    """The engine calls base make uses: inspect, import, remove."""

    def __init__(self, fail: bool = False):
        self.images = {REF: _Info("sha256:old", [REF])}
        self.removed: list[str] = []
        self.fail = fail

    def inspect_image(self, ref):
        return self.images.get(ref)

    def import_image(self, tar, ref, *, changes=()):
        from envman.errors import EngineError

        if self.fail:
            raise EngineError("import failed")
        assert Path(tar).exists() and 'LABEL envman.role="local-base"' in changes
        self.images["sha256:old"] = _Info("sha256:old", [])
        self.images[REF] = _Info("sha256:new", [REF])
        return "sha256:new"

    def remove_image(self, ref, force=False):
        self.removed.append(ref)
        return True


def _fake_debootstrap(rel, mirror, tarball, **kw):
    tarball.write_bytes(b"rootfs")


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """base make records the base it imports in the user's state: this test's, never the machine's."""
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def test_make_writes_and_registers_after_the_import_and_drops_the_replaced_base(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "debootstrap_tarball", _fake_debootstrap)
    cfg = tmp_path / "config.toml"
    engine = FakeEngine()
    made = lb.make(BOOKWORM, mirror="http://arch.example/debian", engine=engine, config=cfg, matrix_files=SHIPPED,
                   shipped_oses=[])
    assert made.image_id == "sha256:new" and engine.removed == ["sha256:old"]
    from envman.images.provenance import built_here

    assert built_here("sha256:new") and not built_here("sha256:old")  # the rows' tag is theirs by this ID only
    from envman.config import load_matrix_config

    assert set(load_matrix_config(cfg).files) == set(made.files) and all(f.exists() for f in made.files)


def test_make_writes_nothing_when_the_import_fails(tmp_path, monkeypatch):
    from envman.errors import EngineError

    monkeypatch.setattr(lb, "debootstrap_tarball", _fake_debootstrap)
    with pytest.raises(EngineError):
        lb.make(BOOKWORM, mirror="http://arch.example/debian", engine=FakeEngine(fail=True),
                config=tmp_path / "config.toml", matrix_files=SHIPPED, shipped_oses=[])
    assert list(tmp_path.iterdir()) == []


def test_make_keeps_a_symlinked_config_a_symlink(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "debootstrap_tarball", _fake_debootstrap)
    real = tmp_path / "dotfiles" / "envman.toml"
    real.parent.mkdir()
    real.write_text('[network]\noffline = false\n')
    real.chmod(0o600)
    (tmp_path / "cfg").mkdir()
    cfg = tmp_path / "cfg" / "config.toml"
    cfg.symlink_to(real)
    lb.make(BOOKWORM, mirror="http://arch.example/debian", engine=FakeEngine(), config=cfg, matrix_files=SHIPPED,
            shipped_oses=[])
    assert cfg.is_symlink() and "[matrix]" in real.read_text() and "offline = false" in real.read_text()


# --------------------------------------------------------------------------- run through sudo


@pytest.mark.parametrize("euid, env", [
    (1000, {"SUDO_UID": "1000"}),  # not root: sudo was not what ran it
    (0, {}),  # root, not through sudo
    (0, {"SUDO_UID": ""}),
    (0, {"SUDO_UID": "0"}),  # root ran sudo: root's own files
])
def test_sudo_invoker_is_none_unless_root_ran_for_another_user(monkeypatch, euid, env):
    monkeypatch.setattr(lb.os, "geteuid", lambda: euid)
    assert lb.sudo_invoker(env) is None


@pytest.mark.parametrize("raw", ["12a", "-1", " 1000", "1000\n", "\uff11\uff10", "1" * 11, "1e3"])
def test_sudo_invoker_refuses_a_sudo_uid_that_is_no_id_in_one_line(monkeypatch, raw):
    monkeypatch.setattr(lb.os, "geteuid", lambda: 0)
    with pytest.raises(UserError) as exc:
        lb.sudo_invoker({"SUDO_UID": raw})
    assert "SUDO_UID" in str(exc.value) and "\n" not in str(exc.value)


def test_sudo_invoker_takes_group_and_home_from_the_password_database(monkeypatch):
    import pwd

    monkeypatch.setattr(lb.os, "geteuid", lambda: 0)
    entry = pwd.getpwnam("nobody")
    who = lb.sudo_invoker({"SUDO_UID": str(entry.pw_uid), "SUDO_GID": "0", "HOME": "/root"})
    assert who == lb.Invoker(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))
    unused = next(u for u in range(3_999_999_000, 3_999_999_999) if not _has_uid(u))
    with pytest.raises(UserError, match="names no user"):
        lb.sudo_invoker({"SUDO_UID": str(unused)})


def _has_uid(uid: int) -> bool:
    import pwd

    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


needs_root = pytest.mark.skipif(not hasattr(lb.os, "geteuid") or lb.os.geteuid() != 0,
                                reason="acting as another user needs root (CI runs as root)")


@pytest.fixture
def nobody_home():
    """A home folder owned by ``nobody``, in a folder ``nobody`` can reach (pytest's own is root's, 0700)."""
    import pwd
    import shutil
    import tempfile

    entry = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(prefix="envman-sudo-"))
    top.chmod(0o755)
    home = top / "home"
    home.mkdir()
    lb.os.chown(home, entry.pw_uid, entry.pw_gid)
    try:
        yield lb.Invoker(entry.pw_name, entry.pw_uid, entry.pw_gid, home)
    finally:
        shutil.rmtree(top)


@needs_root
def test_acting_as_reads_and_writes_as_the_user_in_their_home_then_root_again(monkeypatch, nobody_home, tmp_path):
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "roots-xdg"))
    secret = tmp_path / "root-only"
    secret.write_text("x")
    secret.chmod(0o600)
    groups = lb.os.getgroups()
    with lb.acting_as(nobody_home):
        assert lb.os.geteuid() == nobody_home.uid and lb.os.getegid() == nobody_home.gid
        assert Path.home() == nobody_home.home and "XDG_CONFIG_HOME" not in lb.os.environ
        (nobody_home.home / "f").write_text("mine")
        with pytest.raises(PermissionError):
            secret.read_text()
    assert lb.os.geteuid() == 0 and lb.os.getegid() == 0 and lb.os.getgroups() == groups
    assert lb.os.environ["HOME"] == "/root" and lb.os.environ["XDG_CONFIG_HOME"] == str(tmp_path / "roots-xdg")
    assert (nobody_home.home / "f").stat().st_uid == nobody_home.uid


@needs_root
def test_acting_as_gives_root_back_when_the_body_fails(nobody_home):
    with pytest.raises(RuntimeError):
        with lb.acting_as(nobody_home):
            raise RuntimeError("boom")
    assert lb.os.geteuid() == 0 and lb.os.getegid() == 0


@needs_root
def test_base_make_through_sudo_writes_the_rows_for_the_user_not_root(monkeypatch, nobody_home, tmp_path):
    from contextlib import nullcontext

    from envman.config import load_matrix_config

    monkeypatch.setattr(lb, "debootstrap_tarball", _fake_debootstrap)
    root_home = tmp_path / "root-home"
    root_home.mkdir()
    monkeypatch.setenv("HOME", str(root_home))
    for var in ("ENVMAN_CONFIG_DIR", "XDG_CONFIG_HOME", "ENVMAN_MATRIX", "ENVMAN_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SUDO_UID", str(nobody_home.uid))
    import pwd

    real = pwd.getpwuid
    entry = pwd.struct_passwd((nobody_home.name, "x", nobody_home.uid, nobody_home.gid, "", str(nobody_home.home),
                               "/bin/sh"))
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: entry if uid == nobody_home.uid else real(uid))
    made = lb.make_here("bookworm", "http://arch.example/debian", connect=lambda: nullcontext(FakeEngine()))
    cfg = nobody_home.home / ".config" / "envman" / "config.toml"
    assert made.owner == "nobody" and cfg.exists() and not any(root_home.rglob("*"))
    for path in (cfg, *made.files):
        assert path.stat().st_uid == nobody_home.uid and path.is_relative_to(nobody_home.home)
    from envman.images.provenance import built_here, built_path

    with lb.acting_as(nobody_home):
        assert set(load_matrix_config(cfg).files) == set(made.files)
        assert built_here(made.image_id) and built_path().stat().st_uid == nobody_home.uid  # the record is theirs too
    lines = lb.report(made)
    assert lines[1].startswith("wrote ~nobody/.config/envman/local-base-debian12-")
    assert lines[2].startswith("the rows are nobody's, who ran sudo")
