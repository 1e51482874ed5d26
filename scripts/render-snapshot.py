#!/usr/bin/env python3
"""Render every Dockerfile envman can write, one file per render, to check that a refactoring of
the render changes no byte. The goldens (scripts/regen-golden.py) show 15 chosen renders; this
renders all of them:

    every matrix row, with each of its Pythons, on each of its platforms
      x the classic builder and BuildKit
      x no options, a wheelhouse, --offline, a corporate network (registry and apt mirrors, CA
        bundle, indexes, framework index, python-build-standalone mirror), index credentials, a CA
        bundle alone, a wheelhouse with a wheel of every pin, --offline with it (and with a CA bundle)
      x --base auto (a base NVIDIA no longer serves rebuilt from its recipe) and --base pull
    plus project layers (apt packages, requirements, a lock) on each stack, and the notebook layer.

A render that is refused writes its error instead. Under the shipped matrix this is some 66,000
files and takes minutes; it uses the shipped matrix only, no user config and no render cache.

    python scripts/render-snapshot.py DIR                    # render into DIR (new or empty)
    python scripts/render-snapshot.py DIR --compare BEFORE   # then compare with an earlier DIR
    python scripts/render-snapshot.py DIR --stacks 'torch-2\.4'  # only the stacks whose name matches

Take BEFORE from a checkout of the earlier commit (git worktree add), with this script copied in.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "examples" / "golden" / "_inputs"
PROBE = b"# envman render snapshot: placeholder for probe.pyz\n"
PYTHON_MIRROR = "https://pbs.corp.example/releases/download"


def option_sets(every_pin: Path) -> dict[str, dict[str, Any]]:
    ca, wheels = str(INPUTS / "ca-bundle.pem"), str(INPUTS / "wheelhouse")
    return {
        "plain": {},
        "wheelhouse": {"wheelhouse": wheels},
        "offline": {"wheelhouse": wheels, "offline": True, "python_install_mirror": PYTHON_MIRROR},
        "corp": {
            "registry_mirror": "registry.corp.example:5000/dockerhub",
            "ca_bundle": ca,
            "pip_index": "https://pypi.corp.example/simple",
            "pip_extra_index": "https://wheels.corp.example/simple",
            "framework_index": "https://torch.corp.example/whl/cu102/torch_stable.html",
            "wheelhouse": wheels,
            "apt_mirror": "http://apt.corp.example/ubuntu",
            "python_install_mirror": PYTHON_MIRROR,
        },
        "corp-secret": {"ca_bundle": ca, "pip_index": "https://builder:s3cret@pypi.corp.example/simple",
                        "apt_mirror": "https://apt.corp.example/ubuntu"},
        "ca-only": {"ca_bundle": ca},
        "wheelhouse-all": {"wheelhouse": str(every_pin)},
        "offline-all": {"wheelhouse": str(every_pin), "offline": True, "python_install_mirror": PYTHON_MIRROR},
        "offline-all-ca": {"wheelhouse": str(every_pin), "offline": True, "ca_bundle": ca,
                           "python_install_mirror": PYTHON_MIRROR},
    }


def every_pin_wheelhouse(matrix: Any, where: Path) -> Path:
    """A py3-none-any wheel (no dependencies, a fixed date) of every pin of every row, and of the
    pip and uv wheels the Python layer may install."""
    pins = {p for b in matrix.builds for p in b.packages}
    pins |= {"pip==20.3.4", "pip==21.3.1", "pip==24.0", "pip==25.0"}
    from envman.render.imagepaths import UV_VERSION

    pins.add(f"uv=={UV_VERSION}")
    for pin in sorted(pins):
        m = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(.+)", pin)
        if m is None:
            raise SystemExit(f"not a NAME==VERSION pin: {pin}")
        name, version = m.groups()
        dist = re.sub(r"[-_.]+", "_", name).lower()
        with zipfile.ZipFile(where / f"{dist}-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr(zipfile.ZipInfo(f"{dist}-{version}.dist-info/METADATA", (1980, 1, 1, 0, 0, 0)),
                        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return where


def render_all(out: Path, only: str | None = None) -> int:
    os.environ.pop("ENVMAN_MATRIX", None)
    os.environ["ENVMAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="envman-snapshot-cache-")
    from envman.config import validate_network
    from envman.errors import EnvmanError
    from envman.matrix.load import load_matrix
    from envman.render.base import rebuilt_base
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from envman.render.layerplan import notebook_plan, project_plan
    from envman.render.imagepaths import BUILDER_KINDS
    from envman.render.template import render_dockerfile
    from envman.stack.resolve import resolve, resolve_row

    matrix = load_matrix()
    wheels = every_pin_wheelhouse(matrix, Path(tempfile.mkdtemp(prefix="envman-snapshot-wheels-")))
    sets = option_sets(wheels)
    count = 0

    def emit(name: str, text: str) -> None:
        nonlocal count
        # folders that differ between checkouts and runs: named the same in every snapshot
        text = text.replace(str(wheels), "<every-pin wheelhouse>").replace(str(INPUTS), "<golden inputs>")
        (out / name.replace("/", "_")).write_text(text, encoding="utf-8")
        count += 1

    stacks = {}
    for build in matrix.builds:
        for platform in build.platforms:
            try:
                row = resolve_row(matrix, build, platform)
            except EnvmanError as exc:
                emit(f"resolve.{build.name}.{platform}", f"ERROR {type(exc).__name__}: {exc}\n")
                continue
            stacks.setdefault(row.name, row)
            for python in build.python:
                try:
                    other = resolve(matrix, f"{build.name}-py{python}", platform)
                except EnvmanError:
                    continue
                stacks.setdefault(other.name, other)
    for stack in stacks.values():
        if only is not None and not re.search(only, stack.name):
            continue
        for set_name, network in sets.items():
            for builder in BUILDER_KINDS:
                for mode in ("auto", "pull"):
                    name = f"{stack.name}.{set_name}.{builder}.{mode}"
                    try:
                        options = RenderOptions(**validate_network(dict(network), where=lambda k: k))
                        base = rebuilt_base(matrix, stack, mode, registry_mirror=options.registry_mirror,
                                           apt_mirror=options.apt_mirror, ca_bundle=options.ca_bundle)
                        ctx = render_stack(stack, options, probe=PROBE, builder=builder, base=base)
                    except EnvmanError as exc:
                        emit(name, f"ERROR {type(exc).__name__}: {exc}\n")
                        continue
                    text = ctx.dockerfile + "".join(f"\n===== {f}\n{ctx.files[f].decode()}" for f in sorted(ctx.files)
                                                    if f.startswith("base/"))
                    emit(name, text + f"\n===== secrets {sorted(ctx.secrets)}, render hash {ctx.render_hash}\n")
        for apt in ((), ("libgl1", "git=1:2.34.1-1ubuntu1")):
            for requirements, locked in ((False, False), (True, False), (True, True)):
                plan = project_plan("demo", stack.name, "sha256:" + "ab" * 32, apt=apt, requirements=requirements,
                                    locked=locked, report_path="/tmp/envman-report.json", where="envman.toml")
                emit(f"project.{stack.name}.{len(apt)}{int(requirements)}{int(locked)}", render_dockerfile(plan))
    emit("notebook", render_dockerfile(notebook_plan("sha256:" + "cd" * 32, "jupyterlab>=4,<5")))
    return count


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(directory.iterdir()):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def compare(before: Path, after: Path) -> int:
    names_before = {p.name for p in before.iterdir()}
    names_after = {p.name for p in after.iterdir()}
    differ = sorted(n for n in names_before & names_after if (before / n).read_bytes() != (after / n).read_bytes())
    for n in differ[:20]:
        print(f"differs: {n}")
    for n in sorted(names_before ^ names_after)[:20]:
        print(f"only in {'BEFORE' if n in names_before else 'DIR'}: {n}")
    bad = len(differ) + len(names_before ^ names_after)
    print(f"{len(names_after)} renders compared with {len(names_before)}: "
          + ("all byte-identical" if not bad else f"{len(differ)} differ, {len(names_before ^ names_after)} unmatched"))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="where to write the renders (new or empty)")
    ap.add_argument("--compare", type=Path, metavar="BEFORE", help="a snapshot of an earlier commit to compare with")
    ap.add_argument("--stacks", metavar="REGEX", help="only the stacks whose name matches (a quicker check)")
    args = ap.parse_args(argv)
    if args.dir.exists() and any(args.dir.iterdir()):
        raise SystemExit(f"{args.dir} is not empty: give a new or empty folder")
    args.dir.mkdir(parents=True, exist_ok=True)
    count = render_all(args.dir, args.stacks)
    print(f"{count} renders in {args.dir}, sha256 over all {digest(args.dir)}")
    return compare(args.compare, args.dir) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
