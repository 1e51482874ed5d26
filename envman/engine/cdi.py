"""CDI specs for NVIDIA GPUs, written by envman, and their edits applied to an OCI runtime config.

A CDI (Container Device Interface) spec names devices (``nvidia.com/gpu=0``, ``=GPU-<uuid>``,
``=all``) and, for each, the edits a runtime makes to a container: device nodes, bind mounts,
environment. Podman reads specs from ``/etc/cdi`` and ``/var/run/cdi``; ``envman cdi generate``
writes one there, and ``scripts/gpu-evidence`` uses the same code to turn a spec into an OCI
bundle that ``runc`` runs (:func:`apply_to_oci`) or into ``ch-run`` options (:func:`ch_run_binds`).

What goes in, read from the host (``root`` lets the tests point this at a fake tree):

* GPUs from ``/proc/driver/nvidia/gpus/<bus>/information`` (model, UUID, device minor), indexed
  in PCI bus order as ``nvidia-smi`` numbers them; where that folder is missing, the
  ``/dev/nvidia<N>`` nodes in minor order, without UUIDs;
* the control nodes ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools`` and
  ``/dev/nvidia-caps/*``, with their major and minor numbers;
* the driver's user-space libraries for compute and utility (``libcuda.so.<driver version>``,
  the PTX JIT, NVML, ...), from the driver's own folder ``/usr/local/nvidia`` or the usual
  library folders, only at the driver's version where it is known;
* the utility programs (``nvidia-smi`` and friends).

Libraries are mounted at ``/usr/local/nvidia/lib64`` under both their file name and their soname
(so no symlink hook is needed) and programs at ``/usr/local/nvidia/bin``: NVIDIA's CUDA images set
``LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64`` and ``PATH`` to include
``/usr/local/nvidia/bin``, and envman's rebuilt bases keep NVIDIA's ENV block, so every image
envman builds finds them without an ``ldconfig`` hook.

A spec read back (:func:`load_spec`) is validated before any of it reaches a mount or a device:
absolute normalised paths only, known mount options, device names CDI allows.

This module uses the standard library only, so a script can load it by path on a machine where
envman is not installed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CDI_VERSION = "0.5.0"
#: Where ``envman cdi generate`` suggests writing the spec (Podman reads /etc/cdi first).
DEFAULT_SPEC_PATH = "/etc/cdi/envman-nvidia.json"
#: The fix every "no CDI spec" message gives.
GENERATE_FIX = (f"generate the CDI spec as root: envman cdi generate -o {DEFAULT_SPEC_PATH} "
                "(or nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)")
KIND = "nvidia.com/gpu"
#: Where a container finds the driver's libraries and programs (see the module docstring).
CONTAINER_LIB_DIR = "/usr/local/nvidia/lib64"
CONTAINER_BIN_DIR = "/usr/local/nvidia/bin"
#: Where the driver's user-space libraries are looked for on the host, first match wins.
HOST_LIB_DIRS = (
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
)
HOST_BIN_DIRS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/sbin", "/bin")
#: The driver libraries a compute or utility container needs (the NVIDIA container toolkit's
#: "compute" and "utility" capabilities).
DRIVER_LIBS = (
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libnvidia-gpucomp.so",
    "libnvidia-allocator.so",
    "libnvidia-opencl.so",
    "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so",
    "libnvidia-ml.so",
    "libnvidia-cfg.so",
    "libnvidia-nscq.so",
)
DRIVER_BINS = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
               "nvidia-cuda-mps-server")
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "bind")
ALLOWED_MOUNT_OPTIONS = frozenset({"ro", "rw", "nosuid", "nodev", "noexec", "bind", "rbind", "rprivate",
                                   "private", "rslave", "slave"})
#: CDI's device-name grammar (``nvidia.com/gpu=<name>``).
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^\x00\n]*")
#: An NVIDIA GPU's UUID as the driver writes it (``GPU-b7c39e02-...``), a CDI device name that no
#: index or ``all`` can be.
_GPU_UUID = re.compile(r"GPU-[A-Za-z0-9_.:-]+")
_MINOR = re.compile(r"/dev/nvidia([0-9]+)")
_DRIVER_VERSION = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9]+(?:\.[0-9]+){1,2})")
_VERSIONED = re.compile(r"\.so\.[0-9]+(?:\.[0-9]+)*\Z")


class CdiError(ValueError):
    """A CDI spec that cannot be used, or a host whose GPUs cannot be described."""


@dataclass(frozen=True)
class DeviceNode:
    path: str
    major: int
    minor: int

    def to_spec(self) -> dict[str, Any]:
        return {"path": self.path, "type": "c", "major": self.major, "minor": self.minor,
                "permissions": "rw"}


@dataclass(frozen=True)
class Gpu:
    index: int
    node: DeviceNode
    uuid: str | None = None
    model: str | None = None
    bus: str | None = None


@dataclass(frozen=True)
class HostFile:
    """A driver file on the host and the names it takes in the container's folder."""

    host_path: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Discovery:
    driver_version: str | None
    gpus: tuple[Gpu, ...]
    control_nodes: tuple[DeviceNode, ...]
    libraries: tuple[HostFile, ...]
    binaries: tuple[HostFile, ...]
    notes: tuple[str, ...] = field(default=())


