"""The rules of envman's CDI code, by table: discovery on fake host trees (odd /proc information
files, GPUs without UUIDs or with UUIDs that are no CDI name, missing or non-character device
files), the exact spec, the validation of every field of a spec read back, and every field of
a device node, mount and variable reaching an OCI config or ch-run's options."""

from __future__ import annotations

import copy
import itertools
import json
import os
from pathlib import Path

import pytest

from envman.engine import cdi
from tests.unit.engine.test_cdi import GOOD, char_stat, fake_stat, with_field

V = "580.159.04"
BUS = "0000:01:00.0"
INFO = f"Model: \t\t NVIDIA H200\nIRQ: 42\nGPU UUID: \t GPU-aaaa-01\nDevice Minor: \t 3\nBus Location: \t {BUS}\n"


# --------------------------------------------------------------------------- reading the host


@pytest.mark.parametrize("root, path, joined", [
    ("", "/dev/x", "/dev/x"), ("/", "/dev/x", "/dev/x"), ("/r", "/dev/x", "/r/dev/x"),
    ("/r", "dev/x", "/r/dev/x"), ("/r/", "//dev/x", "/r/dev/x"), ("/r", "/X/dev", "/r/X/dev"),
])
def test_a_host_path_is_taken_under_the_root(root, path, joined):
    assert cdi._join(root, path) == joined


def test_host_files_are_read_as_text_up_to_64_kib(tmp_path):
    assert cdi._read(str(tmp_path / "missing")) is None
    assert cdi._read(str(tmp_path)) is None  # a folder
    f = tmp_path / "f"
    f.write_bytes(b"Model: caf\xff\n")
    assert cdi._read(str(f)) == "Model: caf\ufffd\n"
    f.write_bytes(b"a" * (1 << 16) + b"tail")
    assert cdi._read(str(f)) == "a" * (1 << 16)


@pytest.mark.parametrize("text, version", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  (builder)  Thu\nGCC version: 12\n",
     "580.159.04"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n", "570.86.15"),
    ("NVRM version: NVIDIA UNIX Kernel Module  470.82  Release Build\n", "470.82"),
    ("NVRM version: NVIDIA UNIX Kernel Module  580  Release Build\n", None),
    ("no version here\n", None),
    ("", None),
    ("x" * (1 << 16) + "Kernel Module  580.159.04\n", None),  # past the 64 KiB read
    (None, None),  # no file
])
def test_the_driver_version_is_the_kernel_modules(tmp_path, text, version):
    if text is not None:
        f = tmp_path / "proc/driver/nvidia/version"
        f.parent.mkdir(parents=True)
        f.write_text(text)
    assert cdi.driver_version(str(tmp_path)) == version


def proc_host(root: Path, infos: dict[str, str | None], nodes: dict[str, tuple[int, int]]):
    """A host whose /proc/driver/nvidia/gpus has ``infos`` (bus -> information text; None: no
    file) and whose character devices are ``nodes``; returns (root, stat function)."""
    for bus, text in infos.items():
        d = root / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        if text is not None:
            (d / "information").write_text(text)
    for path in nodes:
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    return str(root), fake_stat(root, nodes)


def gpu_rows(gpus):
    return [(g.index, g.node.path, g.node.major, g.node.minor, g.uuid, g.model, g.bus) for g in gpus]


SKIP = f"/proc/driver/nvidia/gpus/{BUS}: no device minor; skipped"


def _uuid_note(uuid: str) -> str:
    return f"/proc/driver/nvidia/gpus/{BUS}: GPU UUID {uuid!r} is not a CDI device name or is another GPU's; named by index only"


def _info(**change: str | None) -> str:
    """INFO with lines replaced (key with spaces as _) or removed (None)."""
    lines = []
    for line in INFO.splitlines():
        key = line.partition(":")[0].replace(" ", "_")
        if key not in change:
            lines.append(line)
        elif change[key] is not None:
            lines.append(f"{key.replace('_', ' ')}: {change[key]}")
    return "\n".join(lines) + "\n"


ONE = (0, "/dev/nvidia3", 195, 3, "GPU-aaaa-01", "NVIDIA H200", BUS)
INFO_CASES = [
    (INFO, [ONE], []),
    (_info(Device_Minor=None), [], [SKIP]),
    (_info(Device_Minor="3a"), [], [SKIP]),
    (_info(Device_Minor="\uff13"), [], [SKIP]),  # a full-width 3 is a digit, but not an ASCII one
    (_info(Device_Minor="-3"), [], [SKIP]),
    (_info(Device_Minor=""), [], [SKIP]),
    (_info(Device_Minor="03"), [ONE], []),
    (_info(Device_Minor="4"), [], [f"/dev/nvidia4 (GPU at {BUS}) is not a character device; skipped"]),
    (_info(Device_Minor="5"), [], [f"/dev/nvidia5 (GPU at {BUS}) is not a character device; skipped"]),  # a plain file
    (_info(GPU_UUID=None), [ONE[:4] + (None,) + ONE[5:]], []),
    (_info(GPU_UUID="N/A"), [ONE[:4] + (None,) + ONE[5:]], [_uuid_note("N/A")]),
    (_info(GPU_UUID="GPU-../x"), [ONE[:4] + (None,) + ONE[5:]], [_uuid_note("GPU-../x")]),
    (_info(GPU_UUID="all"), [ONE[:4] + (None,) + ONE[5:]], [_uuid_note("all")]),
    (_info(GPU_UUID="0"), [ONE[:4] + (None,) + ONE[5:]], [_uuid_note("0")]),
    (_info(GPU_UUID="-GPU-1"), [ONE[:4] + (None,) + ONE[5:]], [_uuid_note("-GPU-1")]),
    (_info(Model=None), [ONE[:5] + (None, BUS)], []),
    (_info(Model="NVIDIA X: rev: 2"), [ONE[:5] + ("NVIDIA X: rev: 2", BUS)], []),  # a value may hold colons
    (_info(Bus_Location=None), [ONE], []),  # the folder's name
    (_info(Bus_Location="0000:99:00.0"), [ONE[:6] + ("0000:99:00.0",)], []),
    (_info(Bus_Location=""), [ONE], []),
    ("  Device Minor  :  3  \nno colon on this line\nGPU UUID:GPU-aaaa-01\n", [ONE[:5] + (None, BUS)], []),
    (None, [], [SKIP]),  # no information file
]


