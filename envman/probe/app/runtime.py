"""The runtime check: the CUDA runtime (libcudart) in the image matches the stack's CUDA."""

import ctypes.util
import glob
import json
import os
import re
import subprocess
import sys

from .contract import FAIL, PASS, SKIP
from .versions import format_cuda_int, short_version, version_parts, versions_match


def _site_dirs():
    dirs = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in dirs:
            dirs.append(p)
    try:
        import site
        for p in list(site.getsitepackages()) + [site.getusersitepackages()]:
            if p and os.path.isdir(p) and p not in dirs:
                dirs.append(p)
    except Exception:  # noqa: BLE001 - some virtualenvs lack getsitepackages
        pass
    return dirs


def default_cudart_patterns():
    """Where a CUDA runtime can live: system toolkits, LD_LIBRARY_PATH, framework wheels."""
    pats = [
        ("system", "/usr/local/cuda*/lib64/libcudart.so*"),
        ("system", "/usr/local/cuda*/targets/*/lib/libcudart.so*"),
        ("system", "/usr/lib/x86_64-linux-gnu/libcudart.so*"),
        ("system", "/usr/lib/aarch64-linux-gnu/libcudart.so*"),
        ("system", "/usr/lib64/libcudart.so*"),
    ]
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d:
            pats.append(("LD_LIBRARY_PATH", os.path.join(d, "libcudart.so*")))
    for d in _site_dirs():
        pats.append(("wheel", os.path.join(d, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        pats.append(("wheel", os.path.join(d, "nvidia", "cu*", "lib", "libcudart.so*")))
        pats.append(("wheel", os.path.join(d, "torch", "lib", "libcudart*.so*")))
        pats.append(("wheel", os.path.join(d, "tensorflow", "libcudart*.so*")))
        pats.append(("wheel", os.path.join(d, "jaxlib", "**", "libcudart*.so*")))
    return pats


def version_from_path(path):
    """CUDA version a libcudart file name / location reveals, or None.

    ``libcudart.so.12.8.90`` -> "12.8"; ``.../cuda-12.4/...libcudart.so.12`` -> "12.4";
    ``libcudart.so.12`` -> "12"; a sibling ``nvidia_cuda_runtime_cu12-12.8.90.dist-info``
    gives "12.8".
    """
    base = os.path.basename(path)
    m = re.search(r"\.so\.(\d+)\.(\d+)", base)
    if m:
        return "%s.%s" % (m.group(1), m.group(2))
    m = re.search(r"cuda-(\d+)\.(\d+)", path)
    if m:
        return "%s.%s" % (m.group(1), m.group(2))
    m = re.search(r"(?:^|/)(?:site|dist)-packages/nvidia/(?:cuda_runtime|cu\d+)/", path)
    if m:
        root = path[:m.end()].split("/nvidia/")[0]
        for info in sorted(glob.glob(os.path.join(root, "nvidia_cuda_runtime*.dist-info"))):
            mm = re.search(r"-(\d+)\.(\d+)[^-]*\.dist-info$", info)
            if mm:
                return "%s.%s" % (mm.group(1), mm.group(2))
    m = re.search(r"\.so\.(\d+)$", base)
    if m:
        return m.group(1)
    return None


def find_cudart(patterns=None):
    """All distinct libcudart files found: ``[{"path", "realpath", "source", "version"}]``."""
    use_defaults = patterns is None
    if use_defaults:
        patterns = default_cudart_patterns()
    found = []
    seen = set()
    for source, pat in patterns:
        try:
            hits = sorted(glob.glob(pat, recursive=True))
        except (OSError, ValueError):
            continue
        for path in hits:
            if not os.path.isfile(path):
                continue
            real = os.path.realpath(path)
            if real in seen or real.endswith(".a"):
                continue
            seen.add(real)
            found.append({"path": path, "realpath": real, "source": source,
                          "version": version_from_path(real) or version_from_path(path),
                          "version_from": "file name"})
    if use_defaults:
        name = ctypes.util.find_library("cudart")
        if name and not any(os.path.basename(f["realpath"]).startswith(name) or
                            os.path.basename(f["path"]) == name for f in found):
            found.append({"path": name, "realpath": name, "source": "ldconfig",
                          "version": version_from_path(name), "version_from": "file name"})
    return found


_CUDART_QUERY = r"""
import ctypes, json, sys
out = {}
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print(json.dumps({"error": "dlopen failed: %s" % e}))
    sys.exit(0)
v = ctypes.c_int(0)
out["rc"] = lib.cudaRuntimeGetVersion(ctypes.byref(v))
out["version"] = v.value
if sys.argv[2] == "1":
    n = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(n))
    out["device_count_rc"] = rc
    out["device_count"] = n.value
    try:
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        out["device_count_error"] = lib.cudaGetErrorName(rc).decode()
    except Exception:
        pass
try:
    for line in open("/proc/self/maps"):
        p = line.split()
        if len(p) >= 6 and "libcudart" in p[-1]:
            out["loaded"] = p[-1]
            break
except Exception:
    pass
print(json.dumps(out))
"""

# cudaGetDeviceCount errors that mean "this runtime cannot work with this driver".
CUDART_FATAL = {35: "cudaErrorInsufficientDriver", 803: "cudaErrorSystemDriverMismatch",
                804: "cudaErrorCompatNotSupportedOnDevice"}


def query_cudart(path, with_device=False, timeout=30):
    """Load ``path`` in a child Python and ask it its version (and cudaGetDeviceCount).

    A child keeps this process clean: a libcudart loaded here would shadow (by soname) the
    one a framework loads later.
    """
    exe = sys.executable
    if not exe:
        return {"error": "no sys.executable to run the query"}
    try:
        p = subprocess.Popen([exe, "-c", _CUDART_QUERY, path, "1" if with_device else "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return {"error": "query timed out after %s s" % timeout}
    except OSError as e:
        return {"error": "cannot run %s: %s" % (exe, e)}
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": "query crashed (rc %s): %s" % (p.returncode, err.strip()[-300:])}


def check_runtime(ctx):
    expected = ctx.expect.get("cuda")
    exp = short_version(expected) if expected else None
    data = {"expected": exp, "cuda_version_env": os.environ.get("CUDA_VERSION")}
    found = find_cudart(ctx.cudart_patterns)
    for f in found:
        if not ctx.cudart_query:
            continue
        q = query_cudart(f["realpath"], with_device=ctx.gpu_present)
        f["query"] = q
        if q.get("rc") == 0 and q.get("version"):
            f["version"] = format_cuda_int(q["version"])
            f["version_from"] = "cudaRuntimeGetVersion"
        if q.get("loaded") and f["source"] == "ldconfig":
            f["realpath"] = q["loaded"]
    data["found"] = found
    where = "; ".join("%s at %s (%s)" % (f["version"] or "?", f["realpath"], f["source"])
                      for f in found)
    if not found:
        if exp is None:
            return SKIP, "no CUDA runtime (libcudart) found, and the stack expects none", data
        hint = (" (CUDA_VERSION=%s is set, but no libcudart is there)" %
                data["cuda_version_env"]) if data["cuda_version_env"] else ""
        return FAIL, "no libcudart found; the stack expects CUDA %s%s" % (exp, hint), data
    fatal = []
    for f in found:
        q = f.get("query") or {}
        rc = q.get("device_count_rc")
        if rc in CUDART_FATAL:
            fatal.append("CUDA runtime %s at %s cannot use this driver (CUDA %s): %s" % (
                f["version"], f["realpath"], ctx.driver_version, CUDART_FATAL[rc]))
    if exp is None:
        if fatal:
            return FAIL, "; ".join(fatal), data
        return PASS, "found CUDA runtime %s; the stack expects no CUDA" % where, data
    matching = [f for f in found if f["version"] and versions_match(f["version"], exp, 2)]
    data["matching"] = [f["realpath"] for f in matching]
    if not matching:
        return FAIL, "CUDA runtime mismatch: expected %s, found %s" % (exp, where), data
    fatal_matching = [m for m in fatal if any(f["realpath"] in m for f in matching)]
    if fatal_matching:
        return FAIL, "; ".join(fatal_matching), data
    notes = ""
    if ctx.driver_version and version_parts(exp) > version_parts(ctx.driver_version):
        notes = " (newer than the driver's CUDA %s: relies on minor-version compatibility)" % (
            ctx.driver_version)
    others = [f for f in found if f not in matching]
    if others:
        notes += "; also present: " + "; ".join("%s at %s" % (f["version"] or "?", f["realpath"])
                                                for f in others)
    return PASS, "CUDA runtime %s found at %s%s" % (
        exp, ", ".join(f["realpath"] for f in matching), notes), data
