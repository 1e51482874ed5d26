"""The run-plan cache: a repeated ``envman run`` execs the recorded ``docker run`` only while every
file and image it was made from is unchanged; anything else takes the full path with its checks.

The engine is a real Unix-socket server speaking the Engine API's HTTP (no daemon needed); the
final exec is replaced by an exception that carries the argv.
"""

from __future__ import annotations

import json
import os
from tests.support.socket_engine import SocketEngine
import threading
from pathlib import Path

import pytest

from envman.engine.handoff import with_terminal
import envman.run.fastpath as runcache
import envman.run.command as runner
from envman.main import main
from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve
from envman.state import stable_ref

from tests.unit.test_host import FakeNvml, recorded

DATA = Path(__file__).resolve().parents[2] / "data"
MATRIX = [a for f in sorted(DATA.glob("mini*.toml")) for a in ("--matrix", str(f))]


class Exec(BaseException):
    """Raised instead of exec'ing docker (a BaseException: no error boundary catches it)."""

    def __init__(self, argv, path):
        super().__init__(path)
        self.argv, self.path = list(argv), path


class EngineAPI(SocketEngine):
    """``GET /images/REF/json`` and ``GET /info``."""

    def __init__(self, path: str) -> None:
        self.images: dict[str, str] = {}
        self.networks: dict[str, dict] = {}
        self.info: dict = {"ServerVersion": "27.3.1", "Runtimes": {"runc": {}}}
        super().__init__(path)

    def answer_request(self, method, path, body):
        """Networks: ``POST /networks/create`` makes one, ``GET /networks/NAME`` shows it."""
        if method == "POST" and path == "/networks/create":
            if body["Name"] in self.networks:
                return 409, {"message": "already exists"}
            self.networks[body["Name"]] = {"Id": f"net{len(self.networks)}-{body['Name']}", "Name": body["Name"],
                                           "Driver": body["Driver"], "Labels": body["Labels"], "Containers": {}}
            return 201, {"Id": self.networks[body["Name"]]["Id"]}
        if path.startswith("/networks/") and method == "GET":
            found = self.networks.get(path[len("/networks/"):])
            return (200, found) if found else (404, {"message": "network not found"})
        return self.answer(path)

    def answer(self, path: str):
        ref = path[8:-5] if path.startswith("/images/") and path.endswith("/json") else None
        if path == "/info":
            return 200, self.info
        if ref is not None and ref in self.images:
            return 200, {"Id": self.images[ref], "RepoTags": [ref]}
        if ref is not None and ref in self.images.values():
            return 200, {"Id": ref, "RepoTags": [t for t, i in self.images.items() if i == ref]}
        return 404, {"message": "No such image"}


@pytest.fixture
def engine(tmp_path, monkeypatch):
    path = str(tmp_path / "docker.sock")
    srv = EngineAPI(path)
    # serve_forever polls for shutdown(); its default half-second poll would be each test's teardown
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def world(tmp_path, monkeypatch, engine):
    """A registered CPU project on a promoted stack with a passing smoke report, a fake docker
    CLI on PATH, and exec replaced by :class:`Exec`."""
    from envman.images.build import SmokeReport, save_report

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)
    monkeypatch.delenv("ENVMAN_CACHE_DIR", raising=False)
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(runcache, "exec_docker", lambda argv, env=(): (_ for _ in ()).throw(Exec(argv, "cached")))
    monkeypatch.setattr(runner, "exec_docker", lambda argv, env=(): (_ for _ in ()).throw(Exec(argv, "full")))

    stack = resolve(load_matrix([f for f in MATRIX if f != "--matrix"]), "torch-2.4-cpu")
    engine.images[stable_ref(stack)] = "sha256:stable"
    save_report(SmokeReport(stack=stack.name, image="i", image_id="sha256:stable", overall="pass", reason="",
                            gpus_requested=False, probe=None, exit_code=0, stderr_tail=""))
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n')
    monkeypatch.chdir(root / "sub")
    return {"root": root, "stack": stack, "tmp": tmp_path}


def envman_run(*words):
    """One ``envman run``: ("cached" | "full", argv), or the exit code when it did not exec."""
    try:
        main([*MATRIX, "run", *words])
    except Exec as e:
        return e.path, e.argv
    except SystemExit as e:
        return e.code
    raise AssertionError("envman run returned without exec or exit")


def _without_cidfile(argv):
    """``argv`` without ``--cidfile FILE`` (a new file per run: envman/run/cidfile.py)."""
    at = argv.index("--cidfile")
    return argv[:at] + argv[at + 2:]