@pytest.mark.parametrize("info, rows, notes", INFO_CASES, ids=[str(i) for i in range(len(INFO_CASES))])
def test_a_gpu_is_read_from_its_information_file(tmp_path, info, rows, notes):
    root, st = proc_host(tmp_path, {BUS: info}, {"/dev/nvidia3": (195, 3)})
    (tmp_path / "dev/nvidia5").write_text("")  # a plain file where a device should be
    (tmp_path / "dev/nvidia0").write_text("")  # /dev is never read while /proc lists GPUs
    gpus, found_notes = cdi.find_gpus(root, st)
    assert gpu_rows(gpus) == rows
    assert found_notes == notes


def test_gpus_are_indexed_in_bus_order_and_a_skipped_one_takes_no_index(tmp_path):
    infos = {"0000:0b:00.0": _info(Device_Minor="0", GPU_UUID="GPU-b", Bus_Location=None),
             "0000:10:00.0": _info(Device_Minor="2", GPU_UUID="GPU-c", Bus_Location=None),
             "0000:0a:00.0": _info(Device_Minor="1", GPU_UUID="GPU-a", Bus_Location=None),
             "0000:02:00.0": _info(Device_Minor=None),
             "0000:03:00.0": _info(Device_Minor="7"),  # no /dev/nvidia7
             "0000:11:00.0": _info(Device_Minor="8", GPU_UUID="GPU-c", Bus_Location=None)}  # the UUID of another
    root, st = proc_host(tmp_path, infos, {f"/dev/nvidia{i}": (195, i) for i in (0, 1, 2, 8)})
    gpus, notes = cdi.find_gpus(root, st)
    assert [(g.index, g.node.path, g.uuid, g.bus) for g in gpus] == [
        (0, "/dev/nvidia1", "GPU-a", "0000:0a:00.0"), (1, "/dev/nvidia0", "GPU-b", "0000:0b:00.0"),
        (2, "/dev/nvidia2", "GPU-c", "0000:10:00.0"), (3, "/dev/nvidia8", None, "0000:11:00.0")]
    assert notes == ["/proc/driver/nvidia/gpus/0000:02:00.0: no device minor; skipped",
                     "/dev/nvidia7 (GPU at 0000:03:00.0) is not a character device; skipped",
                     "/proc/driver/nvidia/gpus/0000:11:00.0: GPU UUID 'GPU-c' is not a CDI device name or is "
                     "another GPU's; named by index only"]


DEV_NOTE = "no /proc/driver/nvidia/gpus: GPUs taken from /dev/nvidia<N> in minor order, without UUIDs"


@pytest.mark.parametrize("proc", ["none", "empty"])
def test_without_proc_gpus_the_device_nodes_are_the_gpus_in_minor_order(tmp_path, proc):
    nodes = {"/dev/nvidia10": (195, 10), "/dev/nvidia2": (195, 2), "/dev/nvidiactl": (195, 255),
             "/dev/nvidia-uvm": (508, 0), "/dev/nvidia0x": (195, 9), "/dev/xnvidia1": (195, 8)}
    root, st = proc_host(tmp_path, {}, nodes)
    (tmp_path / "dev/nvidia5").write_text("")  # not a character device
    if proc == "empty":
        (tmp_path / "proc/driver/nvidia/gpus").mkdir(parents=True)
    gpus, notes = cdi.find_gpus(root, st)
    assert gpu_rows(gpus) == [(0, "/dev/nvidia2", 195, 2, None, None, None), (1, "/dev/nvidia10", 195, 10, None, None, None)]
    assert notes == [DEV_NOTE]


def test_no_gpu_anywhere_is_no_gpu_and_no_note(tmp_path):
    assert cdi.find_gpus(str(tmp_path), os.stat) == ((), [])
    root, st = proc_host(tmp_path, {}, {"/dev/nvidiactl": (195, 255)})
    assert cdi.find_gpus(root, st) == ((), [])


def test_proc_gpus_that_are_all_skipped_do_not_fall_back_to_dev(tmp_path):
    root, st = proc_host(tmp_path, {BUS: _info(Device_Minor=None)}, {"/dev/nvidia0": (195, 0)})
    assert cdi.find_gpus(root, st) == ((), [SKIP])