StatFn = Callable[[str], os.stat_result]


def _join(root: str, path: str) -> str:
    return os.path.join(root or "/", path.lstrip("/"))


def _read(path: str) -> str | None:
    """The first 64 KiB of a host file as text (bytes that are not UTF-8 replaced), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16).decode(errors="replace")
    except OSError:
        return None


def _char_node(root: str, path: str, stat_fn: StatFn) -> DeviceNode | None:
    try:
        st = stat_fn(_join(root, path))
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return DeviceNode(path, os.major(st.st_rdev), os.minor(st.st_rdev))


def driver_version(root: str) -> str | None:
    """The kernel module's version from ``/proc/driver/nvidia/version`` (``580.159.04``), or None."""
    text = _read(_join(root, "/proc/driver/nvidia/version"))
    m = _DRIVER_VERSION.search(text) if text is not None else None
    return m.group(1) if m else None


def _info_fields(text: str | None) -> dict[str, str]:
    """``Key: value`` lines (a value may hold colons); an unreadable file has none."""
    out: dict[str, str] = {}
    for line in text.splitlines() if text is not None else ():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def find_gpus(root: str, stat_fn: StatFn = os.stat) -> tuple[tuple[Gpu, ...], list[str]]:
    """The GPUs, indexed as ``nvidia-smi`` numbers them (PCI bus order), and notes on what was odd."""
    notes: list[str] = []
    gpus: list[Gpu] = []
    proc = _join(root, "/proc/driver/nvidia/gpus")
    try:
        buses = sorted(os.listdir(proc))  # the kernel names them dddd:bb:dd.f in lower-case hex
    except OSError:
        buses = []
    for bus in buses:
        info = _info_fields(_read(os.path.join(proc, bus, "information")))
        minor = info.get("Device Minor")
        if minor is None or not minor.isascii() or not minor.isdigit():
            notes.append(f"/proc/driver/nvidia/gpus/{bus}: no device minor; skipped")
            continue
        node = _char_node(root, f"/dev/nvidia{int(minor)}", stat_fn)
        if node is None:
            notes.append(f"/dev/nvidia{int(minor)} (GPU at {bus}) is not a character device; skipped")
            continue
        uuid = info.get("GPU UUID")
        if uuid is not None and (not _GPU_UUID.fullmatch(uuid) or uuid in {g.uuid for g in gpus}):
            notes.append(f"/proc/driver/nvidia/gpus/{bus}: GPU UUID {uuid!r} is not a CDI device name or is "
                         "another GPU's; named by index only")
            uuid = None
        gpus.append(Gpu(len(gpus), node, uuid, info.get("Model"), info.get("Bus Location") or bus))
    if gpus or buses:
        return tuple(gpus), notes
    # no /proc/driver/nvidia/gpus (an older or unusual driver): the device nodes in minor order
    try:
        names = os.listdir(_join(root, "/dev"))
    except OSError:
        names = []
    nodes = []
    for name in names:
        m = _MINOR.fullmatch("/dev/" + name)
        if m:
            node = _char_node(root, "/dev/" + name, stat_fn)
            if node is not None:
                nodes.append(node)
    nodes.sort(key=lambda n: n.minor)
    if nodes:
        notes.append("no /proc/driver/nvidia/gpus: GPUs taken from /dev/nvidia<N> in minor order, without UUIDs")
    return tuple(Gpu(i, n) for i, n in enumerate(nodes)), notes


