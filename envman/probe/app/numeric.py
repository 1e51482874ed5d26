"""Deterministic matrices, a pure-Python matmul reference and an allclose-style comparison."""

def det_matrix(rows, cols, seed):
    """A deterministic matrix of multiples of 1/8 in [-1, 1] (products and sums are exact)."""
    state = seed & 0x7FFFFFFF
    out = []
    for _ in range(rows):
        row = []
        for _ in range(cols):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            row.append(((state >> 16) % 17 - 8) / 8.0)
        out.append(row)
    return out


def py_matmul(a, b):
    """Pure-Python reference matrix product (lists of lists)."""
    bt = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]


def flatten(m):
    out = []
    for row in m:
        if isinstance(row, (list, tuple)):
            out.extend(flatten(row))
        else:
            out.append(row)
    return out


def compare_values(got, ref, rtol=1e-3, atol=None):
    """allclose-style comparison of two flat sequences.

    ``atol`` defaults to ``rtol * max|ref|`` (scale-aware, so accumulated rounding of a long
    dot product, TF32 included, passes while a wrong result does not). ``max_rel_error`` is
    the largest absolute error relative to the largest reference magnitude.
    """
    got = list(got)
    ref = list(ref)
    if len(got) != len(ref):
        return {"ok": False, "n": len(ref), "mismatches": abs(len(got) - len(ref)),
                "max_abs_error": None, "max_rel_error": None, "rtol": rtol, "atol": atol,
                "note": "length %d != %d" % (len(got), len(ref))}
    scale = 0.0
    for r in ref:
        scale = max(scale, abs(r))
    if scale == 0.0:
        scale = 1.0
    if atol is None:
        atol = rtol * scale
    max_abs = 0.0
    bad = 0
    for g, r in zip(got, ref):
        d = abs(g - r)
        if d != d:  # NaN
            bad += 1
            max_abs = float("inf")
            continue
        if d > atol + rtol * abs(r):
            bad += 1
        if d > max_abs:
            max_abs = d
    return {"ok": bad == 0, "n": len(ref), "mismatches": bad, "max_abs_error": max_abs,
            "max_rel_error": max_abs / scale, "rtol": rtol, "atol": atol}