def test_control_nodes_in_their_order_then_the_capabilities_by_name(tmp_path):
    nodes = {"/dev/nvidiactl": (195, 255), "/dev/nvidia-uvm-tools": (508, 1),
             "/dev/nvidia-caps/nvidia-cap2": (511, 2), "/dev/nvidia-caps/nvidia-cap1": (511, 1)}
    root, st = proc_host(tmp_path, {}, nodes)
    (tmp_path / "dev/nvidia-uvm").write_text("")  # a plain file: no device
    (tmp_path / "dev/nvidia-caps/readme").write_text("")
    assert cdi.find_control_nodes(root, st) == (
        cdi.DeviceNode("/dev/nvidiactl", 195, 255), cdi.DeviceNode("/dev/nvidia-uvm-tools", 508, 1),
        cdi.DeviceNode("/dev/nvidia-caps/nvidia-cap1", 511, 1), cdi.DeviceNode("/dev/nvidia-caps/nvidia-cap2", 511, 2))
    assert cdi.find_control_nodes(str(tmp_path / "nothing"), os.stat) == ()


def tree(root: Path, entries: dict[str, str | None]) -> None:
    """Files (content), folders (trailing /) and links ('-> target') under ``root``."""
    for rel, what in entries.items():
        p = root / rel.rstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            p.mkdir()
        elif what is not None and what.startswith("-> "):
            p.symlink_to(what[3:])
        else:
            p.write_text(what or "ELF")


LIBS = ("libx.so", "liby.so", "libz.so", "libw.so", "libnone.so")
HOST_LIBS = {
    f"a/libx.so.{V}": "x", "a/libx.so.1": f"-> libx.so.{V}", "a/libx.so.2": "-> libx.so.1",
    "a/libx.so": "-> libx.so.1",  # the development link: no version, no runtime name
    "a/libx.so.1.bak": "-> libx.so.1", "a/libx.so.3": "x",  # not versioned; a copy, not a link
    "a/libx.so.7": "-> libx.so.7.0", "a/libx.so.7.0": "another", "a/libx.so.8\n": f"-> libx.so.{V}",
    "a/libx.so-extra.so.1": f"-> libx.so.{V}", f"b/libx.so.{V}": "x in b",
    f"a/liby.so.{V}/": None, "a/liby.so.1": "-> ../b/liby.so.1", f"b/liby.so.{V}": "y", "b/liby.so.1": f"-> liby.so.{V}",
    f"a/libz.so.{V}": f"-> sub/libz.so.{V}", f"a/sub/libz.so.{V}": "z", "a/libz.so.1": f"-> libz.so.{V}",
    "a/libw.so.1": "w", "a/libnone.so.1": "-> libnone.so.9",  # a regular .1; a dangling link
}


@pytest.mark.parametrize("version, expected", [
    (V, [(f"/a/libx.so.{V}", (f"libx.so.{V}", "libx.so.1", "libx.so.2")), (f"/b/liby.so.{V}", (f"liby.so.{V}", "liby.so.1")),
         (f"/a/libz.so.{V}", (f"libz.so.{V}", "libz.so.1"))]),
    (None, [(f"/a/libx.so.{V}", (f"libx.so.{V}", "libx.so.1", "libx.so.2")), (f"/b/liby.so.{V}", (f"liby.so.{V}", "liby.so.1")),
            ("/a/libw.so.1", ("libw.so.1",))]),  # libz.so.1 leads out of its folder: no file taken
])
def test_each_library_once_from_the_first_folder_with_its_runtime_names(tmp_path, version, expected):
    tree(tmp_path, HOST_LIBS)
    found = cdi.find_libraries(version, str(tmp_path), dirs=("/missing", "/a", "/b"), libs=LIBS)
    assert [(f.host_path, f.names) for f in found] == expected


def test_a_folder_that_cannot_be_listed_gives_the_file_under_its_own_name(tmp_path, monkeypatch):
    tree(tmp_path, HOST_LIBS)
    listdir = os.listdir

    def refuse(path):
        if path == str(tmp_path / "a"):
            raise PermissionError(13, "Permission denied")
        return listdir(path)
    monkeypatch.setattr(os, "listdir", refuse)
    found = cdi.find_libraries(V, str(tmp_path), dirs=("/a",), libs=("libx.so",))
    assert [(f.host_path, f.names) for f in found] == [(f"/a/libx.so.{V}", (f"libx.so.{V}",))]


def test_a_known_version_takes_no_other_versions_file(tmp_path):
    tree(tmp_path, {"a/libx.so.1": "-> libx.so.570.1", "a/libx.so.570.1": "old"})
    assert cdi.find_libraries(V, str(tmp_path), dirs=("/a",), libs=("libx.so",)) == ()
    assert [f.host_path for f in cdi.find_libraries(None, str(tmp_path), dirs=("/a",), libs=("libx.so",))] == ["/a/libx.so.570.1"]


def test_programs_from_the_first_folder_where_they_are_executable_files(tmp_path):
    tree(tmp_path, {"a/p": "#!", "b/p": "#!", "a/q": "#!", "b/q": "#!", "a/r/": None})
    for p in ("a/p", "b/p", "b/q"):
        (tmp_path / p).chmod(0o755)
    (tmp_path / "a/q").chmod(0o644)
    (tmp_path / "a/r").chmod(0o755)
    found = cdi.find_binaries(str(tmp_path), dirs=("/a", "/b"), bins=("p", "q", "r"))
    assert [(f.host_path, f.names) for f in found] == [("/a/p", ("p",)), ("/b/q", ("q",))]