def test_second_identical_run_is_served_from_the_cache_with_the_same_argv(world, engine):
    first = envman_run("--no-gpu", "--", "python", "train.py")
    assert first[0] == "full"
    assert Path(runcache.cache_file()).is_file()
    engine.requests.clear()
    second = envman_run("--no-gpu", "--", "python", "train.py")
    assert second[0] == "cached" and _without_cidfile(second[1]) == _without_cidfile(first[1])
    assert second[1][2] == "--cidfile" != second[1][3] != first[1][3]  # each run's ID recorded anew
    # the cached run still asks the engine whether the promoted image and the project's network
    # are the ones recorded (all at once: the engine may take them in any order)
    net = next(iter(engine.networks))
    assert sorted(engine.requests) == sorted([f"/images/{stable_ref(world['stack'])}/json", "/images/sha256:stable/json",
                                              f"/networks/{net}"])
    assert oct(os.stat(runcache.cache_file()).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("change", [
    "project file edited",
    "nearer envman.toml",
    "user config written",
    "image re-promoted",
    "smoke report rewritten",
    "other command",
    "other option",
    "cache turned off",
    "registry changed",
    "network removed",
    "network made anew",
])
def test_any_change_takes_the_full_path(world, engine, monkeypatch, change):
    from envman.images.build import SmokeReport, save_report

    assert envman_run("--no-gpu", "--", "true")[0] == "full"
    assert envman_run("--no-gpu", "--", "true")[0] == "cached"
    words = ["--no-gpu", "--", "true"]
    if change == "project file edited":
        (world["root"] / "envman.toml").write_text('name = "p2"\nstack = "torch-2.4-cpu"\n')
    elif change == "nearer envman.toml":
        (world["root"] / "sub" / "envman.toml").write_text('name = "q"\nstack = "torch-2.4-cpu"\n')
    elif change == "user config written":
        (world["tmp"] / "config").mkdir(exist_ok=True)
        (world["tmp"] / "config" / "config.toml").write_text('[run]\nshm_size = "2g"\n')
    elif change == "image re-promoted":
        engine.images[stable_ref(world['stack'])] = "sha256:other"
    elif change == "smoke report rewritten":
        save_report(SmokeReport(stack=world["stack"].name, image="i", image_id="sha256:stable", overall="fail",
                                reason="broken", gpus_requested=False, probe=None, exit_code=1, stderr_tail=""))
    elif change == "other command":
        words = ["--no-gpu", "--", "false"]
    elif change == "other option":
        words = ["--no-gpu", "--shm-size", "1g", "--", "true"]
    elif change == "cache turned off":
        monkeypatch.setenv("ENVMAN_RUN_CACHE", "0")
    elif change == "registry changed":
        from envman.project.file import load_project
        from envman.project.registry import register

        register(load_project(world["root"]))
    elif change == "network removed":
        engine.networks.clear()
    elif change == "network made anew":
        for name, net in engine.networks.items():
            net["Id"] = "another-" + net["Id"]
    result = envman_run(*words)
    assert not (isinstance(result, tuple) and result[0] == "cached"), result
    if change in ("image re-promoted", "smoke report rewritten"):
        assert result == 1  # and the full path's preflight refuses the run, as it must
    else:
        assert result[0] == "full"


def test_what_the_full_path_refuses_is_never_served(world, engine):
    assert envman_run("--no-gpu", "--", "true")[0] == "full"
    (world["root"] / "envman.toml").write_text('name = "p"\nstack = 3\n')
    assert envman_run("--no-gpu", "--", "true") == 2
    assert envman_run("--no-gpu", "--", "true") == 2


def test_dry_runs_and_gpu_runs_are_never_cached(world, engine, monkeypatch, capsys):
    from envman.host import from_nvml

    assert envman_run("--no-gpu", "--dry-run", "--", "true") == 0
    assert not Path(runcache.cache_file()).exists()
    # a GPU run on a host with a GPU and an engine with the NVIDIA runtime: executed, not recorded
    stack = resolve(load_matrix([f for f in MATRIX if f != "--matrix"]), "torch-2.4-cuda12.4")
    engine.images[stable_ref(stack)] = "sha256:stable"
    engine.info["Runtimes"] = {"runc": {}, "nvidia": {}}
    (world["root"] / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cuda12.4"\n')
    monkeypatch.setattr(runner, "detect_host", lambda matrix_files=(): from_nvml(FakeNvml(recorded("h100-570")["nvml"])))
    for _ in range(2):
        result = envman_run("--", "nvidia-smi")
        assert result[0] == "full" and "--gpus" in result[1], result
    assert not Path(runcache.cache_file()).exists()


def test_a_corrupt_cache_is_a_miss_and_is_replaced(world):
    path = Path(runcache.cache_file())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert envman_run("--no-gpu", "--", "true")[0] == "full"
    assert envman_run("--no-gpu", "--", "true")[0] == "cached"


def test_a_cached_environment_is_worked_out_again_by_the_function_the_caller_hands_over(world, monkeypatch):
    """The fast path imports nothing of the full path: ``envman run`` (:mod:`envman.main`) hands it
    the function that works a cached run's environment out again; a caller that hands none gets a
    miss for a run with an environment, never a run without its variables."""
    envs = []
    monkeypatch.setattr(runcache, "exec_docker", lambda argv, env=(): envs.append(list(env)) or (_ for _ in ()).throw(
        Exec(argv, "cached")))
    monkeypatch.setenv("PASSED_ON", "from-the-caller")
    words = ("--no-gpu", "-e", "GIVEN=1", "-e", "PASSED_ON", "--", "true")
    assert envman_run(*words)[0] == "full"
    assert envman_run(*words)[0] == "cached"
    assert envs == [[("GIVEN", "1"), ("PASSED_ON", "from-the-caller")]]
    matrix = [w for w in MATRIX if w != "--matrix"]
    assert runcache.try_cached_run(matrix, list(words[:5]), ["true"]) is None  # no environment_of: a miss
    assert runcache.try_cached_run(matrix, list(words[:5]), ["true"],
                                   environment_of=lambda f, a: [("GIVEN", "1"), ("PASSED_ON", "other")]) is None
    assert len(envs) == 1  # neither exec'd; the same call with the right values does
    with pytest.raises(Exec):
        runcache.try_cached_run(matrix, list(words[:5]), ["true"],
                                environment_of=lambda f, a: [("GIVEN", "1"), ("PASSED_ON", "from-the-caller")])


def test_terminal_flags_go_where_the_full_path_puts_them():
    argv = ["docker", "run", "--rm", "img", "true"]
    assert with_terminal(argv, True, True) == ["docker", "run", "--interactive", "--tty", "--rm", "img", "true"]
    assert with_terminal(argv, False, True) == ["docker", "run", "--interactive", "--rm", "img", "true"]
    assert with_terminal(argv, False, False) == argv


def test_docker_facts_read_the_socket_and_fall_back_to_the_cli(engine):
    import subprocess

    from envman.engine.facts import DockerFacts

    engine.images["envman/x:latest"] = "sha256:abc"
    calls = []

    def cli(args):
        calls.append(args)
        return subprocess.CompletedProcess(["docker", *args], 1, "", "Error: No such image: y\n")

    facts = DockerFacts(runner=cli, socket=engine.server_address)
    assert facts.inspect_image("envman/x:latest").id == "sha256:abc"
    assert facts.inspect_image("envman/missing:latest") is None
    assert facts.info().server_version == "27.3.1"
    assert calls == []  # all three answered on the socket
    gone = DockerFacts(runner=cli, socket=str(engine.server_address) + ".gone")
    assert gone.inspect_image("envman/y:latest") is None and calls  # no socket: the CLI answered


# --------------------------------------------------------------------------- envman build


@pytest.fixture
def noop(tmp_path, monkeypatch, engine):
    """A recorded no-op build of one stack whose result depends on one file."""
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ENVMAN_RUN_CACHE", raising=False)
    monkeypatch.delenv("ENVMAN_CACHE_DIR", raising=False)
    dep = tmp_path / "wheelhouse" / "torch-2.13.0-cp311-none-any.whl"
    dep.parent.mkdir()
    dep.write_bytes(b"wheel")
    engine.images.update({"envman/s:0123456789abcdef": "sha256:cand", "envman/s:latest": "sha256:cand"})
    row = {"name": "s", "image": "envman/s:0123456789abcdef", "image_id": "sha256:cand", "cached": True,
           "smoke": "cpu-only", "reason": "CPU only", "promoted": True, "stable": "envman/s:latest", "log": None}
    words = ["s", "--wheelhouse", str(dep.parent), "--json"]
    runcache.record(runcache.build_key([], words), deps=runcache.tree_files(str(dep.parent)),
                    images=[("envman/s:0123456789abcdef", "sha256:cand"), ("envman/s:latest", "sha256:cand")],
                    rows=[row], json=True)
    return {"words": words, "row": row, "dep": dep}


def test_a_recorded_no_op_build_prints_its_result(noop, capsys):
    with pytest.raises(SystemExit) as e:
        runcache.try_cached_build([], noop["words"])
    assert e.value.code == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in row.items() if k != "build_seconds"} == noop["row"] and row["build_seconds"] < 1


@pytest.mark.parametrize("change", ["wheel replaced", "wheel added", "stable tag moved", "candidate gone", "--no-cache",
                                   "other words"])
def test_a_build_whose_inputs_changed_takes_the_full_path(noop, engine, change, capsys):
    words = noop["words"]
    if change == "wheel replaced":
        noop["dep"].write_bytes(b"other wheel")
    elif change == "wheel added":
        (noop["dep"].parent / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"six")
    elif change == "stable tag moved":
        engine.images["envman/s:latest"] = "sha256:older"
    elif change == "candidate gone":
        del engine.images["envman/s:0123456789abcdef"]
    elif change == "--no-cache":
        words = [*words, "--no-cache"]
    else:
        words = [*words, "--accept-cpu-only"]
    assert runcache.try_cached_build([], words) is None  # returned: the full path runs
    assert capsys.readouterr().out == ""


def test_human_build_lines_match_the_full_path():
    from envman.cli.build import build_line

    row = {"name": "s", "image": "envman/s:01", "cached": True, "smoke": "cpu-only", "reason": "no GPU",
           "promoted": False, "stable": None}
    assert build_line(row) == (
        "cpu-only", "yellow",
        "s (cached) envman/s:01 — not promoted (cpu-only: add --accept-cpu-only to promote without a GPU): no GPU")
    assert build_line({"result": "build-failed", "name": "s", "error": "x"}) == ("build failed", "red", "s: x")


@pytest.fixture
def copied_envman(tmp_path):
    """A copy of envman's package, templates and matrices (a source checkout's layout, as an
    editable install has it) whose files a test may edit; its folder goes first on PYTHONPATH."""
    import shutil

    import envman

    repo = Path(envman.__file__).resolve().parents[1]
    site = tmp_path / "site"
    shutil.copytree(repo / "envman", site / "envman", ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("templates", "matrices"):
        shutil.copytree(repo / data, site / data)
    return site


def envman_process(site: Path, *words: str) -> None:
    """``envman run WORDS`` in a fresh process from the copy at ``site`` (its docker is the
    world's fake one, which exits 0)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([sys.executable, "-c", "import sys; from envman.main import main; main(sys.argv[1:])",
                        *MATRIX, "run", *words], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def recorded_deps() -> dict[str, list | None]:
    (entry,) = json.loads(Path(runcache.cache_file()).read_text())["runs"].values()
    return {path: sig for path, sig in entry["deps"]}


#: Modules of the run path that a hand-kept list once left out; each must be watched.
ONCE_UNWATCHED = ("project/policy.py", "config/file.py", "config/network.py", "safefile.py", "engine/select.py")


def test_the_run_cache_watches_every_envman_module_the_full_path_loaded(world, engine, copied_envman):
    """The watched files are what the full path loaded (its own report of sys.modules), the
    templates and the matrices: nothing hand-kept that an added import could outgrow."""
    import subprocess
    import sys

    listing = copied_envman.parent / "loaded.txt"
    probe = ("import sys\n"
             "import envman.run.command as full\n"
             "def exec_docker(argv, env=()):\n"  # what was loaded when the full path hands over to docker
             f"    open({str(listing)!r}, 'w').write('\\n'.join(m.__file__ for n, m in list(sys.modules.items())"
             " if n.split('.')[0] == 'envman' and getattr(m, '__file__', None)))\n"
             "    sys.exit(0)\n"
             "full.exec_docker = exec_docker\n"
             "from envman.main import main\n"
             "main(sys.argv[1:])\n")
    subprocess.run([sys.executable, "-c", probe, *MATRIX, "run", "--no-gpu", "--", "true"],
                   env={**os.environ, "PYTHONPATH": str(copied_envman)}, check=True)
    deps = recorded_deps()
    loaded = listing.read_text().split()
    assert len(loaded) > 20
    unwatched = [f for f in loaded if os.path.abspath(f) not in deps]
    assert unwatched == []
    for data in ("templates/dockerfiles", "matrices"):  # the Dockerfile templates and every matrix file
        assert [f for f in (copied_envman / data).rglob("*") if str(f) not in deps] == []
    for rel in ONCE_UNWATCHED:
        assert str(copied_envman / "envman" / rel) in deps, rel


@pytest.mark.parametrize("rel", [*ONCE_UNWATCHED, "run/fastpath.py", "templates/dockerfiles/Dockerfile.j2"])
def test_an_edited_module_on_the_run_path_is_a_miss(world, engine, copied_envman, rel):
    """Edit one file of envman (a comment, as an upgrade or an editable checkout changes it):
    the next identical run takes the full path, which records the run afresh."""
    envman_process(copied_envman, "--no-gpu", "--", "true")
    cache = Path(runcache.cache_file())
    recorded = cache.read_bytes()
    envman_process(copied_envman, "--no-gpu", "--", "true")
    assert cache.read_bytes() == recorded  # served from the cache: nothing recorded again
    path = copied_envman / rel if rel.startswith("templates/") else copied_envman / "envman" / rel
    with path.open("a") as fh:
        fh.write("\n" + ("{# edited #}" if rel.endswith(".j2") else "# edited") + "\n")
    envman_process(copied_envman, "--no-gpu", "--", "true")
    assert cache.read_bytes() != recorded  # the full path ran and recorded the run again
    assert recorded_deps()[str(path)] == runcache.signature(str(path))


def test_a_recorded_human_no_op_build_prints_the_lines_the_full_path_printed(noop, capsys, monkeypatch):
    from envman.cli.build import build_line

    words = noop["words"][:-1]  # without --json
    line = build_line(noop["row"])
    runcache.record(runcache.build_key([], words), deps=runcache.tree_files(str(noop["dep"].parent)),
                    images=[("envman/s:0123456789abcdef", "sha256:cand"), ("envman/s:latest", "sha256:cand")],
                    rows=[noop["row"]], lines=[list(line)], json=False)
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    with pytest.raises(SystemExit) as e:
        runcache.try_cached_build([], words)
    assert e.value.code == 0
    assert capsys.readouterr().out == f"{line[0]} {line[2]}\n"


@pytest.mark.parametrize("swap", ["mount folder made a symlink", "parent repointed",
                                  "project root made a symlink"])
def test_a_mount_source_that_resolves_elsewhere_now_takes_the_full_path(world, engine, swap):
    """The mount policy was checked against what each bind source resolved to; a cached plan is
    served only while every source (project root, home, each mount) still resolves to the same
    real path and inode, so a folder swapped for a symlink to a protected path is checked again."""
    import shutil

    root, tmp = world["root"], world["tmp"]
    (tmp / "shared" / "a").mkdir(parents=True)
    (tmp / "shared" / "b").mkdir()
    (tmp / "link").symlink_to(tmp / "shared" / "a")
    (root / "data").mkdir()
    (root / "envman.toml").write_text(f'name = "p"\nstack = "torch-2.4-cpu"\nmounts = ["./data:/data", '
                                      f'"{tmp}/link:/shared"]\n')
    try:
        main([*MATRIX, "project", "trust", str(root)])
    except SystemExit as e:
        assert e.code in (0, None)
    assert envman_run("--no-gpu", "--", "true")[0] == "full"
    assert envman_run("--no-gpu", "--", "true")[0] == "cached"
    secret = tmp / "secret"
    secret.mkdir()
    if swap == "mount folder made a symlink":
        (root / "data").rmdir()
        (root / "data").symlink_to(secret)
    elif swap == "parent repointed":
        (tmp / "link").unlink()
        (tmp / "link").symlink_to(tmp / "shared" / "b")
    else:
        shutil.move(str(root), str(tmp / "moved"))
        (tmp / "moved" / "data").rmdir()
        (tmp / "moved" / "data").symlink_to(secret)
        root.symlink_to(tmp / "moved")
    result = envman_run("--no-gpu", "--", "true")
    assert not (isinstance(result, tuple) and result[0] == "cached"), result


@pytest.mark.parametrize("words", [["--dry-run"], ["--dry-run", "--json"], ["--dry-run", "--rebuild"]])
def test_a_dry_run_builds_and_pulls_nothing(world, engine, monkeypatch, capsys, words):
    """A newcomer's first command on a cloned repo is ``--dry-run``: the project's requirements
    and apt packages run nothing, no image is pulled; the printed command names the image a run
    would build, and a line says so."""
    import envman.project.image as project_image

    (world["root"] / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\nrequirements = ["six"]\n')
    monkeypatch.setattr(project_image, "build_project_image",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("built on a dry run")))
    monkeypatch.setattr(runner, "pull_on_run_fetcher", lambda: (_ for _ in ()).throw(AssertionError("pulled")))
    try:
        main([*MATRIX, "project", "trust", str(world["root"])])
    except SystemExit as e:
        assert e.code in (0, None)
    capsys.readouterr()
    try:
        main([*MATRIX, "run", *words, "--no-gpu", "--", "true"])
    except SystemExit as e:
        assert e.code in (0, None)
    out, err = capsys.readouterr()
    assert "envman/project-p" in out and "would first build the project image envman/project-p" in err, (out, err)


# --------------------------------------------------------------------------- what a hit loads

#: The envman modules a cached run or a cached no-op build may load: the console script's entry,
#: the error boundary, the fast path and the stdlib-only helpers it reads state and the engine with.
FAST_PATH_MODULES = {"envman", "envman.main", "envman.boundary", "envman.run", "envman.run.fastpath",
                     "envman.run.grammar", "envman.engine", "envman.engine.handoff", "envman.engine.socket",
                     "envman.paths", "envman.safefile", "envman.errors", "envman.digest", "envman.run.cidfile"}
#: Standard-library modules a hit has no use for (each costs milliseconds to load): the TOML
#: parser, typing, pathlib, OpenSSL's hashlib, the socket module's Python wrapper.
HEAVY_STDLIB = {"tomllib", "typing", "pathlib", "hashlib", "_hashlib", "socket", "subprocess"}

HIT_PROBE = """
import json, sys
before = set(sys.modules)
import envman.run.fastpath as fastpath

def report(*_args, **_kwargs):
    sys.stdout.write("\\nLOADED " + json.dumps(sorted(set(sys.modules) - before)) + "\\n")
    sys.stdout.flush()
    raise SystemExit(0)

fastpath.exec_docker = report  # where a cached run execs docker
import atexit
atexit.register(report)  # a cached build prints its result and exits
from envman.main import main
main(sys.argv[1:])
"""


def loaded_by_hit(*argv: str) -> tuple[str, set[str]]:
    """(what the process printed before the probe, the modules it loaded) for ``envman ARGV``
    in a fresh interpreter."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", HIT_PROBE, *argv], capture_output=True, text=True, timeout=120)
    out, _, loaded = p.stdout.rpartition("\nLOADED ")
    assert p.returncode == 0 and loaded, p.stderr
    return out, set(json.loads(loaded))


