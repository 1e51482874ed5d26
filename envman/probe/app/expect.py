"""The expectations file (the resolved stack, ``/opt/envman/stack.json`` in an image)."""

import json
import os

from .contract import FRAMEWORKS


class UsageError(Exception):
    """Bad command line or expectations file (exit 2)."""

def load_expect(path):
    """The expectations file: ``({...}, found)``. ``path`` None means none were asked for
    (``--no-expect``); a named file that is missing is bad usage, never "no expectations"."""
    if path is None:
        return {}, False
    if not os.path.isfile(path):
        raise UsageError("--expect %s: no such file: the stack's expectations are missing (an image "
                         "not built by envman, or the file was not mounted); use --no-expect to run "
                         "without them" % path)
    try:
        with open(path) as f:
            doc = json.load(f)
    except (IOError, OSError, ValueError) as e:
        raise UsageError("--expect %s: cannot read JSON: %s" % (path, e))
    if not isinstance(doc, dict):
        raise UsageError("--expect %s: expected a JSON object, got %s" % (path, type(doc).__name__))
    fw = doc.get("framework")
    if fw is not None and fw not in FRAMEWORKS:
        raise UsageError("--expect %s: framework must be one of %s or null, not %r" % (
            path, ", ".join(FRAMEWORKS), fw))
    for key in ("framework_version", "cuda", "cudnn"):
        v = doc.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise UsageError("--expect %s: %s must be a version string or null" % (path, key))
            doc[key] = str(v)
    for key in ("sass_archs", "ptx_archs"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(a, str) for a in v)):
            raise UsageError("--expect %s: %s must be a list of strings" % (path, key))
    ds = doc.get("datasheet")
    if ds is not None and not isinstance(ds, dict):
        raise UsageError("--expect %s: datasheet must be an object" % path)
    return doc, True
