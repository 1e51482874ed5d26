"""The framework check: the framework imports, reports the stack's versions, computes right on the CPU and the GPU."""

from .arch import arch_supported, expected_arch_list
from .contract import FAIL, FRAMEWORKS, PASS, SKIP
from .frameworks.base import NotReported
from .numeric import compare_values, det_matrix, flatten, py_matmul
from .versions import versions_match


MATMUL_RTOL = 1e-3
GPU_SUBCHECKS = ("device", "arch", "gpu_matmul", "gpu_conv")


def _sub(subs, name, status, reason, **extra):
    s = {"name": name, "status": status, "reason": reason}
    s.update(extra)
    subs.append(s)
    return s


def _build_match(what, found, expected, fw):
    """Compare the CUDA / cuDNN a framework build reports with the stack's row."""
    if expected is None and found is None:
        return PASS, "no %s (CPU build), as expected" % what
    if expected is None:
        return FAIL, "%s is built with %s %s but the stack expects none" % (fw, what, found)
    if found is None:
        return FAIL, "%s reports no %s (CPU build?) but the stack expects %s %s" % (
            fw, what, what, expected)
    if versions_match(found, expected, 2):
        return PASS, "%s %s (expected %s)" % (what, found, expected)
    return FAIL, "%s reports %s %s, the stack expects %s" % (fw, what, found, expected)


def check_framework(ctx):
    fw = ctx.expect.get("framework")
    if not fw:
        return SKIP, "no framework in this stack", {}
    adapter = ctx.adapter_factory(fw)
    if adapter is None:
        return FAIL, "unknown framework %r (known: %s)" % (fw, ", ".join(FRAMEWORKS)), {}
    subs = []
    data = {"framework": fw, "subchecks": subs}
    try:
        adapter.load()
    except BaseException as e:  # noqa: B902 - ImportError, OSError from a missing .so, ...
        return FAIL, "cannot import %s: %s: %s" % (fw, type(e).__name__, e), data
    try:
        data.update(adapter.extra())
    except Exception:  # noqa: BLE001
        pass

    # version
    version = adapter.version()
    data["version"] = version
    exp_v = ctx.expect.get("framework_version")
    data["expected_version"] = exp_v
    if exp_v is None:
        _sub(subs, "version", SKIP, "%s %s (no expected version)" % (fw, version))
    elif versions_match(version, exp_v):
        _sub(subs, "version", PASS, "%s %s" % (fw, version))
    else:
        _sub(subs, "version", FAIL, "%s version %s, the stack expects %s" % (fw, version, exp_v))

    # CUDA / cuDNN the build reports
    exp_cuda = ctx.expect.get("cuda")
    build_cuda = None
    for what, getter, key, exp in (("CUDA", adapter.cuda_version, "cuda", exp_cuda),
                                   ("cuDNN", adapter.cudnn_version, "cudnn",
                                    ctx.expect.get("cudnn"))):
        try:
            found = getter()
        except NotReported as e:
            data[key] = None
            _sub(subs, key, SKIP, str(e))
            continue
        except Exception as e:  # noqa: BLE001
            data[key] = None
            _sub(subs, key, FAIL, "cannot read the %s version: %s: %s" % (
                what, type(e).__name__, e))
            continue
        data[key] = found
        if key == "cuda":
            build_cuda = found
        if key == "cudnn" and exp is None:
            _sub(subs, key, SKIP, "%s (the stack names no cuDNN)" % (
                ("cuDNN %s" % found) if found else "no cuDNN"))
            continue
        status, reason = _build_match(what, found, exp, fw)
        _sub(subs, key, status, reason)

    # CPU path: always exercised
    try:
        a = det_matrix(32, 32, 1)
        b = det_matrix(32, 32, 2)
        got = flatten(adapter.cpu_matmul(a, b))
        cmp_ = compare_values(got, flatten(py_matmul(a, b)), rtol=1e-5)
        data["cpu_matmul"] = cmp_
        if cmp_["ok"]:
            _sub(subs, "cpu_matmul", PASS, "32x32 CPU matmul matches the pure-Python reference "
                 "(max abs error %g)" % cmp_["max_abs_error"])
        else:
            _sub(subs, "cpu_matmul", FAIL, "32x32 CPU matmul differs from the pure-Python "
                 "reference: %d mismatches, max abs error %g" % (
                     cmp_["mismatches"], cmp_["max_abs_error"]))
    except Exception as e:  # noqa: BLE001
        _sub(subs, "cpu_matmul", FAIL, "CPU matmul raised %s: %s" % (type(e).__name__, e))

    # GPU part
    gpu_reason = None
    if exp_cuda is None and build_cuda is None:  # first: a CPU build needs no GPU advice
        gpu_reason = "CPU build of %s (the stack has no CUDA)" % fw
    elif not ctx.gpu_present:
        gpu_reason = ctx.no_gpu_reason or "no GPU"
    if gpu_reason is not None:
        data["device"] = "cpu"
        if ctx.require_gpu:
            _sub(subs, "device", FAIL, "%s (--require-gpu)" % gpu_reason)
        else:
            data["gpu_skipped"] = True
            data["gpu_reason"] = gpu_reason
            for name in GPU_SUBCHECKS:
                _sub(subs, name, SKIP, gpu_reason)
    else:
        _framework_gpu_part(ctx, adapter, fw, subs, data)

    failed = [s for s in subs if s["status"] == FAIL]
    if failed:
        return FAIL, "; ".join(s["reason"] for s in failed), data
    bits = ["%s %s" % (fw, version)]
    if data.get("cuda"):
        bits.append("CUDA %s" % data["cuda"])
    if data.get("cudnn"):
        bits.append("cuDNN %s" % data["cudnn"])
    if data.get("device") == "cpu":
        return PASS, "%s on the CPU; GPU sub-checks skipped: %s" % (
            ", ".join(bits), gpu_reason), data
    done = [s["name"] for s in subs if s["status"] == PASS]
    return PASS, "%s on %s: %s passed" % (", ".join(bits), data.get("device_name", "GPU"),
                                           ", ".join(done)), data