def _driver_host(root: Path, libs: tuple[str, ...]) -> None:
    for lib in libs:
        tree(root, {f"usr/local/nvidia/lib64/{lib}.{V}": lib, f"usr/local/nvidia/lib64/{lib}.1": f"-> {lib}.{V}"})


@pytest.mark.parametrize("libs, note", [
    (("libcuda.so", "libnvidia-ml.so"),
     f"no /proc/driver/nvidia/version: libraries taken from the <lib>.1 links: libcuda.so.{V}, libnvidia-ml.so.{V}"),
    (("libnvidia-ml.so",), f"no /proc/driver/nvidia/version: libraries taken from the <lib>.1 links: libnvidia-ml.so.{V}"),
    ((), None),
])
def test_without_a_driver_version_the_note_names_the_files_taken(tmp_path, libs, note):
    _driver_host(tmp_path, libs)
    found = cdi.discover(str(tmp_path), os.stat)
    assert found.driver_version is None
    assert found.notes == ((note,) if note else ())


def test_discovery_is_its_parts(tmp_path):
    nodes = {"/dev/nvidia0": (195, 0), "/dev/nvidiactl": (195, 255)}
    root, st = proc_host(tmp_path, {BUS: _info(Device_Minor="0", GPU_UUID="x/y")}, nodes)
    tree(tmp_path, {"proc/driver/nvidia/version": f"NVIDIA UNIX x86_64 Kernel Module  {V}  Release Build\n",
                    "usr/bin/nvidia-smi": "#!"})
    (tmp_path / "usr/bin/nvidia-smi").chmod(0o755)
    _driver_host(tmp_path, ("libcuda.so",))
    gpus, notes = cdi.find_gpus(root, st)
    assert cdi.discover(root, st) == cdi.Discovery(V, gpus, cdi.find_control_nodes(root, st),
                                                   cdi.find_libraries(V, root), cdi.find_binaries(root), tuple(notes))
    assert notes and gpus and cdi.find_control_nodes(root, st)


# --------------------------------------------------------------------------- the spec


def _node(path: str, major: int, minor: int) -> dict:
    return {"path": path, "type": "c", "major": major, "minor": minor, "permissions": "rw"}


FOUND = cdi.Discovery(
    V, (cdi.Gpu(0, cdi.DeviceNode("/dev/nvidia1", 195, 1), "GPU-a"), cdi.Gpu(1, cdi.DeviceNode("/dev/nvidia0", 195, 0))),
    (cdi.DeviceNode("/dev/nvidiactl", 195, 255),),
    (cdi.HostFile(f"/usr/lib/libcuda.so.{V}", (f"libcuda.so.{V}", "libcuda.so.1")),),
    (cdi.HostFile("/usr/bin/nvidia-smi", ("nvidia-smi",)),))
RO = ["ro", "nosuid", "nodev", "bind"]


def test_the_spec_is_exactly_the_discovery():
    assert cdi.spec_for(FOUND) == {
        "cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": "0", "containerEdits": {"deviceNodes": [_node("/dev/nvidia1", 195, 1)]}},
                    {"name": "GPU-a", "containerEdits": {"deviceNodes": [_node("/dev/nvidia1", 195, 1)]}},
                    {"name": "1", "containerEdits": {"deviceNodes": [_node("/dev/nvidia0", 195, 0)]}},
                    {"name": "all", "containerEdits": {"deviceNodes": [_node("/dev/nvidia1", 195, 1),
                                                                       _node("/dev/nvidia0", 195, 0)]}}],
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [_node("/dev/nvidiactl", 195, 255)],
            "mounts": [{"hostPath": f"/usr/lib/libcuda.so.{V}", "containerPath": f"/usr/local/nvidia/lib64/libcuda.so.{V}",
                        "options": RO},
                       {"hostPath": f"/usr/lib/libcuda.so.{V}", "containerPath": "/usr/local/nvidia/lib64/libcuda.so.1",
                        "options": RO},
                       {"hostPath": "/usr/bin/nvidia-smi", "containerPath": "/usr/local/nvidia/bin/nvidia-smi",
                        "options": RO}]}}


def test_odd_uuids_never_make_a_spec_that_its_own_check_refuses(tmp_path):
    infos = {"0000:01:00.0": _info(Device_Minor="0", GPU_UUID="1"), "0000:02:00.0": _info(Device_Minor="1", GPU_UUID="all"),
             "0000:03:00.0": _info(Device_Minor="2", GPU_UUID="GPU-x"), "0000:04:00.0": _info(Device_Minor="3", GPU_UUID="GPU-x")}
    root, st = proc_host(tmp_path, infos, {f"/dev/nvidia{i}": (195, i) for i in range(4)})
    _driver_host(tmp_path, ("libcuda.so",))
    tree(tmp_path, {"usr/local/nvidia/lib64/libcuda.so.9\n": "-> libcuda.so.1"})  # a name with a line break
    spec = cdi.check_spec(cdi.spec_for(cdi.discover(root, st)))
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "2", "GPU-x", "3", "all"]
    assert [m["containerPath"] for m in spec["containerEdits"]["mounts"]] == [
        f"/usr/local/nvidia/lib64/libcuda.so.{V}", "/usr/local/nvidia/lib64/libcuda.so.1"]


