#!/usr/bin/env python3
"""Write matrices/recipes.toml from NVIDIA's own Dockerfiles for the nvidia/cuda tags it deleted.

NVIDIA keeps the recipe of every end-of-life image in ``dist/end-of-life/<version>/<os>/<flavour>
[/cudnnN]/Dockerfile`` of its container-images/cuda repository (older ones in ``dist/<version>/``
before they moved). This script reads those files from a git clone of that repository (or of a
mirror of it), keeps the linux/amd64 branch of each, and writes one ``[[recipe]]`` per tag: the
parent (plain Ubuntu or the flavour below), NVIDIA's apt repositories, the exact package pins,
every direct download with its sha256, the ENV and LABEL blocks, the ``ld.so.conf.d`` entries,
symlinks and held packages. Anything in a RUN line it does not understand stops it with the
line, so nothing is silently dropped.

    scripts/extract-recipes.py CLONE [--out matrices/recipes.toml]

Every tag of ``matrices/images.toml`` that is not confirmed served (status ``deleted`` or
``unknown``) and for which NVIDIA's tree has a Dockerfile gets a recipe; the file records where
each came from (repository path and commit).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

REPO_URL = "https://gitlab.com/nvidia/container-images/cuda"
MIRROR = "https://github.com/pranavmishra90/nvidia-container-images-cuda"
#: Commits of the mirror to read, newest first: HEAD, the one before "EOL Ubuntu 18.04" moved the
#: 18.04 trees out, and the one before "end-of-life ubuntu16.04" moved the 16.04 trees.
COMMITS = (
    "60a1c892e6b996382e182b4654e0a3f31aeedbee",
    "bd3834af5d8527b771dd26c27240e2a0d2c938a1",
    "4a254e3ee92a110db2d225f09c3028022d34a463",
)
#: NVIDIA's CUDA repository key since its April 2022 rotation (the recipes before it name 7fa2af80).
KEY_FILE = "3bf863cc.pub"
KEY_FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
KEY_SOURCE = ("https://developer.nvidia.com/blog/updating-the-cuda-linux-gpg-repository-key/ (key rotation, "
              "April 2022); fingerprint as NVIDIA's own dist/11.4.3/ubuntu2004/base/Dockerfile checks it "
              "(NVIDIA_GPGKEY_FPR)")
#: What is known of where each plain Ubuntu release's packages are now (status, note). No release
#: here is known to have left the main archive, so no recipe rewrites the image's apt sources.
OS_ARCHIVES = {
    "ubuntu:16.04": ("unconfirmed", "Ubuntu 16.04 left standard support in 2021; that its packages are still "
                     "served by the archive its image names (not moved to old-releases.ubuntu.com) is "
                     "unconfirmed: if apt-get update answers 404 there, build with --apt-mirror "
                     "http://old-releases.ubuntu.com/ubuntu/"),
    "ubuntu:18.04": ("unconfirmed", "Ubuntu 18.04 left standard support in 2023; that its packages are still "
                     "served by the archive its image names is unconfirmed: if apt-get update answers 404 "
                     "there, build with --apt-mirror http://old-releases.ubuntu.com/ubuntu/"),
}
_TAG_RE = re.compile(r"^(?P<v>\d+\.\d+(?:\.\d+)?)-(?:(?P<cudnn>cudnn\d*)-)?(?P<fl>base|runtime|devel)-ubuntu(?P<os>\d+\.\d+)$")


def git_show(clone: Path, commit: str, path: str) -> str | None:
    r = subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def candidates(version: str, os_ver: str, flavour: str, cudnn: str | None) -> list[str]:
    """Paths NVIDIA used for this tag over time."""
    compact = os_ver.replace(".", "")
    oses = [f"ubuntu{compact}", f"ubuntu{os_ver.split('.')[0]}"]
    tail = f"{flavour}/{cudnn}" if cudnn else flavour
    out = []
    for top in ("dist/end-of-life", "dist"):
        for o in oses:
            out.append(f"{top}/{version}/{o}/{tail}/Dockerfile")
    return out


def find(clone: Path, tag: str) -> tuple[str, str, str] | None:
    m = _TAG_RE.match(tag)
    if not m:
        return None
    for commit in COMMITS:
        for path in candidates(m["v"], m["os"], m["fl"], m["cudnn"]):
            text = git_show(clone, commit, path)
            if text is not None:
                return commit, path, text
    return None


# --- a small reader of NVIDIA's Dockerfiles ------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    out, buf = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    if buf.strip():
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def subst(value: str, env: dict[str, str]) -> str:
    def rep(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in ("PATH", "LD_LIBRARY_PATH") and name not in env:
            return m.group(0)
        return env.get(name, "")
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", rep, value)


def parse_env(rest: str) -> list[tuple[str, str]]:
    if "=" in rest.split(" ", 1)[0]:
        return [tuple(w.split("=", 1)) for w in shlex.split(rest)]  # type: ignore[misc]
    key, _, value = rest.partition(" ")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return [(key, value)]


class Recipe:
    def __init__(self) -> None:
        self.parent_ref = ""
        self.env: list[tuple[str, str]] = []
        self.labels: list[tuple[str, str]] = []
        self.setup: list[str] = []
        self.packages: list[str] = []
        self.downloads: list[dict[str, str]] = []
        self.hold: list[str] = []
        self.symlinks: list[tuple[str, str]] = []
        self.ld: list[str] = []
        self.repos: list[str] = []
        self.old_key = ""
        self.omitted: list[str] = []


_IGNORED = (
    re.compile(r"^apt-get update$"),
    re.compile(r"^rm -(rf|f) .*"),
    re.compile(r"^apt-get purge --auto-?remove -y \S+( \S+)*$"),
    re.compile(r"^apt-key adv --export .*"),
    re.compile(r"^echo \"?\$?\{?NVIDIA_GPGKEY_SUM.*sha256sum -c --strict - .*"),
    re.compile(r"^NVIDIA_GPGKEY_(SUM|FPR)=\S+$"),
    re.compile(r"^echo \".*cudasign.pub\" \| sha256sum -c --strict -$"),
    re.compile(r"^rm cudasign.pub$"),
)


def read(text: str) -> Recipe:
    r = Recipe()
    env: dict[str, str] = {"TARGETARCH": "amd64"}
    stage = None
    pending_sum: dict[str, str] = {}
    for word, rest in instructions(text):
        if word == "FROM":
            parts = rest.split()
            stage = parts[-1] if len(parts) >= 3 and parts[-2].lower() == "as" else "final"
            if stage == "base":
                r.parent_ref = parts[0]
            continue
        if word == "ARG":
            continue
        if stage in ("base-ppc64le", "base-arm64"):
            continue
        if word == "ENV":
            for k, v in parse_env(rest):
                v = subst(v, env)
                env[k] = v
                r.env.append((k, v))
        elif word == "LABEL":
            for item in shlex.split(rest):
                k, _, v = item.partition("=")
                if not _:
                    continue
                r.labels.append((k, subst(v, env)))
            if rest.startswith("maintainer "):
                r.labels.append(("maintainer", rest.split(" ", 1)[1].strip().strip('"')))
        elif word == "RUN":
            run(r, subst(rest, env), pending_sum)
        elif word in ("COPY", "ENTRYPOINT"):
            r.omitted.append(f"{word} {rest}")
        else:
            raise SystemExit(f"unknown instruction {word} {rest}")
    return r


def run(r: Recipe, cmd: str, sums: dict[str, str]) -> None:
    cmd = " ".join(cmd.split())
    # NVIDIA's optional second repository: "if [ ! -z $FLAG ]; then echo ...; fi"
    cmd = re.sub(r"if \[ ! -z (\S*) \]; then (.*?); fi", lambda m: m.group(2) if m.group(1) != "]" else "", cmd)
    cmd = cmd.replace("if [ ! -z ]; then", "")
    for seg in [s.strip() for s in cmd.split("&&")]:
        if not seg:
            continue
        if any(p.fullmatch(seg) for p in _IGNORED):
            continue
        mm = re.fullmatch(r"apt-get install -y --no-install-recommends (.+)", seg)
        if mm:
            pkgs = mm.group(1).split()
            if not r.repos and not r.packages and set(pkgs) <= {"gnupg2", "curl", "ca-certificates", "apt-transport-https", "gnupg-curl", "wget", "gnupg"}:
                if pkgs != ["wget"]:
                    r.setup = pkgs
                continue
            r.packages += pkgs
            continue
        mm = re.fullmatch(r"curl -fsSL (\S+\.pub) \| apt-key add -", seg) or re.fullmatch(r"apt-key adv --fetch-keys (\S+)", seg)
        if mm:
            r.old_key = mm.group(1)
            continue
        mm = re.fullmatch(r"curl -fsSLO (\S+)/cuda-keyring_\S+\.deb", seg)
        if mm:  # NVIDIA's keyring package: its repository, signed by the same key
            r.repos.append(mm.group(1))
            r.old_key = seg.split()[-1]
            continue
        mm = re.fullmatch(r'echo "deb (\S+) /" > /etc/apt/sources.list.d/\S+', seg)
        if mm:
            r.repos.append(mm.group(1))
            continue
        mm = re.fullmatch(r"wget -q (\S+)", seg)
        if mm:
            r.downloads.append({"url": mm.group(1)})
            continue
        mm = re.fullmatch(r'echo "?(\S+) +(\S+?)"? \| sha256sum -c( --strict)? -', seg)
        if mm:
            for d in r.downloads:
                if d["url"].rsplit("/", 1)[-1] == mm.group(2):
                    d["sha256"] = mm.group(1)
                    d["file"] = mm.group(2)
                    break
            else:
                raise SystemExit(f"checksum for an unknown download: {seg}")
            continue
        if re.fullmatch(r"dpkg -i \S+", seg):
            continue
        mm = re.fullmatch(r"apt-mark hold (.+)", seg)
        if mm:
            r.hold += mm.group(1).split()
            continue
        mm = re.fullmatch(r"ln -s (\S+) (\S+)", seg)
        if mm:
            r.symlinks.append((mm.group(1), mm.group(2)))
            continue
        mm = re.fullmatch(r'echo "(\S+)" >> /etc/ld.so.conf.d/nvidia.conf', seg)
        if mm:
            r.ld.append(mm.group(1))
            continue
        raise SystemExit(f"cannot read this RUN segment: {seg!r}")


# --- output -----------------------------------------------------------------------------------


def q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def qlist(items) -> str:
    return "[" + ", ".join(q(i) for i in items) + "]"


def pairs(items) -> str:
    return "[" + ", ".join(f"[{q(a)}, {q(b)}]" for a, b in items) + "]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("clone", type=Path)
    ap.add_argument("--images", type=Path, default=Path("matrices/images.toml"))
    ap.add_argument("--out", type=Path, default=Path("matrices/recipes.toml"))
    args = ap.parse_args()
    images = tomllib.loads(args.images.read_text())["image"]
    eol = set(subprocess.run(["git", "-C", str(args.clone), "ls-tree", "--name-only", f"{COMMITS[0]}:dist/end-of-life"],
                             capture_output=True, text=True, check=True).stdout.split())

    def wanted(i: dict) -> bool:
        """Every Ubuntu tag not confirmed served, and every tag of a release NVIDIA moved to its
        end-of-life tree (served today, but with no promise: ``--base rebuild`` can rebuild it)."""
        m = _TAG_RE.match(i["tag"])
        return bool(m) and i["repository"] == "nvidia/cuda" and (i["status"] != "published" or m["v"] in eol)

    tags = sorted({i["tag"] for i in images if wanted(i)})
    out = [HEADER]
    missing = []
    for tag in tags:
        found = find(args.clone, tag)
        if found is None:
            missing.append(tag)
            continue
        commit, path, text = found
        r = read(text)
        parent = r.parent_ref
        m = re.fullmatch(r"\$\{IMAGE_NAME\}:(\S+)", parent)
        lines = ["[[recipe]]", f"tag = {q(tag)}"]
        lines.append(f"parent = {q(m.group(1))}" if m else f"from = {q(parent)}")
        lines.append('platform = "linux/amd64"')
        lines.append(f"path = {q(path)}")
        lines.append(f"commit = {q(commit)}")
        lines.append(f"source = [{q(f'{MIRROR}/blob/{commit}/{path}')}, {q(f'{REPO_URL} ({path} at mirror commit {commit[:8]})')}]")
        status, note = "confirmed", ""
        cudnn_tag = _TAG_RE.match(tag)["cudnn"]
        if cudnn_tag and not any(p.startswith("libcudnn") for p in r.packages):
            pkg = dict(r.env).get("NV_CUDNN_PACKAGE")
            if not pkg:
                raise SystemExit(f"{tag}: a cuDNN tag whose recipe names no cuDNN package")
            # NVIDIA's file at this commit sets NV_CUDNN_PACKAGE but its final stage never
            # installs it (the same release's other Ubuntu recipes do): install it as they do.
            r.packages.append(pkg)
            r.hold.append(pkg.split("=")[0])
            status = "partially confirmed"
            note = (f"NVIDIA's {path} at {commit[:8]} sets NV_CUDNN_PACKAGE={pkg} but installs nothing in its final "
                    "stage; envman installs and holds it, as NVIDIA's other Ubuntu recipes of the release do")
        lines.append(f"status = {q(status)}")
        if note:
            lines.append(f"note = {q(note)}")
        if not m:
            if not r.repos:
                raise SystemExit(f"{tag}: no apt repository in {path}")
            lines.append(f"repositories = {qlist(r.repos)}")
            lines.append(f"setup_packages = {qlist(r.setup)}")
            key_url = r.repos[0].rstrip("/") + "/" + KEY_FILE
            lines.append(f"key_url = {q(key_url)}")
            lines.append(f"key_fingerprint = {q(KEY_FINGERPRINT)}")
            if r.old_key and not r.old_key.endswith(KEY_FILE):
                lines.append(f"replaced_key = {q(r.old_key)}")
            archive = OS_ARCHIVES.get(parent)
            if archive:
                lines.append(f"os_archive_status = {q(archive[0])}")
                lines.append(f"note = {q(archive[1])}")
        lines.append(f"env = {pairs(r.env)}")
        if r.labels:
            lines.append(f"labels = {pairs(r.labels)}")
        lines.append(f"packages = {qlist([p for p in r.packages if p])}")
        if r.downloads:
            items = []
            for d in r.downloads:
                if "sha256" not in d:
                    raise SystemExit(f"{tag}: download without a checksum: {d['url']}")
                items.append(f"{{ url = {q(d['url'])}, sha256 = {q(d['sha256'])} }}")
            lines.append("downloads = [" + ", ".join(items) + "]")
        if r.hold:
            lines.append(f"hold = {qlist([h for h in r.hold if h])}")
        if r.symlinks:
            lines.append(f"symlinks = {pairs(r.symlinks)}")
        if r.ld:
            lines.append(f"ld_so_conf = {qlist(r.ld)}")
        if r.omitted:
            lines.append(f"omitted = {qlist(r.omitted)}")
        out.append("\n".join(lines) + "\n")
    args.out.write_text("\n".join(out))
    print(f"{len(tags) - len(missing)} recipes written to {args.out}; no Dockerfile in NVIDIA's tree for: "
          f"{', '.join(missing) or 'none'}", file=sys.stderr)
    return 0


HEADER = f'''schema = 1
kind = "recipes"

# How to rebuild the nvidia/cuda images NVIDIA no longer serves, from NVIDIA's own recipes: one
# [[recipe]] per tag and platform, read from NVIDIA's Dockerfiles (dist/end-of-life/...) by
# scripts/extract-recipes.py. Each names its parent (plain Ubuntu, or the flavour below it),
# NVIDIA's apt repositories, the exact package pins, every direct download with its sha256, and
# the ENV/LABEL blocks of the image. One change from the recipes as written: NVIDIA rotated its
# repository key in April 2022, so every recipe uses the current key ({KEY_FILE}), checked by
# fingerprint and installed as a signed-by keyring rather than through apt-key.
# Format: matrices/README.md ("Base recipes").
'''

if __name__ == "__main__":
    raise SystemExit(main())
