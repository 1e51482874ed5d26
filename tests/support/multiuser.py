"""Real users for the shared-engine tests: create them, give them an interpreter, run envman as them.

* :func:`user_python` makes an environment other users can execute: a venv of the system Python
  in a world-readable temporary directory, whose ``.pth`` file points at copies of this checkout's
  ``envman`` package, templates and matrices and of the test interpreter's site-packages (the
  checkout and its ``.venv`` may live where only root can read, e.g. under ``/root``).
* :class:`TestUser` is a ``useradd``-created account (removed with ``userdel -r`` on teardown);
  :meth:`TestUser.run` runs a command as it with ``runuser``, in a clean environment.
* :func:`engine_users` is the one way the tests make real users of the Docker engine: created
  with access to its socket (the socket's group, else a mode change restored at the end), removed
  with their homes and processes at the end; :func:`require_user_tools` fails in CI (skips
  elsewhere) where users cannot be created.
* :data:`STANDIN_DRIVER` builds, smoke-tests and promotes a stack through ``envman.images.build`` with a
  stand-in render: a tiny image whose ``python`` prints a passing probe document (so no framework
  is downloaded); everything after the render (content-addressed tags, the verdict image, the
  stable tag, the labels) is envman's real code on the real engine.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

DOCKER_SOCKET = "/var/run/docker.sock"

ROOT = Path(__file__).resolve().parents[2]


def system_python() -> str | None:
    """A system interpreter of the test's own minor version (its site-packages must fit)."""
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (f"/usr/bin/python{v}", f"/usr/local/bin/python{v}"):
        if os.access(exe, os.X_OK):
            return exe
    return None


def user_python(where: Path) -> Path:
    """The ``python`` of a venv under ``where`` that any user can run and that imports envman."""
    exe = system_python()
    if exe is None:
        raise RuntimeError(f"no system python{sys.version_info.major}.{sys.version_info.minor} for other users")
    where.mkdir(parents=True, exist_ok=True)
    where.chmod(0o755)
    src, deps = where / "src", where / "site"
    for name in ("envman", "templates", "matrices"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    if (ROOT / ".hadolint.yaml").is_file():
        shutil.copy2(ROOT / ".hadolint.yaml", src / ".hadolint.yaml")
    deps.mkdir()
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            if entry.name.startswith(("envman", "__editable__", "_envman")) or entry.suffix == ".pth":
                continue
            dest = deps / entry.name
            if entry.is_dir():
                shutil.copytree(entry, dest, symlinks=True, dirs_exist_ok=True)
            elif not dest.exists():
                shutil.copy2(entry, dest)
    subprocess.run([exe, "-m", "venv", "--without-pip", str(where / "venv")], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(where / "venv"), "platbase": str(where / "venv")})
    Path(purelib).mkdir(parents=True, exist_ok=True)
    (Path(purelib) / "envman-tests.pth").write_text(f"{src}\n{deps}\n")
    for dirpath, dirnames, filenames in os.walk(where):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444)
    return where / "venv" / "bin" / "python"


@dataclass(frozen=True)
class TestUser:
    name: str
    uid: int
    gid: int
    home: Path

    __test__ = False  # not a test class

    def env(self, **extra: str) -> dict[str, str]:
        # the test's stand-in bases, which every user builds on (tests/support/standin.py vouches for them)
        trusted = {"ENVMAN_TRUSTED_IMAGES": os.environ["ENVMAN_TRUSTED_IMAGES"]} if os.environ.get("ENVMAN_TRUSTED_IMAGES") else {}
        return {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **trusted, **extra}

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600, input: str | None = None) -> subprocess.CompletedProcess:
        """``argv`` as this user (``runuser``, supplementary groups from /etc/group), clean env."""
        full = ["runuser", "-u", self.name, "--", "env", "-i", *(f"{k}={v}" for k, v in (env or self.env()).items()),
                *argv]
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=str(cwd or self.home),
                              input=input)


