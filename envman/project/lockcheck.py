
import re
import sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

COMMENT = re.compile(r"(^|\s+)#.*$")

def logical_lines(path):
    # as pip reads a requirements file: a line ending in a backslash is joined to the next (the
    # backslash dropped), unless it is a comment; then comments are stripped
    pending = []
    with open(path, encoding="utf-8") as f:
        raw = f.read().splitlines()
    for line in raw:
        comment = COMMENT.match(line) is not None
        if line.endswith("\\") and not comment:
            pending.append(line.strip("\\"))
            continue
        if comment:
            line = " " + line
        yield COMMENT.sub("", "".join(pending + [line])).strip()
        pending = []
    if pending:
        yield COMMENT.sub("", "".join(pending)).strip()

def lines(path):
    # the requirement of each line: the words (split on spaces) before the first option
    for s in logical_lines(path):
        words = []
        for w in s.split(" "):
            if w.startswith("-"):
                break
            words.append(w)
        req = " ".join(words).strip()
        if req:
            yield req

locked = {canonicalize_name(s.split("==", 1)[0]) for s in lines(sys.argv[2])}
todo = [Requirement(s) for s in lines(sys.argv[1])]
todo = [r for r in todo if r.marker is None or r.marker.evaluate()]
seen = set()
outside = []
while todo:
    r = todo.pop()
    key = (canonicalize_name(r.name), tuple(sorted(r.extras)))
    if r.specifier:
        try:
            have = metadata.version(r.name)
        except metadata.PackageNotFoundError:
            have = None
        if have is not None and not r.specifier.contains(have, prereleases=True):
            outside.append("%s %s (installed %s)" % (canonicalize_name(r.name), r.specifier, have))
    if key in seen:
        continue
    seen.add(key)
    try:
        dist = metadata.distribution(r.name)
    except metadata.PackageNotFoundError:
        continue
    for dep in dist.requires or []:
        q = Requirement(dep)
        if q.marker is None or any(q.marker.evaluate({"extra": e}) for e in (set(r.extras) or {""})):
            todo.append(q)
extra = sorted(locked - {n for n, _ in seen})
if extra:
    sys.exit("envman: envman.lock names packages the requirements do not need: " + ", ".join(extra)
             + " (refresh it: envman lock --upgrade)")
if outside:
    sys.exit("envman: envman.lock installs versions the requirements exclude: " + ", ".join(sorted(set(outside)))
             + " (refresh it: envman lock --upgrade)")