def test_no_spec_without_a_gpu_or_libcuda_and_the_message_says_where_it_looked():
    with pytest.raises(cdi.CdiError) as e:
        cdi.spec_for(cdi.Discovery(V, (), (), FOUND.libraries, ()))
    assert str(e.value) == ("no NVIDIA GPU found (no /proc/driver/nvidia/gpus entry or /dev/nvidia<N> device node): "
                            "is the NVIDIA driver loaded on this host?")
    debugger_only = (cdi.HostFile(f"/usr/lib/libcudadebugger.so.{V}", (f"libcudadebugger.so.{V}", "libcudadebugger.so.1")),)
    with pytest.raises(cdi.CdiError) as e:
        cdi.spec_for(cdi.Discovery(V, FOUND.gpus, (), debugger_only, ()))
    assert str(e.value) == ("the NVIDIA driver's libcuda.so was not found in /usr/local/nvidia/lib64, /usr/local/nvidia/lib, "
                            "/usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64, /usr/lib, "
                            "/lib/x86_64-linux-gnu, /lib64")


def test_the_spec_file_is_json_indented_by_two_in_the_specs_order_with_a_final_newline():
    assert cdi.spec_json({"kind": "k", "devices": [{"name": "0"}], "cdiVersion": "0.5.0"}) == (
        '{\n  "kind": "k",\n  "devices": [\n    {\n      "name": "0"\n    }\n  ],\n  "cdiVersion": "0.5.0"\n}\n')


# --------------------------------------------------------------------------- validation

NODE = ("devices", 0, "containerEdits", "deviceNodes", 0)
MOUNT = ("containerEdits", "mounts", 0)
N = "devices[0].containerEdits.deviceNodes[0]"
M = "containerEdits.mounts[0]"
ALLOWED = "bind, nodev, noexec, nosuid, private, rbind, ro, rprivate, rslave, rw, slave"
REFUSED = [
    ((), [], "a CDI spec must be a JSON object"),
    (("kind",), KeyError, "kind: None, expected 'nvidia.com/gpu'"),
    (("kind",), "NVIDIA.com/gpu", "kind: 'NVIDIA.com/gpu', expected 'nvidia.com/gpu'"),
    (("cdiVersion",), KeyError, "cdiVersion: None is not a CDI version such as 0.5.0"),
    (("cdiVersion",), "0.5", "cdiVersion: '0.5' is not a CDI version such as 0.5.0"),
    (("cdiVersion",), "0.5.0\n", "cdiVersion: '0.5.0\\n' is not a CDI version such as 0.5.0"),
    (("devices",), KeyError, "devices: a spec needs at least one device"),
    (("devices",), {"name": "0"}, "devices: a spec needs at least one device"),
    (("devices", 0), "0", "devices[0].name: None is not a CDI device name"),
    (("devices", 0, "name"), "", "devices[0].name: '' is not a CDI device name"),
    (("devices", 0, "name"), "a/b", "devices[0].name: 'a/b' is not a CDI device name"),
    (("devices", 0, "name"), "_0", "devices[0].name: '_0' is not a CDI device name"),
    (("devices", 0, "containerEdits"), "x", "devices[0].containerEdits: containerEdits must be an object"),
    (("devices", 0, "containerEdits", "b"), 1, "devices[0].containerEdits: unknown containerEdits key(s) ['b']"),
    (("containerEdits",), [], "containerEdits: containerEdits must be an object"),
    (("containerEdits", "env", 0), 5, "containerEdits.env[0]: 5 is not NAME=VALUE"),
    (("containerEdits", "env", 0), "=x", "containerEdits.env[0]: '=x' is not NAME=VALUE"),
    (("containerEdits", "env", 0), "A=\x00", "containerEdits.env[0]: 'A=\\x00' is not NAME=VALUE"),
    (NODE, "x", f"{N}: must be an object"),
    (NODE + ("path",), KeyError, f"{N}.path: None is not an absolute, normalised path"),
    (NODE + ("path",), "/dev", f"{N}.path: '/dev' is not under /dev"),
    (NODE + ("path",), "/devx/nvidia0", f"{N}.path: '/devx/nvidia0' is not under /dev"),
    (NODE + ("path",), "//dev/nvidia0", f"{N}.path: '//dev/nvidia0' is not an absolute, normalised path"),
    (NODE + ("path",), "/dev/nvidia0/", f"{N}.path: '/dev/nvidia0/' is not an absolute, normalised path"),
    (NODE + ("path",), "/dev/nvidia\n0", f"{N}.path: '/dev/nvidia\\n0' is not an absolute, normalised path"),
    (NODE + ("hostPath",), "//", f"{N}.hostPath: '//' is not an absolute, normalised path"),
    (NODE + ("hostPath",), None, f"{N}.hostPath: None is not an absolute, normalised path"),
    (NODE + ("type",), "b", f"{N}.type: only character devices ('c') are used for GPUs"),
    (NODE + ("type",), None, f"{N}.type: only character devices ('c') are used for GPUs"),
    (NODE + ("major",), "195", f"{N}.major: '195' is not a device number"),
    (NODE + ("major",), 1.0, f"{N}.major: 1.0 is not a device number"),
    (NODE + ("major",), False, f"{N}.major: False is not a device number"),
    (NODE + ("minor",), -1, f"{N}.minor: -1 is not a device number"),
    (NODE + ("minor",), True, f"{N}.minor: True is not a device number"),
    (NODE + ("permissions",), "rwx", f"{N}.permissions: 'rwx' (expected letters of 'rwm')"),
    (NODE + ("permissions",), "", f"{N}.permissions: '' (expected letters of 'rwm')"),
    (NODE + ("permissions",), None, f"{N}.permissions: None (expected letters of 'rwm')"),
    (NODE + ("permissions",), "RW", f"{N}.permissions: 'RW' (expected letters of 'rwm')"),
    (MOUNT, "x", f"{M}: must be an object"),
    (MOUNT + ("hostPath",), KeyError, f"{M}.hostPath: None is not an absolute, normalised path"),
    (MOUNT + ("hostPath",), "//", f"{M}.hostPath: '//' is not an absolute, normalised path"),
    (MOUNT + ("hostPath",), "//etc", f"{M}.hostPath: '//etc' is not an absolute, normalised path"),
    (MOUNT + ("hostPath",), "/", f"{M}.hostPath: '/' is not an absolute, normalised path"),
    (MOUNT + ("hostPath",), "/usr/./lib", f"{M}.hostPath: '/usr/./lib' is not an absolute, normalised path"),
    (MOUNT + ("hostPath",), b"/usr", f"{M}.hostPath: b'/usr' is not an absolute, normalised path"),
    (MOUNT + ("containerPath",), KeyError, f"{M}.containerPath: None is not an absolute, normalised path"),
    (MOUNT + ("containerPath",), "//", f"{M}.containerPath: '//' is not an absolute, normalised path"),
    (MOUNT + ("containerPath",), "/", f"{M}.containerPath: '/' is not an absolute, normalised path"),
    (MOUNT + ("containerPath",), "/a\n", f"{M}.containerPath: '/a\\n' is not an absolute, normalised path"),
    (MOUNT + ("containerPath",), "/a\x00", f"{M}.containerPath: '/a\\x00' is not an absolute, normalised path"),
    (MOUNT + ("options",), [1], f"{M}.options: [1] (allowed: {ALLOWED})"),
    (MOUNT + ("options",), ["ro", "RO"], f"{M}.options: ['ro', 'RO'] (allowed: {ALLOWED})"),
    (MOUNT + ("options",), "ro", f"{M}.options: 'ro' (allowed: {ALLOWED})"),
    (MOUNT + ("options",), {"ro": 1}, f"{M}.options: {{'ro': 1}} (allowed: {ALLOWED})"),
    (MOUNT + ("options",), ["ro", "rw"], f"{M}: driver files are mounted read-only, not 'rw'"),
    (("containerEdits", "hooks"), [{}], "containerEdits.hooks: envman does not run hooks from a CDI spec"),
    (("devices", 0, "containerEdits", "hooks"), {"a": 1}, "devices[0].containerEdits.hooks: envman does not run hooks from a CDI spec"),
]