def find_control_nodes(root: str, stat_fn: StatFn = os.stat) -> tuple[DeviceNode, ...]:
    found = [n for n in (_char_node(root, p, stat_fn) for p in CONTROL_NODES) if n is not None]
    try:
        caps = sorted(os.listdir(_join(root, "/dev/nvidia-caps")))
    except OSError:
        caps = []
    for name in caps:
        node = _char_node(root, "/dev/nvidia-caps/" + name, stat_fn)
        if node is not None:
            found.append(node)
    return tuple(found)




def find_libraries(version: str | None, root: str, dirs: Sequence[str] = HOST_LIB_DIRS,
                   libs: Sequence[str] = DRIVER_LIBS) -> tuple[HostFile, ...]:
    """Each driver library once: the real file (``<lib>.<driver version>`` where the version is
    known, else what ``<lib>.1`` points to) and its names: the file name and every ``<lib>.N``
    link beside it that resolves to it."""
    out: list[HostFile] = []
    for lib in libs:
        for d in dirs:
            host_dir = _join(root, d)
            if version:
                real = f"{lib}.{version}"
            else:
                target = os.path.realpath(os.path.join(host_dir, f"{lib}.1"))
                if os.path.dirname(target) != os.path.realpath(host_dir):
                    continue  # a link out of the folder: not this driver's file
                real = os.path.basename(target)
            if not os.path.isfile(os.path.join(host_dir, real)):
                continue
            real_path = os.path.realpath(os.path.join(host_dir, real))
            names = [real]
            try:
                entries = sorted(os.listdir(host_dir))
            except OSError:  # a folder we may not list: the file under its own name only
                entries = []
            for e in entries:
                if e != real and e.startswith(lib + ".") and _VERSIONED.search(e) and \
                        os.path.islink(os.path.join(host_dir, e)) and \
                        os.path.realpath(os.path.join(host_dir, e)) == real_path:
                    names.append(e)
            out.append(HostFile(os.path.join(d, real), tuple(names)))
            break
    return tuple(out)


def find_binaries(root: str, dirs: Sequence[str] = HOST_BIN_DIRS,
                  bins: Sequence[str] = DRIVER_BINS) -> tuple[HostFile, ...]:
    out = []
    for b in bins:
        for d in dirs:
            p = _join(root, os.path.join(d, b))
            if os.path.isfile(p) and os.access(p, os.X_OK):
                out.append(HostFile(os.path.join(d, b), (b,)))
                break
    return tuple(out)


def discover(root: str, stat_fn: StatFn = os.stat) -> Discovery:
    """What this host's NVIDIA driver offers containers (see the module docstring)."""
    version = driver_version(root)
    gpus, notes = find_gpus(root, stat_fn)
    libs = find_libraries(version, root)
    if version is None and libs:
        notes.append("no /proc/driver/nvidia/version: libraries taken from the <lib>.1 links: "
                     + ", ".join(f.names[0] for f in libs))
    return Discovery(version, gpus, find_control_nodes(root, stat_fn), libs, find_binaries(root), tuple(notes))


def _mounts(files: Iterable[HostFile], container_dir: str) -> list[dict[str, Any]]:
    out = []
    for f in files:
        for name in f.names:
            out.append({"hostPath": f.host_path, "containerPath": f"{container_dir}/{name}",
                        "options": list(MOUNT_OPTIONS)})
    return out


