"""Two projects on two stacks (CUDA 11.8 / Python 3.11 and CUDA 12.8 / Python 3.13), run at once.

What is real: ``envman project add``, ``envman run`` (project file, registry, stack resolution,
preflight, the project image build FROM the stack image, the ``docker run`` it execs), and the
containers' view of their stack, their files and their exit codes.

What is a fixture (no framework is downloaded and no real ``nvidia/cuda`` image is pulled here):

* the matrix: three small user matrix files written below (a Debian 12 and a Debian 13 OS, two
  custom base images, two ``torch 0.0.x`` rows that install nothing) so that the two stack names
  resolve to stacks with different CUDA and Python versions;
* the bases: stand-ins from ``tests/support/standin.py`` (``CUDA_VERSION`` set, no CUDA inside);
* the promoted stack images (``envman/<stack>:latest-<key>``: user rows are named by content): built here FROM those stand-ins with a
  venv at /opt/venv, HOME=/home/envman (1777) and an entrypoint — what ``envman build`` would
  make, minus the framework — and cached between sessions (``envman.test-fixture=true``);
* their smoke reports: written here with ``envman.images.build.save_report`` (no probe was run).

Ownership is proven with a user that is not the test's: as root, the second project belongs to
uid 1234, and its ``envman`` runs as 1234 (setuid in the child, plus the docker socket's group).
Every file the container creates in the project must then belong to 1234 on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from envman.images.build import SmokeReport, save_report
from envman.engine.context import deterministic_tar
from envman.project.file import project_identity

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
OTHER_UID = 1234
FIXTURE_RECIPE = "1"

STACKS = {
    # stack query → (canonical name, stand-in base, Debian suite, CUDA, Python)
    "torch-0.0.1-cuda11.8": ("torch-0.0.1-cuda11.8-py3.11", "envman-test/cuda:11.8.0-base-debian12", "bookworm", "11.8.0", "3.11"),
    "torch-0.0.2-cuda12.8": ("torch-0.0.2-cuda12.8-py3.13", "envman-test/cuda:12.8.1-base-debian13", "trixie", "12.8.1", "3.13"),
}

MATRIX_OS = """schema = 1
kind = "os"

[[os]]
name = "debian12"
python_default = "3.11"
python_apt = ["3.11"]
source = ["test fixture"]
status = "confirmed"

[[os]]
name = "debian13"
python_default = "3.13"
python_apt = ["3.13"]
source = ["test fixture"]
status = "confirmed"
"""

MATRIX_IMAGES = """schema = 1
kind = "images"

[[image]]
repository = "envman-test/cuda"
tag = "11.8.0-base-debian12"
cuda = "11.8.0"
flavour = "base"
os = "debian12"
status = "published"
custom = true
source = ["test fixture: stand-in"]

[[image]]
repository = "envman-test/cuda"
tag = "12.8.1-base-debian13"
cuda = "12.8.1"
flavour = "base"
os = "debian13"
status = "published"
custom = true
source = ["test fixture: stand-in"]
"""

MATRIX_FRAMEWORK = """schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "0.0.1"
variant = "cu118"
cuda = "11.8"
python = ["3.11"]
packages = ["torch==0.0.1"]
sass = ["8.0", "8.6", "9.0"]
os = ["debian12"]
base_image = "envman-test/cuda:11.8.0-base-debian12"
source = ["test fixture: never installed"]
status = "confirmed"

[[build]]
version = "0.0.2"
variant = "cu128"
cuda = "12.8"
python = ["3.13"]
packages = ["torch==0.0.2"]
sass = ["8.0", "8.6", "9.0", "12.0"]
os = ["debian13"]
base_image = "envman-test/cuda:12.8.1-base-debian13"
source = ["test fixture: never installed"]
status = "confirmed"
"""

# Used only when the real one (templates/dockerfiles/entrypoint.sh) is not in the tree yet.
FIXTURE_ENTRYPOINT = """#!/bin/sh
# test fixture stand-in for envman's entrypoint: any uid, a HOME it can write
[ -w "${HOME:-/nonexistent}" ] || export HOME=/tmp
exec "$@"
"""

STACK_DOCKERFILE = """FROM {base}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3 -m venv --system-site-packages /opt/venv \\
 && mkdir -p /home/envman && chmod 1777 /home/envman