@pytest.mark.parametrize("path, value, message", REFUSED, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v, _ in REFUSED])
def test_every_field_of_a_spec_is_checked_and_the_refusal_names_it(path, value, message):
    doc = value if path == () else with_field(GOOD, path, value)
    with pytest.raises(cdi.CdiError) as e:
        cdi.check_spec(doc)
    assert str(e.value) == message


def test_keys_are_refused_in_sorted_order_and_a_second_device_of_a_name_is_named():
    with pytest.raises(cdi.CdiError) as e:
        cdi.check_spec(with_field(with_field(GOOD, ("containerEdits", "z"), 1), ("containerEdits", "b"), 1))
    assert str(e.value) == "containerEdits: unknown containerEdits key(s) ['b', 'z']"
    doc = copy.deepcopy(GOOD)
    doc["devices"] += [{"name": "1"}, {"name": "0"}]
    with pytest.raises(cdi.CdiError) as e:
        cdi.check_spec(doc)
    assert str(e.value) == "devices[2].name: '0' appears twice"


ACCEPTED = [
    (("cdiVersion",), "0.6.0"), (("cdiVersion",), "0.10.12"),
    (("devices", 0, "name"), "a"), (("devices", 0, "name"), "GPU-1.x:y_z"), (("devices", 0, "name"), "all"),
    (("devices", 0, "containerEdits"), KeyError), (("devices", 0, "containerEdits"), None),
    (("containerEdits",), KeyError), (("containerEdits",), None), (("containerEdits",), {}),
    (("annotations",), {"a": "b"}),
    (("containerEdits", "env"), []), (("containerEdits", "env"), None), (("containerEdits", "env", 0), "A="),
    (("containerEdits", "env", 0), "_a1=x y=z"),
    (NODE + ("major",), KeyError), (NODE + ("minor",), KeyError), (NODE + ("major",), 0), (NODE + ("minor",), None),
    (NODE + ("type",), "c"), (NODE + ("hostPath",), "/dev/nvidia9"), (NODE + ("fileMode",), 438),
    (NODE + ("permissions",), "r"), (NODE + ("permissions",), "m"), (NODE + ("permissions",), "rwm"),
    (NODE + ("path",), "/dev/nvidia-caps/nvidia-cap1"),
    (MOUNT + ("options",), KeyError), (MOUNT + ("options",), []), (MOUNT + ("options",), None),
    (MOUNT + ("type",), "bind"),
    (("containerEdits", "hooks"), []), (("containerEdits", "hooks"), None),
] + [(MOUNT + ("options",), [o]) for o in sorted(cdi.ALLOWED_MOUNT_OPTIONS - {"rw"})]


@pytest.mark.parametrize("path, value", ACCEPTED, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v in ACCEPTED])
def test_what_cdi_allows_is_accepted(path, value):
    doc = with_field(GOOD, path, value)
    assert cdi.check_spec(doc) is doc