def create_user(name: str, groups: tuple[str, ...] = ()) -> TestUser:
    """``useradd -m`` (a leftover of an interrupted run is removed first)."""
    delete_user(name)
    argv = ["useradd", "-m", "-s", "/bin/sh", *(["-G", ",".join(groups)] if groups else []), name]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    pw = pwd.getpwnam(name)
    return TestUser(name, pw.pw_uid, pw.pw_gid, Path(pw.pw_dir))


def delete_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    # The test user's own leftovers (its podman service, podman's pause process), one by one by id.
    found = subprocess.run(["pgrep", "-u", name], capture_output=True, text=True).stdout.split()
    for pid in found:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError, PermissionError):
            pass
    subprocess.run(["userdel", "-r", "-f", name], capture_output=True)


def require_user_tools(what: str, tools: tuple[str, ...] = ("useradd", "userdel", "runuser")) -> None:
    """Fail (in CI) or skip unless this process is root with ``tools``; ``what`` says which tests."""
    import pytest

    from tests.conftest import in_ci

    missing = [t for t in tools if shutil.which(t) is None]
    why = f"missing {', '.join(missing)}" if missing else ("needs root" if os.geteuid() != 0 else None)
    if why is None:
        return
    msg = f"{what}: {why}"
    if in_ci():
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@contextmanager
def engine_users(names: tuple[str, ...], socket: str = DOCKER_SOCKET) -> Iterator[list[TestUser]]:
    """Users ``names`` who may use the engine at ``socket``: members of its group, or, where it
    has none, the socket opened to others for the duration; all removed at the end."""
    require_user_tools("the multi-user tests create users")
    st = os.stat(socket)
    group = grp.getgrgid(st.st_gid).gr_name if st.st_gid != 0 else None
    old_mode = None
    if group is None:
        old_mode = stat.S_IMODE(st.st_mode)
        os.chmod(socket, old_mode | 0o006)
    users: list[TestUser] = []
    try:
        for name in names:
            users.append(create_user(name, groups=(group,) if group else ()))
        yield users
    finally:
        for name in names:
            delete_user(name)
        if old_mode is not None:
            os.chmod(socket, old_mode)


#: ``python DRIVER MATRIX STACK VARIANT BASE``: build, smoke, promote a stand-in build of STACK.
STANDIN_DRIVER = r'''
import hashlib, json, sys
from envman.images import build as B
from envman.engine.context import deterministic_tar
from envman.engine.docker import Engine
from envman.matrix.source import MatrixSource
from envman.state import stable_ref

matrix, query, variant, base = sys.argv[1:5]
stack = MatrixSource.of([matrix]).resolve(query)
DOC = {"probe_version": 1, "overall": "pass", "reason": "stand-in probe (%s)" % variant,
       "checks": [{"name": "standin", "status": "pass"}],
       "expect": {"found": True, "path": "/opt/envman/stack.json",
                  "stack": {k: stack.to_json()[k] for k in ("framework", "framework_version", "cuda")}}}
PROBE = "#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n" % json.dumps(DOC)


class Ctx:
    render_hash = hashlib.sha256(f"stand-in {query} {variant} {base}".encode()).hexdigest()
    secrets = {}
    dockerfile = "FROM %s\nCOPY python /usr/local/bin/python\n" % base
    files = {"Dockerfile": dockerfile.encode(), "python": PROBE.encode()}
    modes = {"Dockerfile": 0o644, "python": 0o755}

    def tar(self):
        return deterministic_tar({name: (data, self.modes[name]) for name, data in self.files.items()})


B._render = lambda *args, **kw: Ctx()
phases = []
with Engine.connect() as engine:
    res = B.build_smoke_promote(engine, stack, on_phase=phases.append)
    stable = engine.inspect_image(stable_ref(stack))
print(json.dumps({"stack": stack.name, "candidate": res.build.ref, "cached": res.build.cached,
                  "smoked": "smoke" in phases, "overall": res.smoke.overall, "promoted": res.promoted,
                  "stable_id": stable.id if stable is not None else None}))
'''
