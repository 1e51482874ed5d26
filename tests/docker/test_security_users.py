"""Two real users on one engine: a planted project file, secrets, hardening.

Real: two Linux users created here (``useradd``; removed at the end), each running envman
through ``runuser`` with its own config, state and cache directories; the Docker engine; the
containers and what they see; ``/proc/*/cmdline`` of every process on the host while a run
goes on. Fixtures: the promoted stack image and its smoke report (``tests/docker/test_projects``
builds them FROM a stand-in base, see there).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from envman.images.build import SmokeReport, save_report
from tests.support.multiuser import engine_users

from .test_projects import STACKS, child_pythonpath, fixture_stack_image, matrix_files, python_for, stable_tag, workdir  # noqa: F401

pytestmark = [pytest.mark.docker]

USERS = ("envmant-a", "envmant-b")
QUERY = "torch-0.0.1-cuda11.8"
STACK, BASE, SUITE, CUDA, _PY = STACKS[QUERY]


def _fail_or_skip(reason: str):
    from tests.conftest import in_ci

    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def users(docker_engine):
    """envmant-a and envmant-b, users of the engine (see ``engine_users``), removed at the end."""
    with engine_users(USERS) as created:
        yield {u.name: pwd.getpwnam(u.name) for u in created}


@pytest.fixture(scope="module")
def stack_image(docker_engine, standin, matrix_files):
    standin(BASE, suite=SUITE, cuda_version=CUDA)
    return fixture_stack_image(docker_engine, STACK, BASE, stable_tag(matrix_files, STACK))


@pytest.fixture(scope="module")
def shared(users):
    """A shared, world-writable scratch directory with the sticky bit (like /tmp or /scratch)."""
    d = Path(tempfile.mkdtemp(prefix="envmant-scratch-"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def user_dirs(user: pwd.struct_passwd, stack_id: str) -> dict[str, str]:
    """The user's own envman directories, and the smoke report of the stack image in them."""
    home = Path(user.pw_dir)
    dirs = {"ENVMAN_CONFIG_DIR": home / "cfg", "ENVMAN_STATE_DIR": home / "state", "ENVMAN_CACHE_DIR": home / "cache"}
    old = os.environ.get("ENVMAN_STATE_DIR")
    os.environ["ENVMAN_STATE_DIR"] = str(dirs["ENVMAN_STATE_DIR"])
    try:
        save_report(SmokeReport(stack=STACK, image=f"envman/{STACK}:latest", image_id=stack_id, overall="pass",
                                reason="test fixture: stand-in stack image", gpus_requested=False, probe=None,
                                exit_code=0, stderr_tail=""))
    finally:
        if old is None:
            os.environ.pop("ENVMAN_STATE_DIR", None)
        else:
            os.environ["ENVMAN_STATE_DIR"] = old
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(home)], check=True)
    return {k: str(v) for k, v in dirs.items()}


