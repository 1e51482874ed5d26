"""Locally built stand-ins for the base images envman's Dockerfiles start ``FROM``.

Real ``nvidia/cuda`` images cannot be pulled where envman's tests run (no container registry
is reachable), so the tests build look-alikes and tag them with the real names. Only the base
is fake: everything a rendered Dockerfile does after ``FROM`` runs for real.

* :func:`ensure_rootfs_image` debootstraps a minimal Debian (``--variant=minbase``) from the
  machine's own apt mirror, read at run time from its apt sources, and ``docker import``\\ s it
  as ``envman-test/rootfs:<suite>``. The tarball is cached on disk, the image in the engine.
* :func:`ensure_standin` builds, ``FROM`` that root filesystem, an image tagged with the
  requested reference that carries the environment an ``nvidia/cuda`` image carries
  (``CUDA_VERSION``, ``NVIDIA_REQUIRE_CUDA``, ``NVIDIA_VISIBLE_DEVICES``, ...) and a marker
  ``/usr/local/cuda/version.json``. No CUDA library is inside: GPU checks must skip or fail on
  it, never pass.

Both are idempotent: an image that exists with the fixture label and the same recipe digest is
reused. Every fixture image carries ``envman.test-fixture=true``; the session cleanup in
``tests/conftest.py`` never removes those. Beware that image labels are inherited: an image
built ``FROM`` a stand-in carries ``envman.test-fixture=true`` and ``envman.standin-for`` too,
so a stand-in is recognised by ``envman.standin-for`` equal to one of its own tags.

Host trust and proxy settings are copied into the root filesystem **as a test-fixture measure
only**: the apt ``Acquire::*`` proxy/validity options of this machine and the extra CA
certificates it trusts (``/usr/local/share/ca-certificates``), so that apt and curl inside test
containers reach the mirror and package indexes the way the host does (on machines whose
egress goes through a TLS-intercepting proxy the public CA set is not enough). A real
``nvidia/cuda`` image has none of this; envman's own ``--ca-bundle`` option is what users get.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from envman.engine.context import deterministic_tar
from envman.images.aptsources import archive_mirror, host_apt_sources
from envman.engine.api import ImageInfo
from envman.engine.docker import Engine
from envman.errors import EngineError

FIXTURE_LABEL = {"envman.test-fixture": "true"}
ROOTFS_REPO = "envman-test/rootfs"
DEFAULT_SUITE = "bookworm"
# Suites known to work (Python 3.11 and 3.13 respectively from their own archives).
SUITES = ("bookworm", "trixie")
# nvidia/cuda base images ship these three; rendered Dockerfiles may rely on them.
ROOTFS_PACKAGES = ("ca-certificates", "curl", "gnupg")
# The recipe version: bump to rebuild every cached rootfs tarball and image.
ROOTFS_RECIPE = "1"

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
# apt settings worth carrying into the fixture: how to reach the mirror, and whether it may
# serve Release files past their Valid-Until (snapshot-style mirrors do).
_APT_KEYS = re.compile(r"^Acquire::(https?::Proxy(::\S+)?|Check-Valid-Until|Check-Date)\s")

_CUDA_TAG_RE = re.compile(r"^(?P<version>\d+\.\d+(?:\.\d+)?)-(?P<flavour>[a-z-]+?)-(?P<os>[a-z]+\d+(?:\.\d+)?)$")


class StandinError(RuntimeError):
    """A fixture could not be made; the message says which step and how to fix it."""


# --------------------------------------------------------------------------- host facts


def cache_dir() -> Path:
    """Where rootfs tarballs are kept between sessions (``ENVMAN_TEST_CACHE`` overrides)."""
    env = os.environ.get("ENVMAN_TEST_CACHE")
    if env:
        path = Path(env)
    else:
        from platformdirs import user_cache_dir

        path = Path(user_cache_dir("envman-test", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def debian_mirror() -> str:
    """The Debian archive this machine installs from (``ENVMAN_TEST_DEBIAN_MIRROR`` overrides).

    Picked from the apt sources at run time: the first source whose suites include a plain
    release name (no ``-security``/``-updates``) with the ``main`` component.
    """
    env = os.environ.get("ENVMAN_TEST_DEBIAN_MIRROR")
    if env:
        return env.rstrip("/")
    found = archive_mirror(host_apt_sources())
    if found:
        return found
    raise StandinError(
        "no Debian archive found in this machine's apt sources (/etc/apt/sources.list*); "
        "set ENVMAN_TEST_DEBIAN_MIRROR to one"
    )


def host_apt_settings() -> str:
    """This machine's apt proxy / release-validity settings, as an apt.conf snippet."""
    try:
        dump = subprocess.run(["apt-config", "dump"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    lines = sorted({line.strip() for line in dump.splitlines() if _APT_KEYS.match(line.strip())})
    return "".join(f"{line}\n" for line in lines)


def host_extra_cas() -> list[Path]:
    """CA certificates this machine trusts beyond the public set (``update-ca-certificates`` input)."""
    if not HOST_CA_DIR.is_dir():
        return []
    return sorted(p for p in HOST_CA_DIR.rglob("*.crt") if p.is_file())


def ensure_debootstrap() -> str:
    """Path to debootstrap, installing Debian's package when missing (needs root)."""
    found = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if found:
        return found
    if os.geteuid() != 0:
        raise StandinError("debootstrap is missing and this is not root: apt-get install debootstrap")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], check=True, env=env, capture_output=True)
    return shutil.which("debootstrap") or "/usr/sbin/debootstrap"


