"""Version strings and CUDA's integer versions: parse, compare, format."""

import re


def version_parts(text):
    """``"2.7.1+cu128"`` -> (2, 7, 1); ``"v12.8"`` -> (12, 8); ``"2.8.0rc1"`` -> (2, 8, 0).

    The local suffix (``+...``) is dropped; parsing stops at the first component that does
    not start with a digit. Returns () for None or text without a leading number.
    """
    if text is None:
        return ()
    t = str(text).strip().split("+", 1)[0].strip()
    if t[:1] in ("v", "V"):
        t = t[1:]
    parts = []
    for comp in t.split("."):
        m = re.match(r"(\d+)", comp)
        if not m:
            break
        parts.append(int(m.group(1)))
        if m.group(1) != comp:
            break
    return tuple(parts)


def versions_match(found, expected, depth=None):
    """Compare versions on the components both give (at most ``depth``).

    ``versions_match("2.7.1+cu118", "2.7.1")`` is True, ``("12.4", "12.8", 2)`` False,
    ``("9.1.0", "9")`` True (only the major is known on one side). Either side unparsable:
    False.
    """
    f = version_parts(found)
    e = version_parts(expected)
    if not f or not e:
        return False
    n = min(len(f), len(e))
    if depth is not None:
        n = min(n, depth)
    return f[:n] == e[:n]


def short_version(text, depth=2):
    """``"12.8.1"`` -> ``"12.8"``; None -> None."""
    p = version_parts(text)
    if not p:
        return None
    return ".".join(str(x) for x in p[:depth])


def format_cuda_int(v):
    """CUDA's integer versions: 12040 -> "12.4", 13000 -> "13.0"."""
    if v is None:
        return None
    v = int(v)
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def format_cudnn_int(v):
    """cuDNN's integer versions: 8902 -> "8.9.2" (cuDNN <= 8), 90701 -> "9.7.1" (cuDNN >= 9)."""
    if v is None:
        return None
    v = int(v)
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)