def as_user(user: pwd.struct_passwd, dirs: dict[str, str], matrix: list[str], *args: str, cwd: Path,
            extra_env: dict[str, str] | None = None, popen: bool = False):
    """``envman ARGS`` as ``user`` through runuser; secrets travel in the environment only."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": child_pythonpath(),
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", **dirs, **(extra_env or {})}
    for k in ("DOCKER_HOST", "CI"):
        if k in os.environ:
            env[k] = os.environ[k]
    python = python_for(user.pw_uid)  # the test's own interpreter may sit where other users cannot reach
    if python is None:
        _fail_or_skip(f"no Python that {user.pw_name} can run imports envman (install a system python3 of this version)")
    argv = ["runuser", "-u", user.pw_name, "--", python, "-m", "envman"]
    for f in matrix:
        argv += ["--matrix", f]
    argv += list(args)
    kw = dict(cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if popen:
        return subprocess.Popen(argv, **kw)
    return subprocess.run(argv, timeout=600, **kw)


def write_as(user: pwd.struct_passwd, path: Path, text: str) -> None:
    subprocess.run(["runuser", "-u", user.pw_name, "--", "sh", "-c", 'cat > "$1"', "sh", str(path)],
                   input=text, text=True, check=True)


def test_a_file_planted_by_b_is_refused_for_a(users, stack_image, shared, matrix_files):
    a, b = users["envmant-a"], users["envmant-b"]
    dirs = user_dirs(a, stack_image)
    planted = shared / "envman.toml"
    write_as(b, planted, f'stack = "{QUERY}"\ncommand = ["sh", "-c", "echo planted"]\n[environment]\nX = "1"\n')
    work = shared / "a-work"
    subprocess.run(["runuser", "-u", a.pw_name, "--", "mkdir", str(work)], check=True)

    # walking up from A's directory finds B's file and refuses it, naming why
    p = as_user(a, dirs, matrix_files, "run", "--dry-run", "--no-gpu", cwd=work)
    assert p.returncode == 2, p.stderr
    assert "belongs to user envmant-b" in p.stderr and "was not used" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr

    # named explicitly it is still untrusted: one refusal listing what it asks for
    p = as_user(a, dirs, matrix_files, "run", str(planted), "--dry-run", "--no-gpu", cwd=work)
    assert p.returncode == 2 and "not trusted" in p.stderr and "command: sh -c" in p.stderr and "environment: X" in p.stderr
    assert f"envman project trust {planted}" in p.stderr

    # after A reads and trusts it, A may run it by name
    t = as_user(a, dirs, matrix_files, "project", "trust", str(planted), cwd=work)
    assert t.returncode == 0, t.stderr
    trust_file = Path(dirs["ENVMAN_CONFIG_DIR"]) / "trust.json"
    assert stat.S_IMODE(trust_file.stat().st_mode) == 0o600 and trust_file.stat().st_uid == a.pw_uid
    p = as_user(a, dirs, matrix_files, "run", str(planted), "--dry-run", "--no-gpu", cwd=work)
    assert p.returncode == 0, p.stderr
    # B edits the file afterwards: A's trust no longer holds
    write_as(b, planted, 'ports = [8888]\n' + planted.read_text())
    p = as_user(a, dirs, matrix_files, "run", str(planted), "--dry-run", "--no-gpu", cwd=work)
    assert p.returncode == 2 and "changed since you trusted it" in p.stderr and "8888" in p.stderr

    # some things no file gets, trusted or not
    write_as(b, planted, f'stack = "{QUERY}"\nmounts = ["~:/h"]\n')
    as_user(a, dirs, matrix_files, "project", "trust", str(planted), cwd=work)
    p = as_user(a, dirs, matrix_files, "run", str(planted), "--dry-run", "--no-gpu", cwd=work)
    assert p.returncode == 2 and "home directory" in p.stderr and "--allow-dangerous-mount" in p.stderr


def _cmdlines() -> list[bytes]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    out.append(fh.read())
            except OSError:
                continue
    return out


def test_secrets_reach_the_container_but_no_command_line_and_no_cache(users, stack_image, matrix_files):
    a = users["envmant-a"]
    dirs = user_dirs(a, stack_image)
    root = Path(a.pw_dir) / "proj"
    file_secret = "hf_" + secrets.token_hex(16)
    env_secret = "cli_" + secrets.token_hex(16)
    subprocess.run(["runuser", "-u", a.pw_name, "--", "mkdir", str(root)], check=True)
    write_as(a, root / "envman.toml", f'stack = "{QUERY}"\n[environment]\nHF_TOKEN = "{file_secret}"\n')
    assert as_user(a, dirs, matrix_files, "project", "add", str(root), cwd=root).returncode == 0
    script = ('printf "%s %s\\n" "$HF_TOKEN" "$OTHER_TOKEN" > /workspace/seen; id -u >> /workspace/seen; '
              'grep CapEff /proc/self/status >> /workspace/seen; echo "gpu=$NVIDIA_VISIBLE_DEVICES" >> /workspace/seen; '
              'sleep 3')
    for attempt in ("full", "cached"):
        (root / "seen").unlink(missing_ok=True)
        proc = as_user(a, dirs, matrix_files, "run", str(root), "--no-gpu", "-e", "OTHER_TOKEN",
                       "-e", "NVIDIA_VISIBLE_DEVICES=all", "--", "sh", "-c", script,
                       cwd=root, extra_env={"OTHER_TOKEN": env_secret}, popen=True)
        leaks, samples = [], 0
        while proc.poll() is None:
            for line in _cmdlines():
                samples += 1
                if file_secret.encode() in line or env_secret.encode() in line:
                    leaks.append(line)
            time.sleep(0.05)
        out, err = proc.communicate()
        assert proc.returncode == 0, (attempt, err)
        assert samples > 100 and not leaks, (attempt, leaks)
        seen = (root / "seen").read_text().splitlines()
        assert seen[0] == f"{file_secret} {env_secret}", attempt  # the values did arrive
        assert seen[1] == str(a.pw_uid)
        assert seen[2].split() == ["CapEff:", "0000000000000000"]  # --cap-drop ALL, and the entrypoint still ran
        assert seen[3] == "gpu=void"  # a --no-gpu run never passes the user's NVIDIA_VISIBLE_DEVICES
        assert "NVIDIA_VISIBLE_DEVICES" in err  # said so
    cache = Path(dirs["ENVMAN_CACHE_DIR"]) / "runs.json"
    assert cache.is_file()
    text = cache.read_text()
    assert file_secret not in text and env_secret not in text
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600


def _tar_of(files: dict[str, str]) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_planted_image_with_my_uid_in_its_verdict_labels_does_not_move_my_pinned_run(docker_engine, standin, tmp_path,
                                                                                        monkeypatch):
    """Attack (a shared engine): another engine user builds ``FROM`` any image of theirs, adds
    envman's verdict labels (pass, ``by-uid`` = the victim, ``at`` = the far future, ``rootfs`` =
    the image's own layer digest: a ``LABEL`` adds no layer, so the verdict is bound to the planted
    image's own layers) and tags it as the stack's stable tag. envman must not read that verdict as
    the victim's own promotion: the victim's pinned run stays on its pin."""
    import os
    import uuid
    from dataclasses import replace

    from envman import labels as L
    from envman.engine.api import ImageInfo
    from envman.images import pins, store
    from envman.images.events import BuildStream

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    base = standin.rootfs("bookworm")
    tag = f"envman-h35-{uuid.uuid4().hex[:8]}/planted:latest"
    first = docker_engine.inspect_image(base)
    forged = L.SmokeVerdict(status="pass", by_uid=os.getuid(), by_user="me", at=10**10,
                            rootfs=store.rootfs_digest(first))
    labels = "\n".join(f'LABEL {k}="{v}"' for k, v in forged.to_labels().items())
    try:
        BuildStream().read(docker_engine.build(_tar_of({"Dockerfile": f"FROM {base}\n{labels}\n"}), tag, labels={}))
        planted = docker_engine.inspect_image(tag)
        assert planted is not None and planted.layers == first.layers  # LABEL adds no layer
        assert store.image_verdict(planted).status == "pass"  # a verdict on its own layers

        pinned = ImageInfo("sha256:" + "a" * 64, layers=("sha256:" + "1" * 64,),
                           labels=replace(forged, at=100, rootfs=store.rootfs_digest(
                               ImageInfo("x", layers=("sha256:" + "1" * 64,)))).to_labels())
        pin = pins.Pin(stack="s", image_id=pinned.id, at=200)
        choice = pins.choose("s", planted, pinned, pin, uid=os.getuid(), verdict=store.image_verdict,
                             rootfs=store.rootfs_digest)
        assert choice.info is not None and choice.info.id == pinned.id, "the planted image took over the pinned run"
    finally:
        try:
            docker_engine.remove_image(tag)
        except Exception:
            pass
