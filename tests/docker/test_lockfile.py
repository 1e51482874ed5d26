"""envman.lock on a real engine: a stand-in stack with an offline wheelhouse builds a project
image, gets envman.lock with the wheels' real hashes, reuses it, rebuilds from it with
--require-hashes, and refuses a lock that adds a package or carries a wrong hash."""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from pathlib import Path

import pytest

from envman.errors import BuildError
from envman.project.lock import LOCK_NAME, read_lock
from envman.project.image import build_project_image, project_repository
from envman.project.file import load_project
from tests.docker.test_projects import STACKS, matrix_files, stacks, workdir  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.docker]

STACK = STACKS["torch-0.0.1-cuda11.8"][0]


def wheel(dest: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    files = {
        f"{name}.py": f"NAME = {name!r}\n",
        f"{name}-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: " + name.replace("_", "-")
        + "\nVersion: 1.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{name}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: envman-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    path = dest / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr(f"{name}-1.0.dist-info/RECORD", "".join(f"{n},,\n" for n in files) + f"{name}-1.0.dist-info/RECORD,,\n")
    return path


def test_build_writes_the_lock_and_the_next_build_installs_from_it(docker_engine, stacks, workdir, unique_tag,
                                                                   test_labels, monkeypatch):
    ids, _ = stacks
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(workdir / "state-lock"))
    ctx = workdir / "lock-base"
    (ctx / "wheels").mkdir(parents=True)
    wheels = {n: wheel(ctx / "wheels", n, r) for n, r in
              (("lkt_app", ("lkt-dep>=1",)), ("lkt_dep", ()), ("lkt_evil", ()))}
    sha = {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in wheels.items()}
    files = {"Dockerfile": (f"FROM {ids[STACK]}\nCOPY wheels /srv/wheelhouse\n"
                            "ENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/srv/wheelhouse\n").encode()}
    files.update({f"wheels/{p.name}": p.read_bytes() for p in wheels.values()})
    from envman.engine.context import deterministic_tar

    base_ref = unique_tag("lockbase")
    root = workdir / "lockproj"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-0.0.1-cuda11.8"\nrequirements = ["lkt-app"]\n')
    project = load_project(root)
    try:
        for _ in docker_engine.build(deterministic_tar(files), base_ref, labels=test_labels):
            pass
        base_id = docker_engine.inspect_image(base_ref).id

        ref = build_project_image(docker_engine, project, STACK, base_id)
        lock = read_lock(root)
        assert lock is not None and lock.base_image == base_id and lock.stack == STACK
        assert [p.line() for p in lock.packages] == [f"lkt-app==1.0 --hash=sha256:{sha['lkt_app']}",
                                                     f"lkt-dep==1.0 --hash=sha256:{sha['lkt_dep']}"]
        assert stat.S_IMODE(os.stat(root / LOCK_NAME).st_mode) == 0o644
        text = (root / LOCK_NAME).read_text()

        # the next build reuses the image under the locked ref; a rebuild installs from the lock
        assert build_project_image(docker_engine, project, STACK, base_id) == ref
        events = []
        assert build_project_image(docker_engine, project, STACK, base_id, nocache=True, on_event=events.append) == ref
        log = "\n".join(str(e) for e in events)
        assert "--require-hashes" in log, log[-2000:]
        assert (root / LOCK_NAME).read_text() == text  # unchanged by a locked build
        out = docker_engine.run(ref, ["/opt/venv/bin/python", "-c", "import lkt_app, lkt_dep; print('ok')"], network="none")
        assert out.exit_code == 0 and out.stdout.strip() == "ok", out.stderr

        # a lock that adds a package (with its real hash) or carries a wrong hash does not build
        evil = text.replace("packages = [\n", f'packages = [\n    "lkt-evil==1.0 --hash=sha256:{sha["lkt_evil"]}",\n')
        (root / LOCK_NAME).write_text(evil)
        with pytest.raises(BuildError) as e:
            build_project_image(docker_engine, project, STACK, base_id)
        assert "do not need: lkt-evil" in (e.value.log_tail or "")
        (root / LOCK_NAME).write_text(text.replace(sha["lkt_dep"], "0" * 64))
        with pytest.raises(BuildError) as e:
            build_project_image(docker_engine, project, STACK, base_id)
        assert "HASH" in (e.value.log_tail or "").upper()
    finally:
        for image in docker_engine.list_images({"envman.project-id": project.identity}):
            for tag in image.tags or (image.id,):
                docker_engine.remove_image(tag, force=True)
        docker_engine.remove_image(base_ref, force=True)


def test_requirements_the_stack_already_meets_lock_to_an_empty_lock_that_builds(docker_engine, stacks, workdir,
                                                                                  unique_tag, test_labels, monkeypatch):
    """A project whose requirements the stack image satisfies got `packages = [ ]`, then refused
    that lock on the next run. The empty lock is written, read back and built from."""
    from envman.engine.context import deterministic_tar

    ids, _ = stacks
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(workdir / "state-empty-lock"))
    base_ref = unique_tag("emptylock")
    files = {"Dockerfile": f"FROM {ids[STACK]}\nENV PIP_NO_INDEX=1\n".encode()}
    root = workdir / "emptylock"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-0.0.1-cuda11.8"\nrequirements = ["pip"]\n')  # the venv has pip
    project = load_project(root)
    try:
        for _ in docker_engine.build(deterministic_tar(files), base_ref, labels=test_labels):
            pass
        base_id = docker_engine.inspect_image(base_ref).id
        ref = build_project_image(docker_engine, project, STACK, base_id)
        lock = read_lock(root)
        assert lock is not None and lock.packages == () and lock.base_image == base_id
        text = (root / LOCK_NAME).read_text()
        events = []
        assert build_project_image(docker_engine, project, STACK, base_id, nocache=True, on_event=events.append) == ref
        assert "--require-hashes" in "\n".join(str(e) for e in events)
        assert (root / LOCK_NAME).read_text() == text
    finally:
        for image in docker_engine.list_images({"envman.project-id": project.identity}):
            for tag in image.tags or (image.id,):
                docker_engine.remove_image(tag, force=True)
        docker_engine.remove_image(base_ref, force=True)