# PIP_CERT: test-fixture only, so pip trusts the CAs this machine's egress needs (see standin.py)
ENV PATH=/opt/venv/bin:$PATH HOME=/home/envman PIP_CERT=/etc/ssl/certs/ca-certificates.crt
COPY entrypoint.sh /opt/envman/entrypoint.sh
ENTRYPOINT ["/opt/envman/entrypoint.sh"]
CMD ["bash"]
"""


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def matrix_files(workdir) -> list[str]:
    d = workdir / "matrix"
    d.mkdir()
    out = []
    for name, text in (("os.toml", MATRIX_OS), ("images.toml", MATRIX_IMAGES), ("torch.toml", MATRIX_FRAMEWORK)):
        (d / name).write_text(text)
        out.append(str(d / name))
    return out


@pytest.fixture(scope="module")
def workdir():
    """A folder both root and uid 1234 can reach (pytest's tmp_path is 0700 root)."""
    d = Path(tempfile.mkdtemp(prefix="envman-projects-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _entrypoint() -> bytes:
    real = ROOT / "templates" / "dockerfiles" / "entrypoint.sh"
    return real.read_bytes() if real.is_file() else FIXTURE_ENTRYPOINT.encode()


def stable_tag(matrix_files: list[str], stack_name: str) -> str:
    """The stable tag envman gives the stack with these matrix files (a user row's is named by
    its content: ``latest-<key>``)."""
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from envman.state import stable_ref

    return stable_ref(resolve(load_matrix(matrix_files), stack_name))


def fixture_stack_image(engine, stack_name: str, base: str, ref: str) -> str:
    """The stack's stable tag ``ref`` FROM a stand-in: a test fixture, cached by recipe digest."""
    files = {"Dockerfile": STACK_DOCKERFILE.format(base=base).encode(), "entrypoint.sh": (_entrypoint(), 0o755)}
    base_id = engine.inspect_image(base).id
    digest = hashlib.sha256(deterministic_tar(files) + base_id.encode() + FIXTURE_RECIPE.encode()).hexdigest()[:16]
    info = engine.inspect_image(ref)
    labels = info.labels if info is not None else {}
    if labels.get("envman.test-stack-digest") != digest:
        old = info.id if info else None
        for _ in engine.build(deterministic_tar(files), ref, labels={
            "envman.test-fixture": "true", "envman.managed": "true", "envman.name": stack_name,
            "envman.test-stack-digest": digest,
        }):
            pass
        info = engine.inspect_image(ref)
        if old and old != info.id:
            try:
                engine.remove_image(old)  # the previous recipe's image, now untagged
            except Exception:  # still used by a child image or a container: leave it
                pass
    return info.id


@pytest.fixture(scope="module")
def stacks(docker_engine, standin, workdir, matrix_files):
    """The two promoted stack images and the state dirs (root's and uid 1234's) that know them."""
    states = {"root": workdir / "state-root", "other": workdir / "state-other"}
    ids = {}
    for query, (name, base, suite, cuda, _py) in STACKS.items():
        standin(base, suite=suite, cuda_version=cuda)
        ids[name] = fixture_stack_image(docker_engine, name, base, stable_tag(matrix_files, name))
        for state in states.values():
            old = os.environ.get("ENVMAN_STATE_DIR")
            os.environ["ENVMAN_STATE_DIR"] = str(state)
            try:
                save_report(SmokeReport(
                    stack=name, image=stable_tag(matrix_files, name), image_id=ids[name], overall="pass",
                    reason="test fixture: stand-in stack image, no probe was run", gpus_requested=False,
                    probe=None, exit_code=0, stderr_tail="",
                ))
            finally:
                if old is None:
                    os.environ.pop("ENVMAN_STATE_DIR", None)
                else:
                    os.environ["ENVMAN_STATE_DIR"] = old
    return ids, states


# --------------------------------------------------------------------------- helpers


def _as_user(uid: int, gid: int):
    """preexec_fn: become uid:gid, keeping the docker socket's group (the docker group)."""
    sock = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    sock_gid = os.stat(sock[len("unix://"):]).st_gid if sock.startswith("unix://") else gid

    def become() -> None:
        os.setgroups([sock_gid])
        os.setgid(gid)
        os.setuid(uid)

    return become


def child_pythonpath() -> str:
    import site

    return os.pathsep.join([str(ROOT), *site.getsitepackages()])


_PYTHONS: dict[int, str | None] = {}


def python_for(uid: int) -> str | None:
    """An interpreter uid can execute that imports envman from this checkout and environment.

    The test's own interpreter may live where only root can read (e.g. under /root/.pyenv); a
    system Python of the same version then runs the same code with the same site-packages.
    """
    if uid == os.getuid():
        return sys.executable
    if uid not in _PYTHONS:
        _PYTHONS[uid] = None
        v = f"{sys.version_info.major}.{sys.version_info.minor}"
        candidates = [sys.executable, os.path.realpath(sys.executable), getattr(sys, "_base_executable", ""),
                      f"/usr/bin/python{v}", f"/usr/local/bin/python{v}", shutil.which(f"python{v}") or ""]
        for exe in dict.fromkeys(c for c in candidates if c):
            try:
                p = subprocess.run([exe, "-c", "import envman.cli, docker, filelock, typer"], capture_output=True,
                                   env={"PYTHONPATH": child_pythonpath(), "PATH": os.environ.get("PATH", "")},
                                   preexec_fn=_as_user(uid, uid), timeout=60, cwd="/")
            except (OSError, subprocess.SubprocessError):
                continue
            if p.returncode == 0:
                _PYTHONS[uid] = exe
                break
    return _PYTHONS[uid]


def envman(matrix_files, config: Path, state: Path, *args: str, cwd: Path, uid: int | None = None,
           popen: bool = False, home: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("ENVMAN_MATRIX",)}
    env.update(ENVMAN_CONFIG_DIR=str(config), ENVMAN_STATE_DIR=str(state), PYTHONDONTWRITEBYTECODE="1")
    if home is not None:
        env["HOME"] = str(home)
    python = sys.executable
    if uid is not None and uid != os.getuid():
        python = python_for(uid)
        env["PYTHONPATH"] = child_pythonpath()
    argv = [python, "-m", "envman"]
    for f in matrix_files:
        argv += ["--matrix", f]
    argv += list(args)
    kw = dict(cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if uid is not None and uid != os.getuid():
        kw["preexec_fn"] = _as_user(uid, uid)
    if popen:
        return subprocess.Popen(argv, **kw)
    return subprocess.run(argv, timeout=900, **kw)


def tiny_wheel(dest: Path) -> Path:
    """A pure-Python wheel built by hand, to prove `pip install --user` works offline."""
    name = "envman_hello-0.1-py3-none-any.whl"
    files = {
        "envman_hello.py": "GREETING = 'hello from the user site'\n",
        "envman_hello-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: envman-hello\nVersion: 0.1\n",
        "envman_hello-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: envman-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{n},,\n" for n in files] + ["envman_hello-0.1.dist-info/RECORD,,\n"]
    with zipfile.ZipFile(dest / name, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr("envman_hello-0.1.dist-info/RECORD", "".join(record))
    return dest / name


def owners(root: Path, exclude: set[str]) -> dict[str, int]:
    out = {}
    for p in root.rglob("*"):
        rel = str(p.relative_to(root))
        if rel.split("/")[0] not in exclude:
            out[rel] = p.lstat().st_uid
    return out


# --------------------------------------------------------------------------- the test


def test_two_projects_two_cuda_versions_side_by_side(docker_engine, stacks, matrix_files, workdir):
    ids, states = stacks
    me = os.getuid()
    other = OTHER_UID if me == 0 else me  # as non-root the test's own uid already proves ownership
    if other != me and python_for(other) is None:
        pytest.fail(f"no Python interpreter that uid {other} can run imports envman from {ROOT}: "
                    "install a system python3 of the same version, or run the tests as a non-root user")
    users = {"a": ("root", me), "b": ("other", other)}

    roots = {}
    for p, query in (("a", "torch-0.0.1-cuda11.8"), ("b", "torch-0.0.2-cuda12.8")):
        label, uid = users[p]
        root = workdir / f"project-{p}"
        root.mkdir()
        lines = [f'stack = "{query}"', f'name = "envman-test-{p}"']
        if p == "a":  # A has its own requirement (→ a project image); B has none (→ the stack image itself)
            lines.append('requirements = ["six==1.16.0"]')
        else:
            lines.append('gpus = "none"')  # B asks for a CPU run in its file; A on the command line
        (root / "envman.toml").write_text("\n".join(lines) + "\n")
        tiny_wheel(root)
        config, home = workdir / f"config-{label}", workdir / f"home-{label}"
        for d in (config, home, states[label]):
            d.mkdir(exist_ok=True)
        for d in (root, config, home, states[label], *states[label].rglob("*")):
            os.chown(d, uid, uid)
        for f in root.iterdir():
            os.chown(f, uid, uid)
        roots[p] = root
        r = envman(matrix_files, config, states[label], "project", "add", str(root), cwd=workdir, uid=uid, home=home)
        assert r.returncode == 0, r.stderr

    def run(p: str, *args: str, popen: bool = False):
        label, uid = users[p]
        return envman(matrix_files, workdir / f"config-{label}", states[label], "run", *args, cwd=workdir,
                      uid=uid, home=workdir / f"home-{label}", popen=popen)

    project_images_before = {t for i in docker_engine.list_images({"envman.project": "envman-test-b"}) for t in i.tags}
    try:
        # Asking for GPUs where there are none fails, with the fix; never a silent CPU run.
        host_has_gpu = shutil.which("nvidia-smi") is not None and docker_engine.info().nvidia_runtime
        if not host_has_gpu:
            r = run("a", "envman-test-a", "--", "true")
            assert r.returncode == 1, (r.stdout, r.stderr)
            assert "--no-gpu" in r.stderr and r.stderr.count("\n") == 1, r.stderr

        # A's project image is built by its first run; the runs below then start at once.
        r = run("a", "envman-test-a", "--no-gpu", "--", "true")
        assert r.returncode == 0, r.stderr

        # Both at once: each sees its own CUDA and Python, and writes into its own mount.
        script = (
            'echo "start $(date +%s.%N)"; echo "cuda $CUDA_VERSION"; '
            'python -c "import sys; print(\'python %d.%d\' % sys.version_info[:2])"; '
            'echo "id $(id -u):$(id -g) home $HOME pwd $(pwd)"; '
            'mkdir -p out/nested && echo x > out/nested/file && touch "made-by-$ENVMAN_PROJECT"; '
            'python -c "import six; print(\'six\', six.__version__)" 2>/dev/null || echo "six none"; '
            'sleep 3; echo "end $(date +%s.%N)"'
        )
        procs = {
            "a": run("a", "envman-test-a", "--no-gpu", "--", "sh", "-c", script, popen=True),
            "b": run("b", "envman-test-b", "--", "sh", "-c", script, popen=True),
        }
        outs = {}
        for p, proc in procs.items():
            out, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, (p, out, err)
            outs[p] = dict(line.split(" ", 1) for line in out.strip().splitlines())

        a, b = outs["a"], outs["b"]
        assert a["cuda"] == "11.8.0" and a["python"] == "3.11"
        assert b["cuda"] == "12.8.1" and b["python"] == "3.13"
        assert a["six"] == "1.16.0" and b["six"] == "none"  # A's requirement is in A's image only
        assert a["id"].startswith(f"{me}:{me} ") and b["id"].startswith(f"{other}:{other} ")
        assert a["id"].endswith("home /home/envman pwd /workspace")
        # They really ran side by side.
        assert float(a["start"]) < float(b["end"]) and float(b["start"]) < float(a["end"])

        for p, uid in (("a", me), ("b", other)):
            made = owners(roots[p], exclude=set())
            assert f"made-by-envman-test-{p}" in made and "out/nested/file" in made
            assert set(made.values()) == {uid}, made  # everything in the project is the invoker's

        # A got a content-addressed project image FROM its stack; B none at all.
        a_images = docker_engine.list_images({"envman.project": "envman-test-a"})
        assert len(a_images) == 1
        # one image, tagged under its recipe and (it wrote envman.lock) under the locked recipe too;
        # keyed by the registered identity (name + a hash of the real root), not by the name alone
        a_tags = a_images[0].tags
        assert 1 <= len(a_tags) <= 2 and (roots["a"] / "envman.lock").is_file()
        prefix = f"envman/project-{project_identity('envman-test-a', roots['a'])}:"
        assert all(t.startswith(prefix) for t in a_tags), a_tags
        labels = a_images[0].labels
        assert labels["envman.managed"] == "true" and labels["envman.name"] == STACKS["torch-0.0.1-cuda11.8"][0]
        b_images = {t for i in docker_engine.list_images({"envman.project": "envman-test-b"}) for t in i.tags}
        assert b_images == project_images_before

        # pip install --user works and persists in the project's HOME, owned by its user.
        wheel = "/workspace/envman_hello-0.1-py3-none-any.whl"
        r = run("b", "envman-test-b", "--", "pip", "install", "--user", "--no-index", "--no-deps", "-q", wheel)
        assert r.returncode == 0, r.stderr
        r = run("b", "envman-test-b", "--", "python", "-c", "import envman_hello; print(envman_hello.GREETING)")
        assert r.returncode == 0 and r.stdout.strip() == "hello from the user site", r.stderr
        home_b = states["other"] / "homes" / project_identity("envman-test-b", roots["b"])
        assert {p.stat().st_uid for p in home_b.rglob("*")} == {other}

        # Exit codes pass through; a second run of A reuses its image (no build output).
        r = run("a", "envman-test-a", "--no-gpu", "--", "sh", "-c", "exit 7")
        assert r.returncode == 7, r.stderr
        assert "building the project image" not in r.stderr
        r = run("b", "envman-test-b", "--", "sh", "-c", "kill -TERM $$")
        assert r.returncode == 128 + 15, r.stderr  # killed by a signal: docker's 128+N, passed through
    finally:
        for img in docker_engine.list_images({"envman.project": "envman-test-a"}):
            for t in img.tags or (img.id,):
                docker_engine.remove_image(t, force=True)


def test_missing_stack_image_fails_preflight_with_the_fix(docker_engine, matrix_files, workdir):
    root = workdir / "project-c"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-0.0.1-cuda11.8"\nname = "envman-test-c"\ngpus = "none"\n')
    state = workdir / "state-c"
    # A state dir with no report for the (possibly existing) stack image, and a stack whose
    # image does not exist: --stack points at a name no image was built for.
    r = envman(matrix_files, workdir / "config-c", state, "run", str(root), "--stack", "torch-0.0.2-cuda12.8",
               "--", "true", cwd=workdir)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and ("envman smoke" in r.stderr or "envman build" in r.stderr), r.stderr


def test_ports_on_localhost_ctrl_c_and_tty(docker_engine, stacks, matrix_files, workdir):
    import pty
    import signal
    import socket
    import time
    import urllib.request

    _ids, states = stacks
    root = workdir / "project-d"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-0.0.2-cuda12.8"\nname = "envman-test-d"\ngpus = "none"\n')
    (root / "index.html").write_text("served from the project\n")
    config, state = workdir / "config-d", states["root"]
    assert envman(matrix_files, config, state, "project", "add", str(root), cwd=workdir).returncode == 0

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The service listens on all interfaces inside; envman publishes it on 127.0.0.1 only.
    server = envman(matrix_files, config, state, "run", "envman-test-d", "-p", f"{port}:8000", "--",
                    "python", "-m", "http.server", "8000", "--bind", "0.0.0.0", cwd=workdir, popen=True)
    try:
        body, deadline = None, time.monotonic() + 60
        while body is None and time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=2).read().decode()
            except OSError:
                time.sleep(0.3)
        assert body == "served from the project\n"
        (c,) = docker_engine.list_containers({"envman.project": "envman-test-d"})
        ports = json.loads(subprocess.run(["docker", "inspect", "-f", "{{json .HostConfig.PortBindings}}", c.id],
                                          capture_output=True, text=True, check=True).stdout)
        assert ports == {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
        # Ctrl-C reaches the command (http.server says so and exits 0); the container is gone.
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=60)
        assert "Keyboard interrupt received" in out + err and server.returncode == 0, (server.returncode, out, err)
        deadline = time.monotonic() + 20
        while docker_engine.list_containers({"envman.project": "envman-test-d"}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert docker_engine.list_containers({"envman.project": "envman-test-d"}) == []
    finally:
        if server.poll() is None:
            server.kill()

    # A command with no handler of its own dies of the SIGINT: 128 + 2, through --init and docker.
    sleeper = envman(matrix_files, config, state, "run", "envman-test-d", "--", "sleep", "60", cwd=workdir, popen=True)
    try:
        deadline = time.monotonic() + 60
        while not docker_engine.list_containers({"envman.project": "envman-test-d"}) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        sleeper.send_signal(signal.SIGINT)
        sleeper.communicate(timeout=60)
        assert sleeper.returncode == 130, sleeper.returncode
    finally:
        if sleeper.poll() is None:
            sleeper.kill()

    # A TTY only when run from one.
    plain = envman(matrix_files, config, state, "run", "envman-test-d", "--", "sh", "-c",
                   "test -t 1 && echo tty || echo no-tty", cwd=workdir)
    assert plain.stdout.strip() == "no-tty", plain.stderr
    master, slave = pty.openpty()
    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(config), "ENVMAN_STATE_DIR": str(state)}
    argv = [sys.executable, "-m", "envman", *[a for f in matrix_files for a in ("--matrix", f)],
            "run", "envman-test-d", "--", "sh", "-c", "test -t 0 && test -t 1 && echo tty || echo no-tty"]
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=env, cwd=workdir)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:  # EIO: the other end closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        proc.wait(timeout=120)
        os.close(master)
    assert proc.returncode == 0 and b"no-tty" not in out and b"tty" in out, (out, proc.stderr.read())