def spec_for(found: Discovery) -> dict[str, Any]:
    """The CDI spec (a JSON-ready dict) for what :func:`discover` found.

    Raises :class:`CdiError` when there is no GPU or no ``libcuda``: a spec without them would
    give containers a GPU that cannot work.
    """
    if not found.gpus:
        raise CdiError("no NVIDIA GPU found (no /proc/driver/nvidia/gpus entry or /dev/nvidia<N> device node): "
                       "is the NVIDIA driver loaded on this host?")
    if not any(n.startswith("libcuda.so") for f in found.libraries for n in f.names):
        raise CdiError("the NVIDIA driver's libcuda.so was not found in " + ", ".join(HOST_LIB_DIRS))
    devices: list[dict[str, Any]] = []
    for g in found.gpus:
        edits = {"deviceNodes": [g.node.to_spec()]}
        devices.append({"name": str(g.index), "containerEdits": edits})
        if g.uuid:
            devices.append({"name": g.uuid, "containerEdits": json.loads(json.dumps(edits))})
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [g.node.to_spec() for g in found.gpus]}})
    common: dict[str, Any] = {
        # the NVIDIA runtime hook, where one is installed too, must leave these containers alone
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "deviceNodes": [n.to_spec() for n in found.control_nodes],
        "mounts": _mounts(found.libraries, CONTAINER_LIB_DIR) + _mounts(found.binaries, CONTAINER_BIN_DIR),
    }
    return {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": devices, "containerEdits": common}


def spec_json(spec: Mapping[str, Any]) -> str:
    return json.dumps(spec, indent=2) + "\n"  # in the spec's order


# --------------------------------------------------------------------------- reading a spec back


def _abs_path(value: Any, where: str) -> str:
    # normpath keeps a leading "//" (POSIX leaves its meaning open): "//" would be the root
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//") or "\x00" in value \
            or "\n" in value or os.path.normpath(value) != value or value == "/":
        raise CdiError(f"{where}: {value!r} is not an absolute, normalised path")
    return value


def _check_edits(edits: Any, where: str) -> None:
    if edits is None:
        return
    if not isinstance(edits, dict):
        raise CdiError(f"{where}: containerEdits must be an object")
    unknown = set(edits) - {"env", "deviceNodes", "mounts", "hooks"}
    if unknown:
        raise CdiError(f"{where}: unknown containerEdits key(s) {sorted(unknown)}")
    for i, e in enumerate(edits.get("env") or ()):
        if not isinstance(e, str) or not ENV_ENTRY.fullmatch(e):
            raise CdiError(f"{where}.env[{i}]: {e!r} is not NAME=VALUE")
    for i, n in enumerate(edits.get("deviceNodes") or ()):
        if not isinstance(n, dict):
            raise CdiError(f"{where}.deviceNodes[{i}]: must be an object")
        path = _abs_path(n.get("path"), f"{where}.deviceNodes[{i}].path")
        if not path.startswith("/dev/"):
            raise CdiError(f"{where}.deviceNodes[{i}].path: {path!r} is not under /dev")
        if "hostPath" in n:
            _abs_path(n["hostPath"], f"{where}.deviceNodes[{i}].hostPath")
        if n.get("type", "c") != "c":
            raise CdiError(f"{where}.deviceNodes[{i}].type: only character devices ('c') are used for GPUs")
        for k in ("major", "minor"):
            v = n.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise CdiError(f"{where}.deviceNodes[{i}].{k}: {v!r} is not a device number")
        perms = n.get("permissions", "rw")
        if not isinstance(perms, str) or not perms or set(perms) - set("rwm"):
            raise CdiError(f"{where}.deviceNodes[{i}].permissions: {perms!r} (expected letters of 'rwm')")
    for i, m in enumerate(edits.get("mounts") or ()):
        if not isinstance(m, dict):
            raise CdiError(f"{where}.mounts[{i}]: must be an object")
        _abs_path(m.get("hostPath"), f"{where}.mounts[{i}].hostPath")
        _abs_path(m.get("containerPath"), f"{where}.mounts[{i}].containerPath")
        opts = m.get("options") or []
        if not isinstance(opts, list) or any(not isinstance(o, str) or o not in ALLOWED_MOUNT_OPTIONS for o in opts):
            raise CdiError(f"{where}.mounts[{i}].options: {opts!r} (allowed: {', '.join(sorted(ALLOWED_MOUNT_OPTIONS))})")
        if "rw" in opts:
            raise CdiError(f"{where}.mounts[{i}]: driver files are mounted read-only, not 'rw'")
    if edits.get("hooks"):
        raise CdiError(f"{where}.hooks: envman does not run hooks from a CDI spec")


def check_spec(spec: Any) -> dict[str, Any]:
    """``spec`` if it is a CDI spec envman will apply; else :class:`CdiError` naming the field."""
    if not isinstance(spec, dict):
        raise CdiError("a CDI spec must be a JSON object")
    if spec.get("kind") != KIND:
        raise CdiError(f"kind: {spec.get('kind')!r}, expected {KIND!r}")
    if not isinstance(spec.get("cdiVersion"), str) or not re.fullmatch(r"0\.[0-9]+\.[0-9]+", spec["cdiVersion"]):
        raise CdiError(f"cdiVersion: {spec.get('cdiVersion')!r} is not a CDI version such as {CDI_VERSION}")
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        raise CdiError("devices: a spec needs at least one device")
    seen = set()
    for i, d in enumerate(devices):
        name = d.get("name") if isinstance(d, dict) else None
        if not isinstance(name, str) or not DEVICE_NAME.fullmatch(name):
            raise CdiError(f"devices[{i}].name: {name!r} is not a CDI device name")
        if name in seen:
            raise CdiError(f"devices[{i}].name: {name!r} appears twice")
        seen.add(name)
        _check_edits(d.get("containerEdits"), f"devices[{i}].containerEdits")
    _check_edits(spec.get("containerEdits"), "containerEdits")
    return spec


MAX_SPEC_BYTES = 4 << 20


def _read_regular(path: str, limit: int = MAX_SPEC_BYTES) -> bytes:
    """A regular file's bytes, opened without blocking (a FIFO never hangs the reader); Python's
    descriptors are not inherited by child processes."""
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if st.st_size > limit:
            raise OSError(f"larger than {limit >> 20} MiB")
        return f.read()


def load_spec(path: str) -> dict[str, Any]:
    try:
        spec = json.loads(_read_regular(path).decode())  # UTF-8, as JSON between systems must be
    except OSError as e:
        raise CdiError(f"{path}: cannot read a JSON CDI spec: {e.strerror or e}") from None
    except ValueError as e:
        raise CdiError(f"{path}: cannot read a JSON CDI spec: {e}") from None
    try:
        return check_spec(spec)
    except CdiError as e:
        raise CdiError(f"{path}: {e}") from None


def edits_for(spec: Mapping[str, Any], names: Sequence[str]) -> dict[str, list[Any]]:
    """The spec's common edits plus those of each named device, in that order (CDI's rule)."""
    check_spec(spec)
    by_name = {d["name"]: d for d in spec["devices"]}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise CdiError(f"no CDI device {', '.join(KIND + '=' + n for n in missing)} in the spec "
                       f"(it has: {', '.join(sorted(by_name))})")
    out: dict[str, list[Any]] = {"env": [], "deviceNodes": [], "mounts": []}
    for edits in [spec.get("containerEdits") or {}] + [by_name[n].get("containerEdits") or {} for n in names]:
        for key in out:
            out[key].extend(edits.get(key) or ())
    return out


def _filled_node(node: Mapping[str, Any], stat_fn: StatFn) -> dict[str, Any]:
    """A device node with its numbers: the spec's, else the host node's (as runtimes do)."""
    if node.get("major") is not None and node.get("minor") is not None:
        return dict(node)
    host = node.get("hostPath") or node["path"]
    try:
        st = stat_fn(host)
    except OSError as e:
        raise CdiError(f"device node {host}: {e.strerror}") from None
    if not stat.S_ISCHR(st.st_mode):
        raise CdiError(f"device node {host} is not a character device")
    return {**node, "major": os.major(st.st_rdev), "minor": os.minor(st.st_rdev)}


def apply_to_oci(config: dict[str, Any], spec: Mapping[str, Any], names: Sequence[str],
                 stat_fn: StatFn = os.stat) -> dict[str, Any]:
    """Apply the edits of ``names`` to an OCI runtime ``config`` (as ``runc spec`` writes it), in
    place: device nodes with a cgroup rule allowing each, read-only bind mounts, environment."""
    edits = edits_for(spec, names)
    linux = config.setdefault("linux", {})
    devices = linux.setdefault("devices", [])
    rules = linux.setdefault("resources", {}).setdefault("devices", [])
    have = {d.get("path") for d in devices}
    for raw in edits["deviceNodes"]:
        node = _filled_node(raw, stat_fn)
        if node["path"] in have:
            continue
        have.add(node["path"])
        devices.append({"path": node["path"], "type": "c", "major": node["major"], "minor": node["minor"],
                        "fileMode": 0o666, "uid": 0, "gid": 0})
        rules.append({"allow": True, "type": "c", "major": node["major"], "minor": node["minor"],
                      "access": node.get("permissions", "rw")})
    mounts = config.setdefault("mounts", [])
    for m in edits["mounts"]:
        # read-only whatever the spec says (it may not say "rw", but a spec without "ro" is rw too)
        options = list(m.get("options") or ())
        if "ro" not in options:
            options.insert(0, "ro")
        if "bind" not in options and "rbind" not in options:
            options.append("bind")
        mounts.append({"destination": m["containerPath"], "type": "bind", "source": m["hostPath"],
                       "options": options})
    process = config.setdefault("process", {})
    env = list(process.get("env") or [])
    for entry in edits["env"]:
        key = entry.partition("=")[0] + "="
        env = [e for e in env if not e.startswith(key)] + [entry]
    process["env"] = env
    return config


def _make_target(rootfs: str, container_path: str, is_dir: bool) -> None:
    """Make a mount target inside ``rootfs`` without following a link: an image's symlink on the
    way would put the target (and the mount) outside the image."""
    path = rootfs
    parts = container_path.strip("/").split("/")
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise CdiError(f"{container_path}: {'/' + '/'.join(parts[:i + 1])} is a symbolic link in the image; "
                           "a mount target must be a plain path")
        last = i == len(parts) - 1
        if not last or is_dir:
            if not os.path.isdir(path):
                os.mkdir(path)
        elif not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))


def ch_run_binds(spec: Mapping[str, Any], names: Sequence[str], rootfs: str,
                 read_only: Callable[[str], str]) -> tuple[list[str], list[str]]:
    """``ch-run`` options for the edits of ``names``: ``-b SOURCE:CONTAINER`` for each mount and
    ``--set-env=NAME=VALUE``; returns (options, device paths). ch-run (0.31) binds read-write and
    has no option to change that, so each host path goes through ``read_only(host_path)``, which
    must return a read-only view of it (a read-only bind mount; ch-run's bind of it stays read-only).
    The targets are made in ``rootfs``, as ch-run needs, never through a link. ch-run shares the
    host's ``/dev``, so the device nodes need nothing."""
    edits = edits_for(spec, names)
    opts = []
    for m in edits["mounts"]:
        _make_target(rootfs, m["containerPath"], os.path.isdir(m["hostPath"]))
        opts.append(f"-b{read_only(m['hostPath'])}:{m['containerPath']}")
    opts += [f"--set-env={e}" for e in edits["env"]]
    return opts, [n["path"] for n in edits["deviceNodes"]]
