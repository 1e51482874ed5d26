"""A base image made from the distribution's own mirror, for machines that reach no registry.

``envman base make`` debootstraps a minimal Debian or Ubuntu release from the archive this
machine's apt already uses (:mod:`envman.images.aptsources`), imports it into the engine as
``envman/local-base:<os>`` (labelled as envman's, role ``local-base``) and registers it in
three user matrix files next to ``config.toml`` (listed in its ``[matrix] files``):

* an ``[[os]]`` row for a Debian release (Ubuntu's rows ship with envman);
* a ``custom = true`` ``[[image]]`` row naming the base;
* copies of the shipped framework rows that can build on it, ``base_image`` pinned to it:
  rows whose wheels bring their own CUDA libraries or need none (``system_cuda``,
  ``system_cudnn`` and ``system_nvcc`` all false), installed from the package index itself
  (no ``index_url``, ``extra_index_url`` or ``find_links`` of their own), with wheels for the
  release's Python. A copy keeps its framework, version and variant, so it replaces the
  shipped row and the stack names stay those of ``envman matrix ls``.

Rows that take CUDA or cuDNN from the base image cannot build this way: their bases come
from NVIDIA's registry or its apt repository. :func:`plan_rows` names them by family.

The pure parts (release, row selection, file texts, config edit) need no engine.

Run through ``sudo``, the base is made as root (debootstrap needs it) but the rows are the
invoking user's: their config and matrix files are read and written with their identity and in
their home folder (:func:`sudo_invoker`, :func:`acting_as`), never root's, so their next
``envman build`` finds the rows, and nothing in their home is written by root.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from packaging.version import InvalidVersion, Version

from envman import labels
from envman.errors import EngineError, UserError, counted

REPOSITORY = "envman/local-base"
PACKAGES = ("ca-certificates",)
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OS_RELEASE = Path("/etc/os-release")
FILE_PREFIX = "local-base"


@dataclass(frozen=True)
class Release:
    """A release debootstrap can make: its codename, envman's OS name, and its python3."""

    distro: str  # debian | ubuntu
    codename: str
    os_name: str
    python: str
    source: str


RELEASES: dict[str, Release] = {r.codename: r for r in (
    Release("debian", "bullseye", "debian11", "3.9", "https://packages.debian.org/bullseye/python3 (python3 3.9.2-3)"),
    Release("debian", "bookworm", "debian12", "3.11", "https://packages.debian.org/bookworm/python3 (python3 3.11.2-1+b1)"),
    Release("debian", "trixie", "debian13", "3.13", "https://packages.debian.org/trixie/python3 (python3 3.13)"),
    Release("ubuntu", "focal", "ubuntu20.04", "3.8", "https://packages.ubuntu.com/focal/python3 (python3 3.8.2-0ubuntu2)"),
    Release("ubuntu", "jammy", "ubuntu22.04", "3.10", "https://packages.ubuntu.com/jammy/python3 (python3 3.10.6-1~22.04)"),
    Release("ubuntu", "noble", "ubuntu24.04", "3.12", "https://packages.ubuntu.com/noble/python3 (python3 3.12.3)"),
)}

_CODENAME = re.compile(r"[a-z]{2,20}")


def known() -> str:
    return ", ".join(RELEASES)


def release(name: str) -> Release:
    """The release named by its codename (``bookworm``) or envman's OS name (``debian12``)."""
    for r in RELEASES.values():
        if name in (r.codename, r.os_name):
            return r
    shown = name if _CODENAME.fullmatch(name) else repr(name)[:60]
    raise UserError(f"base make: release {shown} is not one envman can make", where="--release",
                    fix=f"give one of {known()} (or its OS name, e.g. debian12)")


def host_release(path: Path = OS_RELEASE) -> Release:
    """This machine's own release, from ``/etc/os-release``."""
    fields: dict[str, str] = {}
    from envman.safefile import read_file

    try:
        text = read_file(path, what="os-release").decode(errors="replace")
    except (OSError, UserError):
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    codename = fields.get("VERSION_CODENAME", "")
    if codename in RELEASES and RELEASES[codename].distro == fields.get("ID", ""):
        return RELEASES[codename]
    what = fields.get("PRETTY_NAME") or "this machine's release"
    raise UserError(f"base make: {what[:80]} is not a release envman can debootstrap", where=str(path),
                    fix=f"give --release, one of {known()}")


