"""The result document: its skeleton, the host facts it carries, and its one-line JSON form."""

import json
import math
import os
import platform
import socket
import sys

from .contract import OVERALL_FAIL, PROBE_VERSION


def _finite(x):
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return dict((str(k), _finite(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def to_json_line(doc):
    """One line of strict JSON (NaN / inf become null; non-ASCII escaped)."""
    return json.dumps(_finite(doc), allow_nan=False, ensure_ascii=True, default=str)


def root_mount(mountinfo="/proc/self/mountinfo"):
    """``(root, fstype)`` of the mount at ``/`` as this process sees it, or None.

    On a host the root field is ``/``; an OCI runtime (runc, crun, ch-run) pivots into a
    bind-mounted folder, so the root field names that folder of its file system.
    """
    found = None
    try:
        with open(mountinfo) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 7 or parts[4] != "/":
                    continue
                try:
                    sep = parts.index("-", 6)
                except ValueError:
                    continue
                fstype = parts[sep + 1] if len(parts) > sep + 1 else None
                found = (parts[3].replace("\\040", " "), fstype)  # the last one is on top
    except (IOError, OSError):
        return None
    return found


def container_signals(exists=os.path.exists, environ=None, mountinfo="/proc/self/mountinfo"):
    """What says this process runs in a container: engine marker files, the variables runtimes
    set, and a root file system that is a bind-mounted folder (runc, ch-run) or an overlay."""
    environ = os.environ if environ is None else environ
    signals = []
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if exists(marker):
            signals.append(marker)
    if environ.get("container"):
        signals.append("container=%s" % environ.get("container"))
    if "CH_RUNNING" in environ:
        signals.append("CH_RUNNING (ch-run)")
    root = root_mount(mountinfo)
    if root is not None:
        if root[0] != "/":
            signals.append("root is the folder %s of its file system" % root[0])
        elif root[1] == "overlay":
            signals.append("root is an overlay file system")
    return signals


def host_info():
    def env(k):
        return os.environ.get(k)
    signals = container_signals()
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "kernel": platform.release(),
            "in_container": bool(signals), "container_signals": signals,
            "cuda_version_env": env("CUDA_VERSION"),
            "nvidia_visible_devices": env("NVIDIA_VISIBLE_DEVICES"),
            "nvidia_driver_capabilities": env("NVIDIA_DRIVER_CAPABILITIES"),
            "python_executable": sys.executable}


def base_document():
    return {"probe_version": PROBE_VERSION, "overall": OVERALL_FAIL, "reason": "",
            "python": platform.python_version(), "host": host_info(), "gpus": [],
            "driver_version": None, "checks": [], "bench": None,
            "expect": {"path": None, "found": False, "stack": {}}, "seconds": 0.0}


def usage_document(message):
    doc = base_document()
    doc["reason"] = "bad usage: %s" % message
    return doc