def test_envman_lock_command_writes_keeps_and_upgrades(docker_engine, stacks, matrix_files, workdir):
    """`envman lock` from the command line, on a promoted stand-in stack: writes the lock, then
    says it is up to date, then re-resolves with --upgrade; a project without requirements is one
    line, exit 2."""
    import json

    from tests.docker.test_projects import envman

    _, states = stacks
    root = workdir / "lockcli"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-0.0.1-cuda11.8"\nname = "envman-test-lockcli"\n'
                                      'requirements = ["six==1.16.0"]\n')
    config = workdir / "config-lockcli"
    config.mkdir()
    state = states["root"]

    def lock(*args):
        return envman(matrix_files, config, state, "lock", str(root), *args, cwd=workdir)

    project = load_project(root)
    try:
        r = lock("--json")
        assert r.returncode == 0, r.stderr
        first = json.loads(r.stdout)
        assert first["changed"] is True and first["stack"] == STACK
        assert len(first["packages"]) == 1 and first["packages"][0].startswith("six==1.16.0 --hash=sha256:")
        assert read_lock(root).packages[0].line() == first["packages"][0]
        r = lock()
        assert r.returncode == 0 and ": up to date, 1 package on " in r.stdout, (r.stdout, r.stderr)
        r = lock("--upgrade", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["packages"] == first["packages"], r.stderr
        bare = workdir / "lockbare"
        bare.mkdir()
        (bare / "envman.toml").write_text('stack = "torch-0.0.1-cuda11.8"\n')
        r = envman(matrix_files, config, state, "lock", str(bare), cwd=workdir)
        assert r.returncode == 2 and "has no requirements to lock" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    finally:
        for image in docker_engine.list_images({"envman.project-id": project.identity}):
            for tag in image.tags or (image.id,):
                docker_engine.remove_image(tag, force=True)