# --------------------------------------------------------------------------- root filesystem


def rootfs_ref(suite: str) -> str:
    return f"{ROOTFS_REPO}:{suite}"


def _rootfs_digest(suite: str) -> str:
    """What the tarball depends on: recipe, suite, mirror, packages, host apt settings and CAs."""
    h = hashlib.sha256()
    for part in (ROOTFS_RECIPE, suite, debian_mirror(), ",".join(ROOTFS_PACKAGES), host_apt_settings()):
        h.update(part.encode() + b"\0")
    for ca in host_extra_cas():
        h.update(ca.read_bytes())
    return h.hexdigest()[:16]


def ensure_rootfs_image(suite: str = DEFAULT_SUITE, *, engine: Engine | None = None) -> str:
    """``envman-test/rootfs:<suite>``, made once (debootstrap + import) and then reused."""
    if not re.fullmatch(r"[a-z]+", suite):
        raise StandinError(f"suite {suite!r}: expected a Debian release name such as {', '.join(SUITES)}")
    engine = engine or Engine.connect()
    ref = rootfs_ref(suite)
    digest = _rootfs_digest(suite)
    if _is_fixture(engine, ref, "envman.test-rootfs-digest", digest):
        return _vouched_for(engine, ref)

    from filelock import FileLock

    cache = cache_dir()
    with FileLock(str(cache / f"rootfs-{suite}.lock")):
        if _is_fixture(engine, ref, "envman.test-rootfs-digest", digest):
            return _vouched_for(engine, ref)
        previous = engine.inspect_image(ref)
        tarball = cache / f"rootfs-{suite}-{digest}.tar"
        if not tarball.exists():
            for stale in cache.glob(f"rootfs-{suite}-*.tar"):
                stale.unlink()
            _debootstrap_tarball(suite, tarball)
        engine.import_image(
            tarball,
            ref,
            changes=[
                'LABEL envman.test-fixture="true"',
                f'LABEL envman.test-rootfs="{suite}"',
                f'LABEL envman.test-rootfs-digest="{digest}"',
                f"ENV PATH={BASE_PATH}",
                "ENV LANG=C.UTF-8",
                'CMD ["bash"]',
            ],
        )
        _drop_replaced(engine, previous)
    return _vouched_for(engine, ref)


