"""The security rules, adversarially: protected mounts (with symlinks, ``..``, trailing
slashes, parents), trust records, walking up, identity-keyed homes, safe reads, secrets."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from envman.errors import UserError
from envman.project.policy import forbidden_reason
from envman.project.file import find_project_file, load_project, parse_mount, unsafe_reason
from envman.project.image import home_dir, prepare_home, project_repository
from envman.project.trust import require_trust, trust_asks
from envman.run.plan import RunPlan, docker_argv, sanitize_environment
from envman.run.prepare import parse_cli_env
from envman.engine.handoff import env_file_fd, env_file_text
from envman.safefile import read_text
from envman.project import trust

STACK = 'stack = "torch-2.4-cuda12.4"\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home" / "me"
    for d in (".ssh", ".aws", ".docker", ".gnupg", ".kube", ".config/gcloud", "data/set"):
        (h / d).mkdir(parents=True)
    (h / ".netrc").write_text("machine x login y password z\n")
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return h


def spellings(p: str) -> list[str]:
    """The same path written differently: trailing slash, ``.``, doubled slashes, ``x/..``."""
    base = p.rstrip("/") or "/"
    out = {base, base + "/", base + "/.", base.replace("/", "//"), base + "/../" + os.path.basename(base) if base != "/" else "/",
           "/./" + base.lstrip("/")}
    if base != "/":
        out.add(os.path.dirname(base) + "/nonexistent-x/../" + os.path.basename(base))
    return sorted(out)


SYSTEM = ["/", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lib/docker", "/root"]


@pytest.mark.parametrize("path", SYSTEM)
def test_system_paths_their_contents_and_spellings_are_forbidden(home, path):
    for p in spellings(path) + ([path + "/x/y", path + "/sub/../x"] if path != "/" else []):
        assert forbidden_reason(os.path.normpath(p) if p != "/" else p) is not None, p


@pytest.mark.parametrize("path", ["/var", "/home", "/var/lib"])
def test_parents_of_protected_paths_are_forbidden(home, path):
    assert forbidden_reason(path) is not None


@pytest.mark.parametrize("rel", [".", ".ssh", ".ssh/id_rsa", ".aws", ".docker/config.json", ".gnupg", ".kube",
                                 ".config/gcloud", ".config", ".netrc", ".bashrc"])
def test_home_and_credentials_are_forbidden_also_through_symlinks(home, tmp_path, rel):
    target = home / rel if rel != "." else home
    assert forbidden_reason(str(target)) is not None
    link = tmp_path / f"innocent-{rel.replace('/', '_')}"
    link.symlink_to(target)
    assert forbidden_reason(str(link)) is not None
    chain = tmp_path / f"chain-{rel.replace('/', '_')}"
    chain.symlink_to(link)
    assert forbidden_reason(str(chain) + ("/" if target.is_dir() else "")) is not None


def test_data_inside_the_home_is_allowed(home, tmp_path):
    assert forbidden_reason(str(home / "data" / "set")) is None
    (tmp_path / "elsewhere").mkdir()
    assert forbidden_reason(str(tmp_path / "elsewhere")) is None


def test_engine_sockets_by_type_by_name_and_by_directory(home, tmp_path):
    sock_path = tmp_path / "sockdir" / "engine.any"
    sock_path.parent.mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        assert "socket" in forbidden_reason(str(sock_path))  # by type, whatever its name
        (tmp_path / "link-to-sock").symlink_to(sock_path)
        assert forbidden_reason(str(tmp_path / "link-to-sock")) is not None
    finally:
        s.close()
    for name in ("docker.sock", "podman.sock", "containerd.sock", "x.sock"):
        assert forbidden_reason(str(tmp_path / "nowhere" / name)) is not None  # by name, even absent
    d = tmp_path / "rootless"
    d.mkdir()
    s2 = socket.socket(socket.AF_UNIX)
    s2.bind(str(d / "docker.sock"))
    try:
        assert "engine socket" in forbidden_reason(str(d))  # a directory holding one
    finally:
        s2.close()


def test_docker_host_socket_and_its_parents_are_forbidden(home, tmp_path, monkeypatch):
    d = tmp_path / "engine" / "run"
    d.mkdir(parents=True)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{d}/weird-name")
    assert forbidden_reason(str(d / "weird-name")) is not None
    assert forbidden_reason(str(tmp_path / "engine")) is not None


def test_envman_own_config_is_forbidden(home, tmp_path):
    (tmp_path / "cfg").mkdir()
    assert forbidden_reason(str(tmp_path / "cfg")) is not None


@pytest.mark.parametrize("spec", ["~:/h", "~/:/h", "~/.ssh:/s", "~/.ssh/:/s:ro", "/var/run/docker.sock:/d",
                                  "/run/docker.sock:/d", "/etc:/e:ro", "/:/host", "/proc/1:/p", "~root:/r",
                                  "~nobody/x:/x", "../..:/up", "sub/../../..:/up", "/dev/sda:/d"])
def test_no_file_may_mount_protected_paths(home, tmp_path, spec):
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    with pytest.raises(UserError):
        parse_mount(spec, base=root, where="f")


def test_relative_sources_must_stay_inside_the_project(home, tmp_path):
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    assert parse_mount("data:/d", base=root, where="f").source == str(root / "data")
    assert parse_mount("out/proj/data:/d", base=root, where="f").source == str(root / "out/proj/data")  # lands inside
    for spec in ("out:/o", "out/home:/o", "data/../..:/o", "./../proj/../..:/o"):
        with pytest.raises(UserError, match="outside the project root"):
            parse_mount(spec, base=root, where="f")


def test_command_line_mounts_need_the_explicit_flag(home, tmp_path):
    with pytest.raises(UserError, match="allow-dangerous-mount"):
        parse_mount("/etc:/e", base=None, where="--mount", from_file=False)
    m = parse_mount("/etc:/e:ro", base=None, where="--mount", from_file=False, allow_dangerous=True)
    assert (m.source, m.target, m.read_only) == ("/etc", "/e", True)
    with pytest.raises(UserError):  # never from a file, whatever the flag
        parse_mount("/etc:/e", base=tmp_path, where="f", from_file=True, allow_dangerous=True)


# --------------------------------------------------------------------------- trust


def write(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text(text)
    os.chmod(root / "envman.toml", 0o644)
    return root / "envman.toml"


def test_a_file_asking_for_nothing_runs_untrusted(home, tmp_path):
    f = write(tmp_path / "p", STACK + 'requirements = ["einops"]\napt = ["ffmpeg"]\nname = "x"\ngpus = "none"\nshm_size = "1g"\n')
    p = load_project(f)
    assert trust_asks(p) == []
    require_trust(p)  # no error


def test_an_untrusted_file_gets_one_refusal_listing_every_ask(home, tmp_path):
    from envman.project.file import default_shm_size, shm_bytes

    BIG_SHM = f"{shm_bytes(default_shm_size()) // 1024**2 + 1}m"  # noqa: N806 - more than the default
    (tmp_path / "data").mkdir()
    f = write(tmp_path / "p", STACK + f'mounts = ["{tmp_path}/data:/d"]\nports = [8888]\ncommand = ["python", "x.py"]\n'
              f'gpus = "all"\nshm_size = "{BIG_SHM}"\n[environment]\nHF_TOKEN = "hf_supersecretvalue"\nWANDB_MODE = "offline"\n')
    p = load_project(f)
    with pytest.raises(UserError) as e:
        require_trust(p)
    line = e.value.line()
    for want in ("mounts outside the project", "/d", "8888", "HF_TOKEN", "WANDB_MODE", "python x.py", "gpus", "shm_size",
                 "envman project trust"):
        assert want in line
    assert "hf_supersecretvalue" not in line and "\n" not in line
    trust.trust(p.real_file, p.digest)
    require_trust(load_project(f))
    f.write_text(f.read_text() + "# a comment is a change too\n")
    with pytest.raises(UserError, match="changed since you trusted it"):
        require_trust(load_project(f))


def test_trust_is_keyed_by_real_path_and_content(home, tmp_path):
    f = write(tmp_path / "p", STACK + "ports = [1]\n")
    p = load_project(f)
    trust.trust(p.real_file, p.digest)
    # the same bytes elsewhere are not trusted
    g = write(tmp_path / "q", f.read_text())
    with pytest.raises(UserError):
        require_trust(load_project(g))
    # a symlink in another directory to the trusted file does not lend it that trust: the file
    # would run its mounts, variables and command against the other directory
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "envman.toml").symlink_to(f)
    linked = load_project(tmp_path / "r")
    with pytest.raises(UserError, match="trusted only as the project file of"):
        require_trust(linked)
    # ... until it is trusted from there too (both directories then stay trusted)
    trust.trust(linked.real_file, linked.digest, root=linked.root)
    require_trust(linked)
    require_trust(load_project(f))
    # a directory symlink to the trusted project is the same directory
    (tmp_path / "alias").symlink_to(tmp_path / "p")
    require_trust(load_project(tmp_path / "alias"))


def test_trust_record_is_private_and_a_planted_one_is_ignored(home, tmp_path):
    f = write(tmp_path / "p", STACK + "ports = [1]\n")
    p = load_project(f)
    trust.trust(p.real_file, p.digest)
    rec = trust.trust_path()
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(rec.parent).st_mode) == 0o700
    os.chmod(rec, 0o666)  # writable by others: believe nothing in it
    with pytest.raises(UserError):
        require_trust(p)
    os.chmod(rec, 0o600)
    require_trust(p)
    assert trust.untrust(p.real_file) and not trust.untrust(p.real_file)
    with pytest.raises(UserError):
        require_trust(p)


def test_walking_up_refuses_a_file_in_a_directory_others_can_write(home, tmp_path):
    shared = tmp_path / "scratch"
    (shared / "me" / "work").mkdir(parents=True)
    write(shared, STACK)
    os.chmod(shared, 0o777)  # world-writable, no sticky bit
    with pytest.raises(UserError, match="others can write its directory"):
        find_project_file(shared / "me" / "work")
    os.chmod(shared, 0o1777)  # sticky: others cannot replace my file
    assert find_project_file(shared / "me" / "work") == shared / "envman.toml"
    os.chmod(shared / "envman.toml", 0o666)
    with pytest.raises(UserError, match="others can write it"):
        find_project_file(shared / "me" / "work")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_walking_up_refuses_a_file_owned_by_someone_else(home, tmp_path, monkeypatch):
    monkeypatch.delenv("SUDO_UID", raising=False)
    shared = tmp_path / "scratch2"
    (shared / "sub").mkdir(parents=True)
    f = write(shared, STACK)
    os.chown(f, 65534, 65534)
    assert "belongs to" in unsafe_reason(f)
    with pytest.raises(UserError, match="belongs to"):
        find_project_file(shared / "sub")
    with pytest.raises(UserError, match="not trusted"):  # named explicitly: needs trust, even asking nothing
        require_trust(load_project(f))
    p = load_project(f)
    trust.trust(p.real_file, p.digest)
    require_trust(p)


def test_home_and_image_repository_are_keyed_by_identity_not_name(home, tmp_path):
    victim = load_project(write(tmp_path / "victim", STACK + 'name = "victim"\n'))
    evil = load_project(write(tmp_path / "evil", STACK + 'name = "victim"\n'))
    assert home_dir(victim) != home_dir(evil)
    assert project_repository(victim) != project_repository(evil)
    assert home_dir(victim).name.startswith("victim-")


def test_a_registered_projects_old_home_moves_to_its_identity(home, tmp_path):
    from envman.paths import state_dir
    from envman.project.registry import register

    p = load_project(write(tmp_path / "old", STACK + 'name = "old"\n'))
    register(p)
    legacy = state_dir() / "homes" / "old"
    legacy.mkdir(parents=True)
    (legacy / ".keep").write_text("pip --user things")
    # an impostor with the same name elsewhere gets a fresh home, not the legacy one
    imp = load_project(write(tmp_path / "imp", STACK + 'name = "old"\n'))
    assert not (prepare_home(imp) / ".keep").exists() and legacy.exists()
    h = prepare_home(p)
    assert (h / ".keep").read_text() == "pip --user things" and not legacy.exists()


# --------------------------------------------------------------------------- safe reads


@pytest.mark.timeout(10)
def test_a_fifo_never_hangs_and_devices_are_refused(tmp_path):
    os.mkfifo(tmp_path / "f")
    t0 = time.monotonic()
    with pytest.raises(UserError, match="FIFO"):
        read_text(tmp_path / "f")
    assert time.monotonic() - t0 < 2
    with pytest.raises(UserError, match="device"):
        read_text("/dev/zero")
    with pytest.raises(UserError, match="directory"):
        read_text(tmp_path)


@pytest.mark.parametrize("data, msg", [(b"\xff\xfes\x00", "UTF-16"), (b"a\x00b", "NUL"), (b"\xc3\x28", "not UTF-8")])
def test_undecodable_files_are_one_error(tmp_path, data, msg):
    (tmp_path / "x").write_bytes(data)
    with pytest.raises(UserError, match=msg):
        read_text(tmp_path / "x")


def test_size_limit_and_inside_check(tmp_path):
    (tmp_path / "big").write_bytes(b"a" * 2000)
    with pytest.raises(UserError, match="more than"):
        read_text(tmp_path / "big", limit=1000)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "big")
    with pytest.raises(UserError, match="outside"):
        read_text(tmp_path / "root" / "link", inside=tmp_path / "root")


@pytest.mark.parametrize("req", ["/etc/passwd", "../outside.txt", "link.txt", "fifo.txt", "~/x.txt", "sub/../../outside.txt"])
def test_requirements_must_be_a_regular_file_inside_the_project(home, tmp_path, req):
    root = tmp_path / "p"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("einops\n")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    os.mkfifo(root / "fifo.txt")
    write(root, STACK + f'requirements = "{req}"\n')
    done = threading.Event()
    err: list[BaseException] = []

    def go():
        try:
            load_project(root)
        except BaseException as e:  # noqa: BLE001
            err.append(e)
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(5), "reading the requirements hung"
    assert err and isinstance(err[0], UserError)


# --------------------------------------------------------------------------- secrets and argv


def plan(**kw) -> RunPlan:
    base = dict(image="envman/x:latest", project="p", stack="s", root="/w", home="/h", uid=1000, gid=1000)
    base.update(kw)
    return RunPlan(**base)


def test_environment_values_never_reach_the_argv():
    env = (("HF_TOKEN", "hf_secret_value_123"), ("A", "1"))
    for argv in (docker_argv(plan(environment=env)), docker_argv(plan(environment=env), env_file="/proc/self/fd/9")):
        assert not any("hf_secret_value_123" in a for a in argv)
    argv = docker_argv(plan(environment=env), env_file="/proc/self/fd/9")
    assert argv[argv.index("--env-file") + 1] == "/proc/self/fd/9"


def test_env_file_round_trips_through_an_inheritable_memory_fd():
    env = [("HF_TOKEN", "hf_x=y z"), ("B", "")]
    fd = env_file_fd(env)
    try:
        assert os.get_inheritable(fd)
        with open(f"/proc/self/fd/{fd}", "rb") as fh:
            assert fh.read() == b"HF_TOKEN=hf_x=y z\nB=\n"
    finally:
        os.close(fd)
    with pytest.raises(ValueError):
        env_file_text([("A", "x\nB=injected")])


def test_cli_env_from_the_environment_and_refusals(monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "tok")
    assert parse_cli_env(["MY_TOKEN", "X=1"]) == (("MY_TOKEN", "tok"), ("X", "1"))
    for bad in ("UNSET_ENVMAN_X", "A=x\ny", "1A=1", "=1", "A B=1"):
        with pytest.raises(UserError):
            parse_cli_env([bad])


def test_hardening_flags_and_gpu_variables():
    argv = docker_argv(plan())
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and "--cap-add" not in argv
    assert argv[argv.index("--security-opt") + 1] == "no-new-privileges"
    assert "NVIDIA_VISIBLE_DEVICES=void" in argv  # a CPU run attaches no GPU even on an NVIDIA default runtime
    user = (("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "all"), ("CUDA_VISIBLE_DEVICES", "0"), ("A", "1"))
    kept, dropped = sanitize_environment(user, None)
    assert kept == (("A", "1"),) and set(dropped) == {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_VISIBLE_DEVICES"}
    from envman.project.file import GpuRequest

    kept, dropped = sanitize_environment(user, GpuRequest("all"))
    assert dropped == ("NVIDIA_VISIBLE_DEVICES",) and ("CUDA_VISIBLE_DEVICES", "0") in kept


def test_changed_since_is_never_an_option(tmp_path):
    from envman.ci.run import check_ref_text

    for bad in ("--output=/tmp/x", "-x", "a b", "HEAD:path", "", "x\n", "a;b"):
        with pytest.raises(UserError):
            check_ref_text(bad)
    for good in ("origin/main", "HEAD~3", "v1.2.3", "abc123^", "HEAD@{1}"):
        assert check_ref_text(good) == good


def test_project_init_writes_0644_and_trusts(home, tmp_path, monkeypatch):
    from envman.main import main

    data = Path(__file__).resolve().parents[2] / "data"
    mini = [a for f in sorted(data.glob("mini*.toml")) for a in ("--matrix", str(f))]
    (tmp_path / "newp").mkdir()
    monkeypatch.chdir(tmp_path / "newp")
    with pytest.raises(SystemExit) as e:
        main([*mini, "project", "init", "--env", "torch-2.4-cuda12.4"])
    assert e.value.code == 0
    f = tmp_path / "newp" / "envman.toml"
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o644
    p = load_project(f)
    assert trust.is_trusted(p.real_file, p.digest)
    (tmp_path / "newq").mkdir()
    monkeypatch.chdir(tmp_path / "newq")
    with pytest.raises(SystemExit) as e:
        main([*mini, "project", "init", "--env", "torch-99.9-cuda12.4"])
    assert e.value.code == 2 and not (tmp_path / "newq" / "envman.toml").exists()


@pytest.mark.parametrize("url, token", [
    ("https://dl.cloudsmith.io/aB3kF9xQ2mZ7pL4wR8tYq/org/repo/python/simple/", True),
    ("https://x.example/ghp_abcdefgh1234567890XYZ/simple", True),
    ("https://x.example/pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4/simple", True),
    ("https://download.pytorch.org/whl/cu124", False),
    ("https://pypi.corp.example/repository/pypi-proxy-2023/simple", False),
    ("https://pypi.org/simple", False),
])
def test_tokens_in_index_url_paths_are_refused(url, token):
    from envman.config import Invalid, check_url, token_in_path

    assert (token_in_path(url) is not None) == token
    if token:
        with pytest.raises(Invalid) as e:
            check_url(url, what="pip index")
        assert token_in_path(url) not in e.value.what + e.value.fix  # the token is never echoed