def test_a_cached_no_op_build_loads_only_the_fast_path(noop):
    out, loaded = loaded_by_hit("build", *noop["words"])
    assert json.loads(out)[0]["image"] == noop["row"]["image"]  # the recorded result: a hit
    assert {m for m in loaded if m.startswith("envman")} <= FAST_PATH_MODULES
    assert not loaded & HEAVY_STDLIB
    assert not any(m == "docker" or m.startswith(("docker.", "typer", "click", "rich", "jinja2")) for m in loaded)


def test_a_cached_run_loads_only_the_fast_path(world, engine):
    assert envman_run("--no-gpu", "--", "true")[0] == "full"
    assert envman_run("--no-gpu", "--", "true")[0] == "cached"
    _, loaded = loaded_by_hit(*MATRIX, "run", "--no-gpu", "--", "true")
    assert {m for m in loaded if m.startswith("envman")} <= FAST_PATH_MODULES
    assert not loaded & HEAVY_STDLIB
    assert not any(m == "docker" or m.startswith(("docker.", "typer", "click", "rich", "jinja2")) for m in loaded)


from hypothesis import given, strategies as st  # noqa: E402


@given(st.binary(max_size=4096))
def test_the_fast_paths_sha256_is_hashlibs(data):
    import hashlib

    assert runcache.sha256_hex(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("spoil", ["file", "symlink"])
def test_a_cached_run_whose_containers_folder_is_unusable_fails_in_one_line(world, engine, capsys, spoil):
    # the folder of this user's container IDs is made when a run starts: when it cannot be (a
    # file, or a symlink, in its place) the cache does not decide: the full path says so in one line
    assert envman_run("--no-gpu", "--", "python", "train.py")[0] == "full"
    folder = world["tmp"] / "state" / "containers"
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    if spoil == "file":
        folder.write_text("")
    else:
        (world["tmp"] / "elsewhere").mkdir()
        folder.symlink_to(world["tmp"] / "elsewhere")
    capsys.readouterr()
    assert envman_run("--no-gpu", "--", "python", "train.py") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a directory of yours" in err and str(folder) in err