def _debootstrap_tarball(suite: str, tarball: Path) -> None:
    debootstrap = ensure_debootstrap()
    mirror = debian_mirror()
    work = Path(tempfile.mkdtemp(prefix=f"rootfs-{suite}-", dir=tarball.parent))
    root = work / "root"
    try:
        cmd = [debootstrap, "--variant=minbase", f"--include={','.join(ROOTFS_PACKAGES)}", suite, str(root), mirror]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            log = root / "debootstrap" / "debootstrap.log"
            if log.exists():
                tail += "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise StandinError(f"debootstrap {suite} from {mirror} failed (exit {proc.returncode}):\n{tail}")
        _configure_rootfs(root)
        tmp = tarball.with_suffix(".tar.partial")
        subprocess.run(["tar", "--numeric-owner", "--one-file-system", "-C", str(root), "-cf", str(tmp), "."],
                       check=True, capture_output=True)
        tmp.replace(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _configure_rootfs(root: Path) -> None:
    """Test-fixture-only host settings (see the module docstring), and image hygiene."""
    settings = host_apt_settings()
    if settings:
        (root / "etc/apt/apt.conf.d/99envman-test-fixture").write_text(
            "// envman test fixture: copied from the host so apt reaches its mirror the same way\n" + settings
        )
    cas = host_extra_cas()
    if cas:
        dest = root / "usr/local/share/ca-certificates/envman-test-fixture"
        dest.mkdir(parents=True, exist_ok=True)
        for ca in cas:
            shutil.copyfile(ca, dest / ca.name)
        subprocess.run(["chroot", str(root), "update-ca-certificates"], check=True, capture_output=True)
    # Like the Docker images of Debian: no package lists or .debs left behind.
    for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
        for entry in (root / sub).glob("*"):
            if entry.is_file():
                entry.unlink()
    (root / "etc/hostname").write_text("localhost\n")


# --------------------------------------------------------------------------- CUDA stand-ins


def parse_cuda_ref(ref: str) -> tuple[str | None, str | None]:
    """``nvidia/cuda:12.8.1-base-ubuntu24.04`` → ``("12.8.1", "base")``; ``(None, None)`` otherwise."""
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else ""
    m = _CUDA_TAG_RE.match(tag)
    return (m.group("version"), m.group("flavour")) if m else (None, None)


def standin_files(ref: str, *, suite: str, cuda_version: str | None, flavour: str) -> dict[str, bytes]:
    """The build context of a stand-in (pure: no engine needed)."""
    lines = [f"FROM {rootfs_ref(suite)}"]
    files: dict[str, bytes] = {}
    if cuda_version:
        major_minor = ".".join(cuda_version.split(".")[:2])
        lines += [
            f"ENV CUDA_VERSION={cuda_version}",
            f'ENV NVIDIA_REQUIRE_CUDA="cuda>={major_minor}"',
            "ENV NVIDIA_VISIBLE_DEVICES=all",
            "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            f"ENV PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:{BASE_PATH}",
            "ENV LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
            "COPY version.json /usr/local/cuda/version.json",
        ]
        files["version.json"] = (
            json.dumps(
                {"cuda": {"name": "CUDA SDK", "version": cuda_version},
                 "envman_standin": {"flavour": flavour, "note": "test stand-in: no CUDA libraries inside"}},
                indent=2, sort_keys=True,
            )
            + "\n"
        ).encode()
    lines.append('CMD ["bash"]')
    files["Dockerfile"] = ("\n".join(lines) + "\n").encode()
    return files


def ensure_standin(
    ref: str,
    *,
    suite: str = DEFAULT_SUITE,
    cuda_version: str | None = None,
    flavour: str | None = None,
    engine: Engine | None = None,
) -> str:
    """An image tagged ``ref`` standing in for the real one; returns ``ref``.

    ``cuda_version`` and ``flavour`` default to what an ``nvidia/cuda`` tag says
    (``12.8.1-base-ubuntu24.04`` → ``12.8.1``, ``base``); a reference with no CUDA version
    gets the bare root filesystem plus labels. Reused when an image tagged ``ref`` exists
    with the same recipe digest; rebuilt (cheaply, the rootfs is cached) otherwise.
    """
    engine = engine or Engine.connect()
    parsed_version, parsed_flavour = parse_cuda_ref(ref)
    cuda_version = cuda_version or parsed_version
    flavour = flavour or parsed_flavour or "base"
    rootfs = ensure_rootfs_image(suite, engine=engine)
    rootfs_info = engine.inspect_image(rootfs)
    rootfs_id = rootfs_info.id if rootfs_info is not None else ""
    files = standin_files(ref, suite=suite, cuda_version=cuda_version, flavour=flavour)
    context = deterministic_tar(files)
    digest = hashlib.sha256(context + rootfs_id.encode()).hexdigest()[:16]
    if _is_fixture(engine, ref, "envman.standin-digest", digest):
        return _vouched_for(engine, ref)
    previous = engine.inspect_image(ref)
    labels = {
        **FIXTURE_LABEL,
        "envman.standin-for": ref,
        "envman.standin-suite": suite,
        "envman.standin-flavour": flavour,
        "envman.standin-digest": digest,
    }
    for _event in engine.build(context, ref, labels=labels):
        pass
    _drop_replaced(engine, previous)
    return _vouched_for(engine, ref)


def _vouched_for(engine: Engine, ref: str) -> str:
    """``ref``, its stand-in's ID now trusted by envman in this process and the commands it starts
    (``ENVMAN_TRUSTED_IMAGES``): a stand-in is no registry's image, and envman builds on an
    upstream name only what someone vouches for."""
    from envman.images.provenance import TRUSTED_IMAGES_ENV

    info = engine.inspect_image(ref)
    if info is not None:
        known = os.environ.get(TRUSTED_IMAGES_ENV, "").split()
        if info.id not in known:
            os.environ[TRUSTED_IMAGES_ENV] = " ".join([*known, info.id])
    return ref


def _drop_replaced(engine: Engine, previous: ImageInfo | None) -> None:
    """Best effort: remove the stale fixture a rebuild untagged (kept if something uses it)."""
    if previous is None:
        return
    still = engine.inspect_image(previous.id)
    if still is not None and not still.tags:
        try:
            engine.remove_image(previous.id)
        except EngineError:
            pass


def _is_fixture(engine: Engine, ref: str, digest_label: str, digest: str) -> bool:
    info = engine.inspect_image(ref)
    labels = info.labels if info is not None else {}
    return labels.get("envman.test-fixture") == "true" and labels.get(digest_label) == digest