def test_a_spec_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    text = json.dumps(GOOD).encode()
    f = tmp_path / "spec.json"
    f.write_bytes(text + b" " * (cdi.MAX_SPEC_BYTES - len(text)))  # past 64 KiB: read whole
    assert cdi.load_spec(str(f)) == GOOD
    f.write_bytes(text + b" " * (cdi.MAX_SPEC_BYTES + 1 - len(text)))
    with pytest.raises(cdi.CdiError) as e:
        cdi.load_spec(str(f))
    assert str(e.value) == f"{f}: cannot read a JSON CDI spec: larger than 4 MiB"


@pytest.mark.parametrize("make, reason", [
    (lambda p: os.mkfifo(p), "not a regular file"),
    (lambda p: p.mkdir(), "Is a directory"),
    (lambda p: None, "No such file or directory"),
    (lambda p: p.write_bytes(b"\xff{}"), None),
    (lambda p: p.write_bytes(json.dumps(GOOD).encode("utf-16")), None),  # JSON between systems is UTF-8
    (lambda p: p.write_text("[]"), "a CDI spec must be a JSON object"),
])
def test_a_spec_that_cannot_be_read_is_one_line_naming_the_file(tmp_path, make, reason):
    p = tmp_path / "spec.json"
    make(p)
    with pytest.raises(cdi.CdiError) as e:
        cdi.load_spec(str(p))
    msg = str(e.value)
    assert "\n" not in msg
    if reason is None:
        assert msg.startswith(f"{p}: cannot read a JSON CDI spec: ")
    elif reason.startswith("a CDI"):
        assert msg == f"{p}: {reason}"
    else:
        assert msg == f"{p}: cannot read a JSON CDI spec: {reason}"


# --------------------------------------------------------------------------- applying the edits

SPEC = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": "a", "containerEdits": {"env": ["A=1"], "deviceNodes": [{"path": "/dev/nvidia0", "major": 195,
                                                                                       "minor": 0, "permissions": "r"}],
                                                     "mounts": [{"hostPath": "/h/a", "containerPath": "/c/a"}]}},
                    {"name": "b", "containerEdits": {"env": ["B=1"], "deviceNodes": [{"path": "/dev/nvidia1", "major": 195,
                                                                                       "minor": 1}],
                                                     "mounts": [{"hostPath": "/h/b", "containerPath": "/c/b",
                                                                 "options": ["rbind", "nosuid"]}]}},
                    {"name": "all"}],
        "containerEdits": {"env": ["C=1"], "deviceNodes": [{"path": "/dev/nvidiactl", "major": 195, "minor": 255}],
                           "mounts": [{"hostPath": "/h/c", "containerPath": "/c/c", "options": ["ro", "bind"]}]}}


def test_the_common_edits_come_first_then_each_named_devices_in_the_order_named():
    edits = cdi.edits_for(SPEC, ["b", "a", "all"])
    assert edits["env"] == ["C=1", "B=1", "A=1"]
    assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia1", "/dev/nvidia0"]
    assert [m["hostPath"] for m in edits["mounts"]] == ["/h/c", "/h/b", "/h/a"]
    with pytest.raises(cdi.CdiError) as e:
        cdi.edits_for(SPEC, ["x", "a", "y"])
    assert str(e.value) == "no CDI device nvidia.com/gpu=x, nvidia.com/gpu=y in the spec (it has: a, all, b)"
    with pytest.raises(cdi.CdiError, match="^kind: "):
        cdi.edits_for(with_field(SPEC, ("kind",), "x"), ["a"])


def test_every_field_reaches_the_oci_config_exactly():
    config = cdi.apply_to_oci({}, SPEC, ["b", "a"], stat_fn=lambda p: pytest.fail(p))
    dev = {"type": "c", "fileMode": 0o666, "uid": 0, "gid": 0}
    assert config == {
        "linux": {"devices": [{"path": "/dev/nvidiactl", **dev, "major": 195, "minor": 255},
                              {"path": "/dev/nvidia1", **dev, "major": 195, "minor": 1},
                              {"path": "/dev/nvidia0", **dev, "major": 195, "minor": 0}],
                  "resources": {"devices": [{"allow": True, "type": "c", "major": 195, "minor": 255, "access": "rw"},
                                            {"allow": True, "type": "c", "major": 195, "minor": 1, "access": "rw"},
                                            {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "r"}]}},
        "mounts": [{"destination": "/c/c", "type": "bind", "source": "/h/c", "options": ["ro", "bind"]},
                   {"destination": "/c/b", "type": "bind", "source": "/h/b", "options": ["ro", "rbind", "nosuid"]},
                   {"destination": "/c/a", "type": "bind", "source": "/h/a", "options": ["ro", "bind"]}],
        "process": {"env": ["C=1", "B=1", "A=1"]}}


def test_a_node_the_config_has_is_not_added_again_and_the_others_still_are():
    config = {"linux": {"devices": [{"path": "/dev/nvidia1", "type": "c", "major": 1, "minor": 1}]}}
    cdi.apply_to_oci(config, SPEC, ["b", "a", "b"])
    assert [(d["path"], d["major"]) for d in config["linux"]["devices"]] == [
        ("/dev/nvidia1", 1), ("/dev/nvidiactl", 195), ("/dev/nvidia0", 195)]
    assert [r["minor"] for r in config["linux"]["resources"]["devices"]] == [255, 0]


@pytest.mark.parametrize("options", [list(c) for n in range(4) for c in itertools.combinations(
    sorted(cdi.ALLOWED_MOUNT_OPTIONS - {"rw"}), n)][:200])