def base_ref(rel: Release) -> str:
    return f"{REPOSITORY}:{rel.os_name}"


def mirror_for(rel: Release, host: Release | None, sources: list[Any]) -> str:
    """The archive of this machine's apt sources that serves ``rel``: one listing its suite, or
    (for another release of the host's own distribution) the host's archive."""
    from envman.images.aptsources import archive_mirror

    found = archive_mirror(sources, rel.codename)
    if found is None and host is not None and host.distro == rel.distro:
        found = archive_mirror(sources)
    if found is None:
        raise UserError(f"base make: no {rel.distro} archive in this machine's apt sources serves {rel.codename}",
                        where="/etc/apt/sources.list*",
                        fix=f"give --mirror URL (the {rel.distro} archive your machine reaches)")
    return found


def check_mirror(url: str) -> str:
    from envman.images.aptsources import SAFE_URI

    if not SAFE_URI.fullmatch(url):
        raise UserError(f"base make: --mirror {url[:80]!r} is not an http(s):// or file:// URL", where="--mirror",
                        fix="give the archive's URL, e.g. the one in /etc/apt/sources.list")
    return url.rstrip("/")


# --------------------------------------------------------------------------- rows

#: keys of a row that describe platforms other than linux/amd64: the base is amd64 only
_PLATFORM_KEYS = ("platforms", "platform_status", "platform_source", "platform_note",
                  "sass_arm64", "packages_arm64", "ptx_arm64")
_OWN_INDEX_KEYS = ("index_url", "extra_index_url", "find_links")


@dataclass
class RowPlan:
    """What ``base make`` writes: the copied rows, and the rows that cannot build on the base."""

    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    system_cuda: dict[str, list[str]] = field(default_factory=dict)  # framework -> versions
    own_index: dict[str, list[str]] = field(default_factory=dict)
    other_python: int = 0


