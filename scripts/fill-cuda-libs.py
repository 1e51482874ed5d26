#!/usr/bin/env python3
"""Write ``cuda_libs`` (and ``cuda_libs_source``) into the rows of matrices/*.toml whose framework
wheel comes from PyPI: the CUDA libraries its Linux x86_64 wheel pins exactly, read from that
wheel's METADATA (PEP 658 file or HTTP range requests, as ``envman matrix update`` reads it).

    python scripts/fill-cuda-libs.py [--index https://pypi.org/simple] [FILE ...]

With them, ``cuda_libs_sha256``: the sha256 of every Linux x86_64 wheel of each pin, from the
index's project pages (a ``[build.cuda_libs_sha256]`` sub-table at the end of the row). A row that
installs from another index (``index_url``, ``find_links``, ``extra_index_url``) is left alone: its
wheels are on that index. A row with ``cuda_libs`` but no hashes gets the hashes. Rows are edited
in place: two lines after the row's ``packages`` line, the sub-table at the row's end.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envman.matrix.index import Http, fetch_project, read_wheel_metadata
from envman.matrix.update import pin_hashes
from envman.matrix.wheels import KNOWN_PYTHONS, cuda_library_lines, requirement_extras, wheel_tags

ROOT = Path(__file__).resolve().parent.parent


def _wheel(files: list, name: str, version: str, pythons: list[str]):  # type: ignore[type-arg]
    """A Linux x86_64 (or pure) wheel of ``name`` ``version``, one of ``pythons`` first."""
    best = None
    for f in files:
        if not f.filename.endswith(".whl") or f.yanked:
            continue
        tags = wheel_tags(f.filename)
        if tags is None or canonicalize_name(tags.name) != name or str(tags.version) != version:
            continue
        if not (tags.any_platform or "linux/amd64" in tags.platforms):
            continue
        rank = 0 if any(p in tags.pythons for p in pythons) else 1
        if best is None or rank < best[0]:
            best = (rank, f)
    return best[1] if best else None


def _with_hashes(block: str, lines, files_of) -> str:  # type: ignore[no-untyped-def]
    """``block`` (one [[build]] row) with a [build.cuda_libs_sha256] sub-table at its end: the
    sha256 of every Linux x86_64 wheel of each pin (nothing added when a pin has none)."""
    hashes = pin_hashes(lines, files_of)
    if not hashes:
        return block
    body = block.rstrip("\n")
    table = "\n".join(f"{name} = {json.dumps(hs)}" for name, hs in hashes.items())
    return f"{body}\n\n[build.cuda_libs_sha256]\n{table}\n" + "\n" * (len(block) - len(body) - 1 if block.endswith("\n\n") else 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="https://pypi.org/simple")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    http = Http()
    pages: dict[str, list] = {}  # type: ignore[type-arg]

    def files_of(name: str) -> list:  # type: ignore[type-arg]
        if name not in pages:
            pages[name] = list(fetch_project(http, args.index, name).files)
        return pages[name]
    for path in args.files or sorted((ROOT / "matrices").glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        if doc.get("kind") != "framework":
            continue
        text = path.read_text()
        blocks = re.split(r"(?m)^(?=\[\[build\]\]\s*$)", text)
        rows = doc.get("build", [])
        if len(blocks) != len(rows) + 1:
            print(f"{path}: rows and [[build]] headers differ; skipped", file=sys.stderr)
            continue
        changed = 0
        for i, row in enumerate(rows):
            if (not row.get("cuda") or row.get("cuda_libs_sha256") or row.get("index_url") or row.get("find_links")
                    or row.get("extra_index_url")):
                continue
            if row.get("cuda_libs"):
                blocks[i + 1] = _with_hashes(blocks[i + 1], row["cuda_libs"], files_of)
                changed += 1
                continue
            first = Requirement(row["packages"][0])
            version = str(next(iter(first.specifier)).version)
            name = canonicalize_name(first.name)
            f = _wheel(files_of(name), name, version, row.get("python", []))
            if f is None:
                print(f"{path.name}: {name} {version}: no Linux x86_64 wheel on the index", file=sys.stderr)
                continue
            md = read_wheel_metadata(http, f)
            lines = cuda_library_lines(md.requires_dist, requirement_extras(row["packages"]), KNOWN_PYTHONS)
            if not lines:
                continue
            block = blocks[i + 1]
            m = re.search(r"(?m)^packages = .*\n", block)
            if m is None:
                continue
            add = f"cuda_libs = {json.dumps(list(lines))}\ncuda_libs_source = {json.dumps([md.url])}\n"
            blocks[i + 1] = _with_hashes(block[:m.end()] + add + block[m.end():], lines, files_of)
            changed += 1
            print(f"{path.name}: {name} {version} {row['variant']}: {len(lines)} pins", file=sys.stderr)
        if changed:
            path.write_text("".join(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