def _framework_gpu_part(ctx, adapter, fw, subs, data):
    try:
        fgpus = adapter.gpus()
    except Exception as e:  # noqa: BLE001
        data["device"] = None
        _sub(subs, "device", FAIL, "%s sees no GPU although the driver reports %d: %s" % (
            fw, len(ctx.gpus), e))
        return
    data["device"] = "gpu:0"
    data["device_name"] = fgpus[0].get("name") if fgpus else None
    data["framework_gpus"] = fgpus
    _sub(subs, "device", PASS, "%s sees %d GPU(s)" % (fw, len(fgpus)))

    expected_al = expected_arch_list(ctx.expect)
    if expected_al is not None:
        data["expected_arch_list"] = expected_al
    source = "the framework"
    try:
        al = adapter.arch_list()
    except NotReported as e:
        al = None
        if expected_al:
            al = expected_al
            source = "the stack's sass_archs/ptx_archs (%s)" % e
        else:
            _sub(subs, "arch", SKIP, str(e))
    except Exception as e:  # noqa: BLE001
        al = None
        _sub(subs, "arch", FAIL, "cannot read the arch list: %s: %s" % (type(e).__name__, e))
    if al is not None:
        data["arch_list"] = al
        data["arch_list_from"] = source
        problems, ok_bits = [], []
        for g in ctx.gpus:
            ok, via, why = arch_supported(g["cc"], al)
            (ok_bits if ok else problems).append(why)
        suffix = "" if source == "the framework" else " (per %s)" % source
        if problems:
            _sub(subs, "arch", FAIL, "; ".join(sorted(set(problems))) + suffix)
        elif source != "the framework":
            # The stack's own list only predicts that the GPU is covered; the framework did
            # not confirm it, so this is not counted as a pass (the GPU matmul is the evidence).
            _sub(subs, "arch", SKIP, "unverified: %s does not report its archs; the stack's list "
                 "covers the GPU: %s%s" % (fw, "; ".join(sorted(set(ok_bits))), suffix),
                 unverified=True)
        else:
            via_ptx = any("PTX" in b for b in ok_bits)
            _sub(subs, "arch", PASS, "; ".join(sorted(set(ok_bits))), via_ptx=via_ptx)

    for name, fn in (("gpu_matmul", lambda: adapter.gpu_matmul(512, MATMUL_RTOL)),
                     ("gpu_conv", lambda: adapter.gpu_conv(MATMUL_RTOL))):
        try:
            r = fn()
        except NotReported as e:
            _sub(subs, name, SKIP, str(e))
            continue
        except Exception as e:  # noqa: BLE001
            _sub(subs, name, FAIL, "%s on the GPU raised %s: %s" % (
                name, type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else ""))
            continue
        data[name] = r
        what = "512x512 fp32 matmul" if name == "gpu_matmul" else "conv2d"
        if r.get("ok"):
            _sub(subs, name, PASS, "%s GPU vs CPU: max rel error %.3g (rtol %g)" % (
                what, r["max_rel_error"], r["rtol"]))
        else:
            _sub(subs, name, FAIL, "%s GPU result differs from the CPU: %d of %d outside "
                 "rtol %g, max rel error %.3g" % (what, r["mismatches"], r["n"], r["rtol"],
                                                  r["max_rel_error"] or float("nan")))