def _version(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def plan_rows(raw_rows: Iterable[tuple[str, Mapping[str, Any]]], rel: Release, ref: str) -> RowPlan:
    """Pick, from ``(framework, raw row)`` pairs of framework matrix files, those that build on the
    base ``ref`` of ``rel``, each copied with ``base_image``, ``os`` and ``python`` pinned."""
    plan = RowPlan()
    for fw, raw in raw_rows:
        version = str(raw.get("version", ""))
        if raw.get("base_image"):
            continue  # already on a base of its own
        if any(raw.get(k) for k in ("system_cuda", "system_cudnn", "system_nvcc")):
            plan.system_cuda.setdefault(fw, []).append(version)
            continue
        if any(raw.get(k) for k in _OWN_INDEX_KEYS):
            plan.own_index.setdefault(fw, []).append(version)
            continue
        if "linux/amd64" not in raw.get("platforms", ["linux/amd64"]):
            continue
        if rel.python not in [str(p) for p in raw.get("python", [])]:
            plan.other_python += 1
            continue
        if raw.get("os") and rel.os_name not in raw["os"]:
            continue
        row = {k: v for k, v in raw.items() if k not in _PLATFORM_KEYS and k != "framework"}
        row["python"] = [rel.python]
        if rel.python in [str(p) for p in row.get("python_freethreaded", [])]:
            row["python_freethreaded"] = [rel.python]
        else:
            row.pop("python_freethreaded", None)
        if isinstance(row.get("wheel_python"), Mapping):  # only the packages the amd64 row installs
            installed = {_package(p) for p in row.get("packages", [])}
            row["wheel_python"] = {k: v for k, v in row["wheel_python"].items() if _package(k) in installed}
        row["os"] = [rel.os_name]
        row["base_image"] = ref
        note = str(row.get("note", "")).strip()
        row["note"] = (note + " " if note else "") + f"Copied by `envman base make` onto {ref}."
        derived = row.pop("derived", None)  # a sub-table: written last
        if derived is not None:
            row["derived"] = derived
        plan.rows.append((fw, row))
    return plan


def _package(requirement: str) -> str:
    """``jax[cuda12]==0.4.30`` → ``jax`` (PEP 503-normalised)."""
    from packaging.utils import canonicalize_name

    return canonicalize_name(re.split(r"[\[=<>~!; ]", str(requirement), maxsplit=1)[0])


def _ranges(by_fw: Mapping[str, list[str]]) -> str:
    parts = []
    for fw in sorted(by_fw):
        vs = sorted(set(by_fw[fw]), key=_version)
        parts.append(f"{fw} {vs[0]}" + (f"–{vs[-1]}" if len(vs) > 1 else "") + f" ({counted(len(by_fw[fw]), 'row')})")
    return ", ".join(parts)


def refused_line(plan: RowPlan) -> str:
    """One line: the rows that cannot build on a base of the distribution's own, by family."""
    if not plan.system_cuda:
        return ""
    return ("not on this base (they take CUDA or cuDNN from NVIDIA's images or apt repository): "
            + _ranges(plan.system_cuda))


def shipped_framework_rows(files: Iterable[Path]) -> list[tuple[str, dict[str, Any]]]:
    """Every ``[[build]]`` of the framework files among ``files``, with its framework."""
    from envman.safefile import LARGE_LIMIT, load_toml

    out: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        doc, _ = load_toml(path, what="matrix file", limit=LARGE_LIMIT)
        if doc.get("kind") != "framework":
            continue
        for raw in doc.get("build", []):
            if isinstance(raw, dict):
                out.append((str(raw.get("framework", doc.get("framework", ""))), raw))
    return out


# --------------------------------------------------------------------------- files

HEADER = "# Written by `envman base make`: a base image made from the distribution's own mirror.\n"


def file_texts(rel: Release, ref: str, plan: RowPlan, *, shipped_os: bool) -> dict[str, str]:
    """The user matrix files, by name: os (a Debian release only), images and framework."""
    from envman.matrix.write import build_toml, toml_string

    out: dict[str, str] = {}
    if not shipped_os:
        out[f"{FILE_PREFIX}-{rel.os_name}-os.toml"] = (
            HEADER + 'schema = 1\nkind = "os"\n\n[[os]]\n'
            f"name = {toml_string(rel.os_name)}\npython_default = {toml_string(rel.python)}\n"
            f"python_apt = [{toml_string(rel.python)}]\nsource = [{toml_string(rel.source)}]\n"
            'status = "confirmed"\n')
    repository, _, tag = ref.rpartition(":")
    out[f"{FILE_PREFIX}-{rel.os_name}-images.toml"] = (
        HEADER + 'schema = 1\nkind = "images"\n\n[[image]]\n'
        f"repository = {toml_string(repository)}\ntag = {toml_string(tag)}\nos = {toml_string(rel.os_name)}\n"
        'status = "published"\ncustom = true\n'
        f"source = [{toml_string(f'envman base make: debootstrap {rel.codename} (minbase) from this machine’s apt archive')}]\n")
    out[f"{FILE_PREFIX}-{rel.os_name}-framework.toml"] = (
        HEADER + 'schema = 1\nkind = "framework"\n'
        + "".join("\n" + build_toml(row, framework=fw) for fw, row in plan.rows))
    return out


def register_files(config: Path, names: Iterable[str]) -> tuple[str | None, list[str]]:
    """``config.toml``'s new text with ``names`` added to ``[matrix] files`` (``None``: no
    change needed), and the names the caller must add by hand (a ``files`` list already there
    that lacks them: it is left as the user wrote it)."""
    from envman.config import load_matrix_config
    from envman.matrix.write import toml_value

    names = list(names)
    have = {p.resolve() for p in load_matrix_config(config).files}
    missing = [n for n in names if (config.parent / n).resolve() not in have]
    if not missing:
        return None, []
    from envman.safefile import decode_text, read_file

    try:  # as the config loader reads it: the user's own file, a symlink to one followed
        text = decode_text(read_file(config, what="config file", private=True, follow=True), what="config file",
                           where=str(config))
    except FileNotFoundError:
        text = ""
    header = re.search(r"(?m)^[ \t]*\[matrix\][ \t]*(#.*)?$", text)
    if header is None:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + f"[matrix]\nfiles = {toml_value(missing)}\n", []
    table_end = re.search(r"(?m)^[ \t]*\[", text[header.end():])
    body = text[header.end(): header.end() + table_end.start() if table_end else len(text)]
    if re.search(r"(?m)^[ \t]*files[ \t]*=", body):
        return None, missing
    at = header.end()
    return text[:at] + f"\nfiles = {toml_value(missing)}" + text[at:], []


# --------------------------------------------------------------------------- the image


def debootstrap_tarball(rel: Release, mirror: str, tarball: Path, *, run: Callable[..., Any] = subprocess.run) -> None:
    """A minimal root filesystem of ``rel`` from ``mirror``, as a tar file (needs root)."""
    tool = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if tool is None:
        raise UserError("base make: debootstrap is not installed", fix="install it: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise UserError("base make: debootstrap needs root (it makes device nodes and changes owners)",
                        fix='run it as root: sudo "$(command -v envman)" base make (the rows are still written for you)')
    work = Path(tempfile.mkdtemp(prefix=f"envman-base-{rel.codename}-"))
    root = work / "root"
    try:
        cmd = [tool, "--variant=minbase", f"--include={','.join(PACKAGES)}", rel.codename, str(root), mirror]
        proc = run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stdout + proc.stderr).splitlines()
            last = next((ln for ln in reversed(lines) if ln.strip()), "no output")
            raise UserError(f"base make: debootstrap {rel.codename} from {mirror} failed (exit {proc.returncode}): "
                            f"{last.strip()[:200]}", fix="check the mirror serves this release; debootstrap needs root")
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for entry in (root / sub).glob("*"):
                if entry.is_file():
                    entry.unlink()
        (root / "etc/hostname").write_text("localhost\n")
        run(["tar", "--numeric-owner", "--one-file-system", "-C", str(root), "-cf", str(tarball), "."],
            check=True, capture_output=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def import_changes(rel: Release) -> list[str]:
    return [
        f'LABEL {labels.MANAGED}="{labels.TRUE}"',
        f'LABEL {labels.ROLE}="{labels.ROLE_LOCAL_BASE}"',
        f'LABEL {labels.NAME}="{base_ref(rel)}"',
        f'LABEL envman.local-base.release="{rel.codename}"',
        f"ENV PATH={BASE_PATH}",
        "ENV LANG=C.UTF-8",
        "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        'CMD ["bash"]',
    ]


@dataclass(frozen=True)
class Made:
    ref: str
    image_id: str
    mirror: str
    files: tuple[Path, ...]
    plan: RowPlan
    hand_register: tuple[str, ...]
    home: Path | None = None  # the home folder the files are shown under (``~``); None: this process's
    owner: str | None = None  # the user sudo ran the command for, whose files these are


@dataclass(frozen=True)
class Invoker:
    """The user who ran ``sudo envman base make``, as the password database names them."""

    name: str
    uid: int
    gid: int
    home: Path


def sudo_invoker(environ: Mapping[str, str] | None = None) -> Invoker | None:
    """The user ``sudo`` ran this root process for (its ``SUDO_UID``), else ``None``: not root,
    no ``SUDO_UID``, or ``SUDO_UID`` 0. Their group and home come from the password database,
    not from the environment."""
    env = os.environ if environ is None else environ
    raw = env.get("SUDO_UID", "")
    if os.geteuid() != 0 or not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10:
        raise UserError(f"base make: SUDO_UID {raw[:20]!r} is not a user id", where="SUDO_UID",
                        fix="run it with sudo, or as root with SUDO_UID unset")
    if int(raw) == 0:
        return None
    try:
        entry = pwd.getpwuid(int(raw))
    except KeyError:
        raise UserError(f"base make: SUDO_UID {raw} names no user of this machine", where="SUDO_UID",
                        fix="run it with sudo, or as root with SUDO_UID unset") from None
    return Invoker(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


@contextmanager
def acting_as(who: Invoker) -> Iterator[None]:
    """Within it, files are read and written as ``who`` (effective user, group and groups) and
    ``HOME`` is theirs, so envman's config folder is theirs; root again afterwards. An
    ``XDG_CONFIG_HOME`` outside their home is root's and is set aside; ``ENVMAN_CONFIG_DIR`` given
    on the sudo line is kept."""
    keys = ("HOME", "XDG_CONFIG_HOME")
    saved_env = {k: os.environ.get(k) for k in keys}
    saved_groups = os.getgroups()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and not Path(xdg).is_relative_to(who.home):
        os.environ.pop("XDG_CONFIG_HOME")
    os.environ["HOME"] = str(who.home)
    os.setgroups(os.getgrouplist(who.name, who.gid))
    os.setegid(who.gid)
    os.seteuid(who.uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved_groups)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make(rel: Release, *, mirror: str, engine: Any, config: Path, matrix_files: Iterable[Path],
         shipped_oses: Iterable[str], on_step: Callable[[str], None] = lambda s: None,
         own_files: Iterable[Path] = (),
         as_owner: Callable[[], AbstractContextManager[Any]] = nullcontext) -> Made:
    """Make the base, import it, write and register the matrix files. Nothing is written when
    debootstrap or the import fails. The user's own files (``config``, ``own_files``) are read
    and written within ``as_owner``; the shipped ``matrix_files`` are read and the base is made
    outside it."""
    from envman.matrix.write import atomic_write_all

    ref = base_ref(rel)
    rows = shipped_framework_rows(matrix_files)
    with as_owner():
        plan = plan_rows([*rows, *shipped_framework_rows(own_files)], rel, ref)
        texts = file_texts(rel, ref, plan, shipped_os=rel.os_name in set(shipped_oses))
        new_config, by_hand = register_files(config, texts)
    with tempfile.TemporaryDirectory(prefix="envman-base-") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        on_step(f"debootstrap {rel.codename} (minbase) from the archive of the apt sources")
        debootstrap_tarball(rel, mirror, tarball)
        on_step(f"import as {ref}")
        previous = engine.inspect_image(ref)
        image_id = engine.import_image(tarball, ref, changes=import_changes(rel))
        from filelock import FileLock

        from envman.images.provenance import record_built

        with FileLock(str(Path(tmp) / "loaded.lock")):
            pass  # the lock's modules load now: as the user (sudo) the interpreter's own files may be unreadable
    _drop_replaced(engine, previous, image_id)
    with as_owner():
        record_built(image_id, ref)  # the rows name it by tag: only this ID of it is theirs to build on
        files = {config.parent / name: text for name, text in texts.items()}
        if new_config is not None:
            files[config.resolve()] = new_config  # a config.toml that is a symlink stays one
        atomic_write_all(files)
        home = Path.home()
    return Made(ref, image_id, mirror, tuple(config.parent / n for n in texts), plan, tuple(by_hand), home=home)


def make_here(release_name: str | None, mirror: str | None, *, connect: Callable[[], Any], extra: Iterable[Any] = (),
              on_step: Callable[[str], None] = lambda s: None) -> Made:
    """``envman base make``: the release asked for (else this machine's), the archive given (else
    the one of the apt sources), the shipped framework rows and the user's own (not those a
    previous ``base make`` wrote), into the user's config folder. Options are checked before
    anything is run; ``connect`` opens the engine after that."""
    from envman.config import config_path, user_matrix_paths
    from envman.images.aptsources import host_apt_sources
    from envman.matrix.load import load_files
    from envman.paths import matrices_dir

    try:
        host: Release | None = host_release()
    except UserError:
        host = None
    rel = release(release_name) if release_name else (host or host_release())
    url = check_mirror(mirror) if mirror else mirror_for(rel, host, host_apt_sources())
    shipped = sorted(matrices_dir().glob("*.toml"))
    who = sudo_invoker()
    as_owner: Callable[[], AbstractContextManager[Any]] = (lambda: acting_as(who)) if who else nullcontext
    with as_owner():
        config = config_path()
        theirs = [p for p in user_matrix_paths(extra) if not p.name.startswith(FILE_PREFIX + "-")]
    with connect() as engine:
        made = make(rel, mirror=url, engine=engine, config=config, matrix_files=shipped, own_files=theirs,
                    shipped_oses=[o.name for o in load_files(shipped).oses], on_step=on_step, as_owner=as_owner)
    return replace(made, owner=who.name) if who else made


def _drop_replaced(engine: Any, previous: Any, image_id: str) -> None:
    """Best effort: remove the base a new import untagged (kept while a stack image is built on it)."""
    if previous is None or previous.id == image_id:
        return
    still = engine.inspect_image(previous.id)
    if still is not None and not still.tags:
        try:
            engine.remove_image(previous.id)
        except EngineError:
            pass


def row_name(fw: str, row: Mapping[str, Any]) -> str:
    """The stack name of a copied row (``torch-2.7.1-cuda12.8``, ``onnxruntime-1.22.0-cpu``)."""
    cuda = row.get("cuda")
    return f"{fw}-{row.get('version')}-" + (f"cuda{cuda}" if cuda else "cpu")


def newest(plan: RowPlan) -> dict[str, str]:
    """Per framework, the stack name of its newest copied row (a GPU row before a CPU one)."""
    best: dict[str, tuple[tuple[Version, bool], str]] = {}
    for fw, row in plan.rows:
        key = (_version(str(row.get("version", ""))), bool(row.get("cuda")))
        if fw not in best or key > best[fw][0]:
            best[fw] = (key, row_name(fw, row))
    return {fw: best[fw][1] for fw in sorted(best)}


def report(made: Made) -> list[str]:
    """What ``base make`` did and what to build next, one fact a line."""
    plan = made.plan
    by_fw: dict[str, list[str]] = {}
    for fw, row in plan.rows:
        by_fw.setdefault(fw, []).append(str(row.get("version", "")))
    lines = [f"made {made.ref} ({made.image_id.removeprefix('sha256:')[:12]})",
             f"wrote {', '.join(_shown(p, made.home, made.owner) for p in made.files)}"]
    if made.owner:
        lines.append(f"the rows are {made.owner}'s, who ran sudo (root's own config is untouched): "
                     f"build as {made.owner}, without sudo")
    if made.hand_register:
        lines.append("add to [matrix] files of config.toml (its list was left as you wrote it): "
                     + ", ".join(made.hand_register))
    lines.append(f"builds on it: {_ranges(by_fw) or 'no row'}")
    refused = refused_line(plan)
    if refused:
        lines.append(refused)
    if plan.own_index:
        lines.append("not copied (they install from their project's own index, not the package index): "
                     + _ranges(plan.own_index))
    names = newest(plan)
    if names:
        first = suggested(plan) or next(iter(names.values()))
        lines.append(f"next: envman build {first}   (newest of each: {', '.join(names.values())})")
        lines.append(f"then, in a project folder: envman project init --env {first} && envman run -- python -V")
    return lines


def _shown(path: Path, home: Path | None = None, owner: str | None = None) -> str:
    """``path`` with the home folder (``home``, else this process's) written ``~`` (``~owner``
    for another user's)."""
    try:
        return f"~{owner or ''}/" + str(path.relative_to(home or Path.home()))
    except (ValueError, RuntimeError):
        return str(path)


def suggested(plan: RowPlan) -> str | None:
    """The smallest build to try first: the newest CPU row (no CUDA wheels to fetch), if any."""
    cpu = [(_version(str(r.get("version", ""))), fw, r) for fw, r in plan.rows if not r.get("cuda")]
    if not cpu:
        return None
    _, fw, r = max(cpu, key=lambda t: (t[0], t[1]))
    return row_name(fw, r)
