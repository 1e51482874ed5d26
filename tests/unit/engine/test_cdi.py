"""envman's CDI spec for NVIDIA GPUs: discovery on a fake host tree, the spec, its validation, and
its edits applied to an OCI config and to ch-run options."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import pytest

from envman.engine import cdi
from envman.engine.select import cdi_gpu_devices

VERSION = "580.159.04"
UUID0 = "GPU-b7c39e02-4bb2-cc19-d491-57ad931f7b08"
UUID1 = "GPU-00000000-1111-2222-3333-444444444444"
#: device numbers of the fake host: /dev path -> (major, minor)
NODES = {"/dev/nvidia0": (195, 0), "/dev/nvidia1": (195, 1), "/dev/nvidiactl": (195, 255),
         "/dev/nvidia-uvm": (508, 0), "/dev/nvidia-uvm-tools": (508, 1),
         "/dev/nvidia-caps/nvidia-cap1": (511, 1)}


def fake_stat(root: Path, nodes=NODES):
    def st(path: str) -> os.stat_result:
        rel = "/" + os.path.relpath(path, root)
        if rel in nodes:
            major, minor = nodes[rel]
            return char_stat(major, minor)
        return os.stat(path)
    return st


def char_stat(major: int, minor: int) -> os.stat_result:
    """What os.stat gives for a character device of these numbers."""
    # (mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime), and st_rdev by name
    return os.stat_result([stat.S_IFCHR | 0o666, 0, 0, 1, 0, 0, 0, 0, 0, 0], {"st_rdev": os.makedev(major, minor)})


def make_host(root: Path, *, proc_gpus=True, version=VERSION, nodes=NODES) -> Path:
    for path in nodes:
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    if version:
        v = root / "proc/driver/nvidia/version"
        v.parent.mkdir(parents=True, exist_ok=True)
        v.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build\nGCC version: 12\n")
    if proc_gpus:
        # bus order differs from minor order: 0000:00:04.0 is index 0 and holds minor 1
        for bus, model, uuid, minor in (("0000:00:05.0", "NVIDIA H100 80GB HBM3", UUID0, 0),
                                        ("0000:00:04.0", "NVIDIA H200", UUID1, 1)):
            d = root / "proc/driver/nvidia/gpus" / bus
            d.mkdir(parents=True)
            (d / "information").write_text(f"Model: \t\t {model}\nIRQ:  42\nGPU UUID: \t {uuid}\n"
                                           f"Video BIOS: \t 96.00\nBus Type: \t PCIe\nDevice Minor: \t {minor}\n"
                                           f"Bus Location: \t {bus}\n")
    lib = root / "usr/local/nvidia/lib64"
    lib.mkdir(parents=True)
    for name in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"):
        (lib / f"{name}.{VERSION}").write_bytes(b"\x7fELF" + name.encode())
        (lib / f"{name}.1").symlink_to(f"{name}.{VERSION}")
    (lib / "libcuda.so").symlink_to("libcuda.so.1")  # the development link: not a runtime name
    (lib / "libcuda.so.570.86.15").write_bytes(b"\x7fELF stale")  # another driver's leftover
    other = root / "usr/lib/x86_64-linux-gnu"
    other.mkdir(parents=True)
    (other / f"libnvidia-nvvm.so.{VERSION}").write_bytes(b"\x7fELF nvvm")
    (other / "libnvidia-nvvm.so.4").symlink_to(f"libnvidia-nvvm.so.{VERSION}")
    bins = root / "usr/local/nvidia/bin"
    bins.mkdir(parents=True)
    smi = bins / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    (bins / "nvidia-debugdump").write_text("not executable")
    return root


def test_discovery_reads_gpus_in_bus_order_nodes_libraries_and_programs(tmp_path):
    root = make_host(tmp_path)
    found = cdi.discover(str(root), fake_stat(root))
    assert found.driver_version == VERSION
    assert [(g.index, g.node.path, g.node.minor, g.uuid, g.model) for g in found.gpus] == [
        (0, "/dev/nvidia1", 1, UUID1, "NVIDIA H200"), (1, "/dev/nvidia0", 0, UUID0, "NVIDIA H100 80GB HBM3")]
    assert [(n.path, n.major, n.minor) for n in found.control_nodes] == [
        ("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 508, 0), ("/dev/nvidia-uvm-tools", 508, 1),
        ("/dev/nvidia-caps/nvidia-cap1", 511, 1)]
    libs = {f.host_path: f.names for f in found.libraries}
    assert libs == {
        f"/usr/local/nvidia/lib64/libcuda.so.{VERSION}": (f"libcuda.so.{VERSION}", "libcuda.so.1"),
        f"/usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.{VERSION}": (
            f"libnvidia-ptxjitcompiler.so.{VERSION}", "libnvidia-ptxjitcompiler.so.1"),
        f"/usr/lib/x86_64-linux-gnu/libnvidia-nvvm.so.{VERSION}": (f"libnvidia-nvvm.so.{VERSION}", "libnvidia-nvvm.so.4"),
        f"/usr/local/nvidia/lib64/libnvidia-ml.so.{VERSION}": (f"libnvidia-ml.so.{VERSION}", "libnvidia-ml.so.1"),
    }
    # only executables are programs; the stale library of another driver is never taken
    assert [(b.host_path, b.names) for b in found.binaries] == [("/usr/local/nvidia/bin/nvidia-smi", ("nvidia-smi",))]
    assert found.notes == ()


def test_without_a_driver_version_the_so1_links_choose_the_files(tmp_path):
    root = make_host(tmp_path, version=None)
    found = cdi.discover(str(root), fake_stat(root))
    assert found.driver_version is None
    assert f"/usr/local/nvidia/lib64/libcuda.so.{VERSION}" in {f.host_path for f in found.libraries}
    assert any("no /proc/driver/nvidia/version" in n and VERSION in n for n in found.notes)


def test_without_proc_gpus_the_device_nodes_give_the_gpus_in_minor_order(tmp_path):
    root = make_host(tmp_path, proc_gpus=False)
    found = cdi.discover(str(root), fake_stat(root))
    assert [(g.index, g.node.path, g.uuid) for g in found.gpus] == [(0, "/dev/nvidia0", None), (1, "/dev/nvidia1", None)]
    assert any("minor order" in n for n in found.notes)


def test_a_device_file_that_is_not_a_character_device_is_no_gpu(tmp_path):
    root = make_host(tmp_path)
    nodes = {k: v for k, v in NODES.items() if k != "/dev/nvidia0"}  # /dev/nvidia0 stays a plain file
    found = cdi.discover(str(root), fake_stat(root, nodes))
    assert [g.node.path for g in found.gpus] == ["/dev/nvidia1"]
    assert any("/dev/nvidia0" in n and "not a character device" in n for n in found.notes)


def spec_of(tmp_path) -> dict:
    root = make_host(tmp_path)
    return cdi.spec_for(cdi.discover(str(root), fake_stat(root)))


def test_the_spec_names_each_gpu_by_index_and_uuid_and_all(tmp_path):
    spec = spec_of(tmp_path)
    assert spec["cdiVersion"] == cdi.CDI_VERSION and spec["kind"] == "nvidia.com/gpu"
    names = [d["name"] for d in spec["devices"]]
    assert names == ["0", UUID1, "1", UUID0, "all"]
    nodes = {d["name"]: [n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in spec["devices"]}
    assert nodes == {"0": ["/dev/nvidia1"], UUID1: ["/dev/nvidia1"], "1": ["/dev/nvidia0"], UUID0: ["/dev/nvidia0"],
                     "all": ["/dev/nvidia1", "/dev/nvidia0"]}
    common = spec["containerEdits"]
    assert common["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [n["path"] for n in common["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                                         "/dev/nvidia-caps/nvidia-cap1"]
    mounts = {m["containerPath"]: m["hostPath"] for m in common["mounts"]}
    assert mounts["/usr/local/nvidia/lib64/libcuda.so.1"] == f"/usr/local/nvidia/lib64/libcuda.so.{VERSION}"
    assert mounts["/usr/local/nvidia/lib64/libnvidia-nvvm.so.4"] == f"/usr/lib/x86_64-linux-gnu/libnvidia-nvvm.so.{VERSION}"
    assert mounts["/usr/local/nvidia/bin/nvidia-smi"] == "/usr/local/nvidia/bin/nvidia-smi"
    assert all(m["options"] == ["ro", "nosuid", "nodev", "bind"] for m in common["mounts"])
    assert cdi.check_spec(spec) is spec


def test_podmans_reader_sees_the_devices_of_the_spec_envman_writes(tmp_path):
    spec = spec_of(tmp_path / "host")
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "envman-nvidia.json").write_text(cdi.spec_json(spec))
    assert cdi_gpu_devices([str(d)]) == frozenset({"0", "1", UUID0, UUID1, "all"})
    assert cdi.load_spec(str(d / "envman-nvidia.json")) == spec


def test_no_gpu_or_no_libcuda_gives_no_spec(tmp_path):
    empty = cdi.discover(str(tmp_path), fake_stat(tmp_path, {}))
    with pytest.raises(cdi.CdiError, match="no NVIDIA GPU found"):
        cdi.spec_for(empty)
    root = make_host(tmp_path / "h")
    for f in (root / "usr/local/nvidia/lib64").glob("libcuda.so*"):
        f.unlink()
    with pytest.raises(cdi.CdiError, match="libcuda.so was not found"):
        cdi.spec_for(cdi.discover(str(root), fake_stat(root)))


GOOD = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "major": 195, "minor": 0}]}}],
        "containerEdits": {"env": ["A=1"], "mounts": [{"hostPath": "/usr/lib/libcuda.so.1",
                                                       "containerPath": "/usr/local/nvidia/lib64/libcuda.so.1",
                                                       "options": ["ro", "bind"]}]}}


def with_field(doc: dict, path: tuple, value) -> dict:
    """A copy of ``doc`` with the field at ``path`` set to ``value`` (removed for ``KeyError``)."""
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


MOUNT = ("containerEdits", "mounts", 0)
NODE = ("devices", 0, "containerEdits", "deviceNodes", 0)
HOSTILE = [
    (("kind",), "vendor.com/evil", "kind"),
    (("cdiVersion",), "1.0", "cdiVersion"),
    (("cdiVersion",), 5, "cdiVersion"),
    (("devices",), [], "at least one device"),
    (("devices", 0, "name"), "../0", "not a CDI device name"),
    (("devices", 0, "name"), "-0", "not a CDI device name"),
    (("devices", 0, "name"), "0\n", "not a CDI device name"),
    (("devices", 0, "name"), 0, "not a CDI device name"),
    (("devices", 0, "containerEdits"), ["x"], "must be an object"),
    (("devices", 0, "containerEdits", "extra"), 1, "unknown containerEdits"),
    (NODE + ("path",), "dev/nvidia0", "absolute, normalised"),
    (NODE + ("path",), "/dev/../etc/shadow", "absolute, normalised"),
    (NODE + ("path",), "/etc/nvidia0", "not under /dev"),
    (NODE + ("path",), "/dev/nvidia0\x00", "absolute, normalised"),
    (NODE + ("hostPath",), "../dev/sda", "absolute, normalised"),
    (NODE + ("type",), "b", "character devices"),
    (NODE + ("minor",), -1, "not a device number"),
    (NODE + ("major",), True, "not a device number"),
    (NODE + ("permissions",), "rwx", "letters of 'rwm'"),
    (NODE + ("permissions",), "", "letters of 'rwm'"),
    (MOUNT + ("hostPath",), "/", "absolute, normalised"),
    (MOUNT + ("hostPath",), "relative/lib", "absolute, normalised"),
    (MOUNT + ("containerPath",), "/usr/local/nvidia/lib64/../../../../etc/passwd", "absolute, normalised"),
    (MOUNT + ("containerPath",), "/usr//lib", "absolute, normalised"),
    (MOUNT + ("options",), ["ro", "bind", "exec,suid"], "options"),
    (MOUNT + ("options",), ["rw", "bind"], "read-only"),
    (MOUNT + ("options",), "ro", "options"),
    (("containerEdits", "env", 0), "LD_PRELOAD", "NAME=VALUE"),
    (("containerEdits", "env", 0), "1A=x", "NAME=VALUE"),
    (("containerEdits", "env", 0), "A=x\nB=y", "NAME=VALUE"),
    (("containerEdits", "hooks"), [{"hookName": "createContainer", "path": "/bin/sh"}], "does not run hooks"),
]


@pytest.mark.parametrize("path, value, message", HOSTILE, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v, _ in HOSTILE])
def test_a_hostile_spec_is_refused_naming_the_field(path, value, message):
    assert cdi.check_spec(copy.deepcopy(GOOD))
    with pytest.raises(cdi.CdiError, match=message):
        cdi.check_spec(with_field(GOOD, path, value))


def test_two_devices_of_one_name_are_refused():
    doc = copy.deepcopy(GOOD)
    doc["devices"].append(copy.deepcopy(doc["devices"][0]))
    with pytest.raises(cdi.CdiError, match="appears twice"):
        cdi.check_spec(doc)


def test_load_spec_names_the_file_in_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(cdi.CdiError, match=r"x\.json: cannot read a JSON CDI spec"):
        cdi.load_spec(str(bad))
    bad.write_text(json.dumps(with_field(GOOD, ("kind",), "x")))
    with pytest.raises(cdi.CdiError) as e:
        cdi.load_spec(str(bad))
    assert str(e.value).startswith(str(bad)) and "\n" not in str(e.value)


def oci_config() -> dict:
    return {"process": {"env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"]},
            "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]}


def test_apply_to_oci_adds_nodes_with_cgroup_rules_read_only_mounts_and_env(tmp_path):
    root = make_host(tmp_path)
    spec = cdi.spec_for(cdi.discover(str(root), fake_stat(root)))
    config = cdi.apply_to_oci(oci_config(), spec, ["1"])
    devices = config["linux"]["devices"]
    assert [(d["path"], d["type"], d["major"], d["minor"]) for d in devices] == [
        ("/dev/nvidiactl", "c", 195, 255), ("/dev/nvidia-uvm", "c", 508, 0), ("/dev/nvidia-uvm-tools", "c", 508, 1),
        ("/dev/nvidia-caps/nvidia-cap1", "c", 511, 1), ("/dev/nvidia0", "c", 195, 0)]
    rules = config["linux"]["resources"]["devices"]
    assert rules[0] == {"allow": False, "access": "rwm"}  # the default deny stays first
    assert [(r["major"], r["minor"], r["access"]) for r in rules[1:]] == [(d["major"], d["minor"], "rw") for d in devices]
    binds = [m for m in config["mounts"] if m["type"] == "bind"]
    assert binds and all(m["options"][0] == "ro" and m["source"].startswith("/usr/") for m in binds)
    assert {m["destination"] for m in binds} >= {"/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/bin/nvidia-smi"}
    # the spec's variable replaces the image's, others stay
    assert config["process"]["env"] == ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void"]


def test_apply_to_oci_takes_numbers_from_the_host_where_the_spec_has_none_and_adds_a_node_once():
    spec = with_field(GOOD, NODE + ("major",), KeyError)
    spec = with_field(spec, NODE + ("minor",), KeyError)
    spec["devices"].append({"name": "all", "containerEdits": copy.deepcopy(spec["devices"][0]["containerEdits"])})
    config = cdi.apply_to_oci(oci_config(), spec, ["0", "all"], stat_fn=lambda p: char_stat(195, 7))
    assert [(d["path"], d["major"], d["minor"]) for d in config["linux"]["devices"]] == [("/dev/nvidia0", 195, 7)]
    with pytest.raises(cdi.CdiError, match="not a character device"):
        cdi.apply_to_oci(oci_config(), spec, ["0"], stat_fn=lambda p: os.stat("/"))


def test_an_unknown_device_name_is_refused_with_the_names_the_spec_has():
    with pytest.raises(cdi.CdiError, match=r"no CDI device nvidia.com/gpu=7 in the spec \(it has: 0\)"):
        cdi.apply_to_oci(oci_config(), GOOD, ["7"])


def test_ch_run_binds_make_their_targets_and_set_the_env(tmp_path):
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    staged = []
    opts, nodes = cdi.ch_run_binds(GOOD, ["0"], str(rootfs), read_only=lambda p: staged.append(p) or "/ro/0")
    # the source is the read-only view of the host file, never the host file itself
    assert staged == ["/usr/lib/libcuda.so.1"]
    assert opts == ["-b/ro/0:/usr/local/nvidia/lib64/libcuda.so.1", "--set-env=A=1"]
    assert nodes == ["/dev/nvidia0"]
    assert (rootfs / "usr/local/nvidia/lib64/libcuda.so.1").is_file()


def test_load_spec_refuses_a_fifo_without_waiting_and_a_huge_file(tmp_path):
    fifo = tmp_path / "spec.json"
    os.mkfifo(fifo)
    with pytest.raises(cdi.CdiError, match="not a regular file"):
        cdi.load_spec(str(fifo))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (cdi.MAX_SPEC_BYTES + 1))
    with pytest.raises(cdi.CdiError, match="larger than"):
        cdi.load_spec(str(big))
