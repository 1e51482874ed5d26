"""GPU architectures (``sm_86``, ``compute_90``, ``8.6``) and CUDA's binary compatibility rules."""

import re


_ARCH_RE = re.compile(r"^(sm|compute|lto)?_?(\d+)(?:\.(\d+))?([a-z]?)$")


def parse_arch(text):
    """Parse a GPU arch: ``"sm_86"``, ``"compute_90"``, ``"sm_90a"``, ``"8.6"``, ``"sm_100"``.

    Returns ``(kind, major, minor, suffix)`` with kind ``"sm"`` (a cubin, SASS) or
    ``"compute"`` (PTX); a bare ``"8.6"`` counts as ``"sm"``. Raises ValueError.
    """
    t = str(text).strip().lower()
    m = _ARCH_RE.match(t)
    if not m:
        raise ValueError("not a GPU arch: %r" % (text,))
    kind, num, minor, suffix = m.group(1) or "sm", m.group(2), m.group(3), m.group(4)
    if kind == "lto":
        kind = "compute"
    if minor is not None:
        major = int(num)
        minor = int(minor)
    else:
        if len(num) < 2:
            raise ValueError("not a GPU arch: %r" % (text,))
        major, minor = int(num[:-1]), int(num[-1])
    return kind, major, minor, suffix


def arch_name(kind, major, minor, suffix=""):
    return "%s_%d%d%s" % (kind, major, minor, suffix)


def cc_to_sm(cc):
    """``"9.0"`` / ``(9, 0)`` -> ``"sm_90"``."""
    if isinstance(cc, (tuple, list)):
        return "sm_%d%d" % (int(cc[0]), int(cc[1]))
    _, major, minor, _ = parse_arch(cc)
    return "sm_%d%d" % (major, minor)


def arch_supported(cc, arch_list):
    """Can a build whose arch list is ``arch_list`` run kernels on a GPU of capability ``cc``?

    CUDA binary compatibility: an ``sm_X.y`` cubin runs on an ``X.z`` GPU for z >= y (same
    major); ``sm_X.ya`` (arch-specific) runs only on exactly X.y; ``sm_X.yf`` (family) like a
    plain cubin. ``compute_X.y`` PTX is JIT-compiled by the driver for any GPU >= X.y
    (``compute_X.ya`` only for exactly X.y).

    Returns ``(ok, via, reason)``: via is ``"sass"``, ``"ptx"`` or None.
    """
    if isinstance(cc, (tuple, list)):
        g_major, g_minor = int(cc[0]), int(cc[1])
    else:
        _, g_major, g_minor, _ = parse_arch(cc)
    gpu = "sm_%d%d" % (g_major, g_minor)
    listed = [str(a) for a in (arch_list or [])]
    parsed = []
    for a in listed:
        try:
            parsed.append((a, parse_arch(a)))
        except ValueError:
            continue
    rules = (  # every cubin first, then PTX: (kind, via, what it does, whether a plain one suits)
        ("sm", "sass", "cubin runs on", lambda major, minor: major == g_major and minor <= g_minor),
        ("compute", "ptx", "PTX is JIT-compiled for", lambda major, minor: (major, minor) <= (g_major, g_minor)),
    )
    for wanted, via, does, suits in rules:
        for text, (kind, major, minor, suffix) in parsed:
            if kind != wanted:
                continue
            ok = (major, minor) == (g_major, g_minor) if suffix == "a" else suits(major, minor)
            if ok:
                return True, via, "%s %s %s" % (text, does, gpu)
    return (
        False,
        None,
        "no kernel image for %s in this build: arch list is [%s]" % (gpu, ", ".join(listed)),
    )


def expected_arch_list(expect):
    """The stack's ``sass_archs`` / ``ptx_archs`` as an arch list (``sm_80``, ``compute_90``),
    or None when the stack names neither."""
    sass = expect.get("sass_archs")
    ptx = expect.get("ptx_archs")
    if sass is None and ptx is None:
        return None
    out = []
    for kind, archs in (("sm", sass or []), ("compute", ptx or [])):
        for a in archs:
            try:
                _, major, minor, suffix = parse_arch(a)
            except ValueError:
                continue
            out.append(arch_name(kind, major, minor, suffix))
    return out
