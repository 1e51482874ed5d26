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


def host_info():
    def env(k):
        return os.environ.get(k)
    in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "kernel": platform.release(),
            "in_container": in_container, "cuda_version_env": env("CUDA_VERSION"),
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