def test_every_mount_reaches_the_config_read_only_as_a_bind(options):
    spec = with_field(GOOD, MOUNT + ("options",), options)
    out = cdi.apply_to_oci({}, spec, [])["mounts"][0]["options"]
    assert out == ([] if "ro" in options else ["ro"]) + options + ([] if {"bind", "rbind"} & set(options) else ["bind"])


def test_a_variable_of_the_spec_replaces_the_configs_of_that_name_only():
    spec = with_field(GOOD, ("containerEdits", "env"), ["A=b=c", "D=1"])
    config = cdi.apply_to_oci({"process": {"env": ["A=x", "AB=y", "B=1", "A=z"]}}, spec, [])
    assert config["process"]["env"] == ["AB=y", "B=1", "A=b=c", "D=1"]


@pytest.mark.parametrize("drop", [("major",), ("minor",), ("major", "minor")])
def test_a_node_without_both_numbers_takes_the_hosts_from_its_host_path(drop):
    spec = copy.deepcopy(GOOD)
    node = spec["devices"][0]["containerEdits"]["deviceNodes"][0]
    for k in drop:
        del node[k]
    asked = []
    config = cdi.apply_to_oci({}, spec, ["0"], stat_fn=lambda p: asked.append(p) or char_stat(200, 9))
    assert [(d["path"], d["major"], d["minor"]) for d in config["linux"]["devices"]] == [("/dev/nvidia0", 200, 9)]
    assert asked == ["/dev/nvidia0"]
    node["hostPath"] = "/dev/nvidia7"
    asked.clear()
    config = cdi.apply_to_oci({}, spec, ["0"], stat_fn=lambda p: asked.append(p) or char_stat(200, 7))
    assert [(d["path"], d["major"], d["minor"]) for d in config["linux"]["devices"]] == [("/dev/nvidia0", 200, 7)]
    assert asked == ["/dev/nvidia7"]


def test_a_node_the_host_lacks_or_that_is_no_character_device_is_one_line(tmp_path):
    spec = with_field(with_field(GOOD, NODE + ("major",), KeyError), NODE + ("path",), "/dev/nvidia9")
    spec = with_field(spec, NODE + ("hostPath",), str(tmp_path / "missing"))
    with pytest.raises(cdi.CdiError) as e:
        cdi.apply_to_oci({}, spec, ["0"])
    assert str(e.value) == f"device node {tmp_path / 'missing'}: No such file or directory"
    spec = with_field(spec, NODE + ("hostPath",), str(tmp_path))
    with pytest.raises(cdi.CdiError) as e:
        cdi.apply_to_oci({}, spec, ["0"])
    assert str(e.value) == f"device node {tmp_path} is not a character device"


def test_ch_run_binds_make_each_target_once_and_keep_what_is_there(tmp_path):
    host_dir = tmp_path / "hostdir"
    host_dir.mkdir()
    rootfs = tmp_path / "rootfs"
    (rootfs / "c/kept").mkdir(parents=True)
    (rootfs / "c/kept/file").write_text("image's")
    (rootfs / "c/link").symlink_to("nowhere")
    mounts = [{"hostPath": "/h/1", "containerPath": "/c/lib/one"}, {"hostPath": "/h/2", "containerPath": "/c/lib/two"},
              {"hostPath": str(host_dir), "containerPath": "/c/dir"}, {"hostPath": "/h/3", "containerPath": "/c/kept/file"},
              {"hostPath": "/X/5", "containerPath": "/X/5"}]
    spec = with_field(GOOD, ("containerEdits", "mounts"), mounts)
    for _ in range(2):  # a second run finds the targets there
        opts, nodes = cdi.ch_run_binds(spec, ["0"], str(rootfs), read_only=lambda p: "/ro" + p)
        assert opts == [f"-b/ro{m['hostPath']}:{m['containerPath']}" for m in mounts] + ["--set-env=A=1"]
        assert nodes == ["/dev/nvidia0"]
        assert (rootfs / "c/lib/one").is_file() and (rootfs / "c/lib/two").is_file() and (rootfs / "X/5").is_file()
        assert (rootfs / "c/dir").is_dir() and (rootfs / "c/kept/file").read_text() == "image's"
        assert os.readlink(rootfs / "c/link") == "nowhere" and not (rootfs / "c/nowhere").exists()


@pytest.mark.parametrize("container_path, link", [("/c/link", "/c/link"), ("/c/link/lib.so", "/c/link"),
                                                  ("/c/dirlink/x/lib.so", "/c/dirlink")])
def test_ch_run_binds_never_make_a_target_through_a_link_in_the_image(tmp_path, container_path, link):
    outside = tmp_path / "outside"
    outside.mkdir()
    rootfs = tmp_path / "rootfs"
    (rootfs / "c").mkdir(parents=True)
    (rootfs / "c/link").symlink_to(outside / "file")
    (rootfs / "c/dirlink").symlink_to(outside)
    spec = with_field(GOOD, ("containerEdits", "mounts"), [{"hostPath": "/h/1", "containerPath": container_path}])
    with pytest.raises(cdi.CdiError) as e:
        cdi.ch_run_binds(spec, ["0"], str(rootfs), read_only=lambda p: p)
    assert str(e.value) == f"{container_path}: {link} is a symbolic link in the image; a mount target must be a plain path"
    assert list(outside.iterdir()) == []  # nothing made outside the image
