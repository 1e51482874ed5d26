"""envman.toml parsing and discovery, settings precedence, the registry, the project image recipe."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError
from envman.project.settings import CliOverrides, UserConfig, load_user_config, merge_settings
from envman.project.file import (
    GpuRequest,
    Mount,
    Port,
    ProjectConfig,
    default_shm_size,
    find_project_file,
    load_project,
    parse_gpus,
)
from envman.project.registry import (
    init_text,
    locate,
    lookup,
    read_registry,
    register,
    unregister,
    update_registry,
)
from envman.project.image import project_context, project_dockerfile, project_image_ref, project_labels

FULL = """
name = "proj-a"
stack = "torch-2.4-cuda12"
requirements = "requirements.txt"
apt = ["libgl1", "ffmpeg"]
command = "python train.py --epochs 3"
gpus = "device=0,2"
shm_size = "16g"
ports = [8888, "6006:6007"]
mounts = ["~/datasets:/data:ro", "cache:/cache"]

[environment]
WANDB_MODE = "offline"
SEED = 3
"""


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write_project(root: Path, text: str, req: str | None = "einops==0.8.0\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text(text)
    if req is not None:
        (root / "requirements.txt").write_text(req)
    return root


# --------------------------------------------------------------------------- parsing


def test_full_file_parses(tmp_path):
    root = write_project(tmp_path / "a", FULL)
    p = load_project(root)
    assert p.name == "proj-a" and p.stack == "torch-2.4-cuda12" and p.root == root
    assert p.requirements == "einops==0.8.0\n" and p.requirements_source == "requirements.txt"
    assert p.apt == ("ffmpeg", "libgl1")  # sorted: the image recipe is deterministic
    assert p.command == ("python", "train.py", "--epochs", "3")
    assert p.gpus == GpuRequest("devices", devices=("0", "2"))
    assert p.shm_size == "16g"
    assert p.ports == (Port(8888, 8888), Port(6006, 6007))
    assert p.mounts == (Mount(str(tmp_path / "home" / "datasets"), "/data", True), Mount(str(root / "cache"), "/cache", False))
    assert p.environment == (("SEED", "3"), ("WANDB_MODE", "offline"))
    assert p.needs_image


def test_minimal_file_defaults_name_to_directory(tmp_path):
    p = load_project(write_project(tmp_path / "My Project", 'stack = "torch-2.4-cuda12"\n', req=None))
    assert p.name == "my-project" and not p.needs_image and p.gpus is None and not p.gpus_set


@pytest.mark.parametrize(
    "text, key, expected",
    [
        ('stack = 3', "key stack", "stack name"),
        ('stack = "tensorflo-2"', "key stack", "cannot parse stack name"),
        ('name = "Has Spaces"', "key name", "lowercase"),
        ('apt = "ffmpeg"', "key apt", "a list of strings"),
        ('apt = ["bad;rm -rf /"]', "key apt", "Debian package names"),
        ('requirements = 3', "key requirements", "requirements file"),
        ('requirements = "missing.txt"', "key requirements", "not found"),
        ('requirements = ["-r other.txt"]', "requirements", "another index, file or folder"),
        ('requirements = ["./local/pkg"]', "requirements", "local path"),
        ('command = []', "key command", "non-empty"),
        ('command = "unterminated \'quote"', "key command", "shell-like"),
        ('gpus = "lots"', "key gpus", '"all", "none", a count or "device=0,2"'),
        ('gpus = true', "key gpus", "a count"),
        ('shm_size = "big"', "key shm_size", '"8g"'),
        ('ports = [70000]', "key ports", "1-65535"),
        ('ports = 8888', "key ports", "a list of ports"),
        ('mounts = ["/only-source"]', "key mounts", "SOURCE:TARGET"),
        ('mounts = ["/a:relative"]', "key mounts", "absolute target"),
        ('mounts = ["/a:/workspace"]', "key mounts", "/workspace"),
        ('environment = "X=1"', "key environment", "a table"),
        ('environment = { "1X" = "a" }', "key environment.1X", "variable name"),
        ('environment = { X = [1] }', "key environment.X", "a string or a number"),
        ('stak = "torch-2.4"', "unknown key stak", "known keys: name, stack"),
        ('stack = "torch-2.4"\n[x', "not valid TOML", "fix the syntax"),
    ],
)
def test_malformed_file_is_one_line_with_file_key_and_expectation(tmp_path, text, key, expected):
    root = write_project(tmp_path / "p", text + "\n", req=None)
    with pytest.raises(UserError) as e:
        load_project(root)
    line = e.value.line()
    assert e.value.exit_code == 2 and "\n" not in line
    assert line.startswith(str(root / "envman.toml")) or "requirements" in line
    assert key in line and expected in line, line


def test_walk_up_finds_the_nearest_file(tmp_path):
    outer = write_project(tmp_path / "outer", 'stack = "torch-2.4"\n', req=None)
    inner = write_project(outer / "sub" / "inner", 'stack = "torch-2.4-cpu"\n', req=None)
    deep = inner / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_project_file(deep) == inner / "envman.toml"
    assert find_project_file(outer / "sub") == outer / "envman.toml"
    assert find_project_file(tmp_path) is None
    assert locate(None, cwd=deep).stack == "torch-2.4-cpu"
    with pytest.raises(UserError, match="no envman.toml in"):
        locate(None, cwd=tmp_path)


def test_gpu_forms():
    assert parse_gpus("all", where="x") == GpuRequest("all")
    assert parse_gpus(2, where="x") == GpuRequest("count", count=2) == parse_gpus("2", where="x")
    assert parse_gpus("none", where="x") is None and parse_gpus(0, where="x") is None
    assert str(parse_gpus("device=0,GPU-1a2b", where="x")) == "device=0,GPU-1a2b"
    for bad in ("device=", "device=0;rm", -1, "two"):
        with pytest.raises(UserError):
            parse_gpus(bad, where="x")


def test_default_shm_is_8g_or_half_the_ram():
    assert default_shm_size(64 * 1024**3) == "8g"
    assert default_shm_size(8 * 1024**3) == "4g"
    assert default_shm_size(3 * 1024**3) == "1536m"


def test_init_text_is_a_valid_project_file(tmp_path):
    (tmp_path / "envman.toml").write_text(init_text("torch-2.4-cuda12", "demo"))
    p = load_project(tmp_path)
    assert (p.name, p.stack, p.needs_image) == ("demo", "torch-2.4-cuda12", False)


# --------------------------------------------------------------------------- precedence


def test_cli_beats_project_beats_user(tmp_path):
    root = write_project(tmp_path / "p", 'stack = "torch-2.4-cuda12"\ngpus = 2\nshm_size = "2g"\n'
                         'mounts = ["/srv/a:/data"]\n[environment]\nA = "project"\nB = "project"\n', req=None)
    proj = load_project(root)
    user = UserConfig(stack="torch-1.0", gpus=GpuRequest("all"), gpus_set=True, shm_size="1g",
                      environment=(("A", "user"), ("U", "user")), mounts=(Mount("/srv/u", "/data"), Mount("/srv/x", "/x")))
    # project over user
    s = merge_settings(proj, user, CliOverrides())
    assert (s.stack, s.gpus, s.shm_size) == ("torch-2.4-cuda12", GpuRequest("count", count=2), "2g")
    assert dict(s.environment) == {"A": "project", "B": "project", "U": "user"}
    assert {m.target: m.source for m in s.mounts} == {"/data": "/srv/a", "/x": "/srv/x"}
    assert dict(s.origin) == {"stack": "project", "gpus": "project", "shm_size": "project", "command": "default"}
    # CLI over project
    cli = CliOverrides(stack="torch-2.4-cpu", gpus=None, gpus_set=True, shm_size="32g", environment=(("B", "cli"),),
                       mounts=(Mount("/srv/c", "/data"),), ports=(Port(1, 2),), command=("bash",))
    s = merge_settings(proj, user, cli)
    assert (s.stack, s.gpus, s.shm_size, s.command) == ("torch-2.4-cpu", None, "32g", ("bash",))
    assert dict(s.environment)["B"] == "cli" and {m.target: m.source for m in s.mounts}["/data"] == "/srv/c"
    assert set(dict(s.origin).values()) == {"cli"}


def test_user_config_fills_what_the_project_leaves_open(tmp_path):
    cfg = tmp_path / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[run]\ngpus = "none"\nshm_size = "12g"\n[project]\nstack = "torch-2.4-cpu"\n'
                   '[render]\nanything = "belongs to another command"\n')
    user = load_user_config()
    proj = load_project(write_project(tmp_path / "p", 'name = "p"\n', req=None))
    s = merge_settings(proj, user, CliOverrides())
    assert (s.stack, s.gpus, s.shm_size) == ("torch-2.4-cpu", None, "12g")
    assert dict(s.origin)["stack"] == "user"


def test_gpu_default_follows_the_stack(tmp_path):
    proj = load_project(write_project(tmp_path / "p", 'stack = "torch-2.4"\n', req=None))
    assert merge_settings(proj, UserConfig(), CliOverrides(), stack_is_cpu=lambda s: False).gpus == GpuRequest("all")
    assert merge_settings(proj, UserConfig(), CliOverrides(), stack_is_cpu=lambda s: True).gpus is None
    s = merge_settings(proj, UserConfig(), CliOverrides(), total_ram=4 * 1024**3)
    assert s.shm_size == "2g" and dict(s.origin)["shm_size"] == "default"


def test_no_stack_anywhere_is_an_error(tmp_path):
    proj = load_project(write_project(tmp_path / "p", 'name = "p"\n', req=None))
    with pytest.raises(UserError, match="no stack for this project"):
        merge_settings(proj, UserConfig(), CliOverrides())


def test_user_config_is_validated(tmp_path):
    cfg = tmp_path / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[run]\ngpu = 1\n")
    with pytest.raises(UserError, match=r"unknown key run\.gpu.*known keys in \[run\]"):
        load_user_config()
    cfg.write_text('[run]\nmounts = ["relative:/x"]\n')
    with pytest.raises(UserError, match="absolute source"):
        load_user_config()
    assert load_user_config(tmp_path / "missing.toml") == UserConfig()


# --------------------------------------------------------------------------- registry


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


# --------------------------------------------------------------------------- project image


def proj(tmp_path, text, req=None) -> ProjectConfig:
    return load_project(write_project(tmp_path, 'stack = "torch-2.4"\nname = "demo"\n' + text, req=req))


def test_project_without_extras_needs_no_image(tmp_path):
    assert not proj(tmp_path, "").needs_image


def test_dockerfile_layers_apt_then_requirements_from_the_stack_image(tmp_path):
    p = proj(tmp_path, 'requirements = "requirements.txt"\napt = ["zlib1g-dev", "ffmpeg"]\n', req="einops==0.8.0\n")
    df = project_dockerfile(p, "torch-2.4.1-cuda12.4-py3.10", "sha256:" + "a" * 64)
    lines = df.splitlines()
    assert lines[1] == "FROM sha256:" + "a" * 64
    assert "envman/torch-2.4.1-cuda12.4-py3.10:latest" in lines[0]
    apt_at = next(i for i, ln in enumerate(lines) if "apt-get install" in ln)
    req_at = next(i for i, ln in enumerate(lines) if "pip install" in ln)
    assert apt_at < req_at and "ffmpeg zlib1g-dev" in df
    assert project_context(p, "s", "sha256:x")["requirements.txt"] == b"einops==0.8.0\n"


def test_project_tag_is_content_addressed(tmp_path):
    p = proj(tmp_path / "1", 'requirements = ["einops==0.8.0"]\n')
    base = "sha256:" + "b" * 64
    ref = project_image_ref(p, "stack", base)
    assert ref.startswith(f"envman/project-{p.identity}:") and p.identity.startswith("demo-") and len(ref.rsplit(":", 1)[1]) == 16
    assert project_image_ref(p, "stack", base) == ref  # same inputs, same tag
    assert project_image_ref(p, "stack", "sha256:" + "c" * 64) != ref  # re-promoted stack
    q = proj(tmp_path / "2", 'requirements = ["einops==0.8.1"]\n')
    assert project_image_ref(q, "stack", base) != ref
    labels = project_labels(p, "torch-2.4.1-cuda12.4-py3.10", ref)
    import os
    import pwd

    assert {k: v for k, v in labels.items() if not k.startswith("envman.smoke.")} == {
        "envman.managed": "true", "envman.project": "demo", "envman.name": "torch-2.4.1-cuda12.4-py3.10",
        "envman.role": "project", "envman.project-hash": ref.rsplit(":", 1)[1],
        "envman.project-id": p.identity, "envman.built-by.uid": str(os.getuid()), "envman.built-by.user": pwd.getpwuid(os.getuid()).pw_name}
    assert {v for k, v in labels.items() if k.startswith("envman.smoke.")} == {""}  # the base's verdict is not inherited


def test_build_project_image_reuses_an_existing_tag(tmp_path):
    from envman.project.image import build_project_image

    p = proj(tmp_path, 'apt = ["ffmpeg"]\n')

    from tests.support.fake_engine import FakeEngine

    ref = project_image_ref(p, "stack", "sha256:base")
    e = FakeEngine.with_images({ref: "sha256:p"})
    assert build_project_image(e, p, "stack", "sha256:base") == ref and e.builds == []
    e = FakeEngine()
    assert build_project_image(e, p, "stack", "sha256:base") == ref
    assert [(c["tag"], c["labels"]["envman.project"], c["nocache"]) for c in e.build_calls] == [(ref, "demo", False)]
    assert e.image_exists(ref)


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "projects").glob("*/envman.toml"))


@pytest.mark.parametrize("file", EXAMPLES, ids=[f.parent.name for f in EXAMPLES])
def test_examples_are_valid_and_resolve(file):
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    p = load_project(file)
    assert p.name == file.parent.name and p.stack
    stack = resolve(load_matrix(), p.stack)  # the shipped matrix has every example's stack
    assert stack.cuda
