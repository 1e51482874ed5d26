#!/usr/bin/env python3
"""Regenerate the golden Dockerfiles: examples/golden/<stack name>/Dockerfile (classic builder) and
examples/golden/<stack name>.buildkit/Dockerfile (BuildKit, for specs with builder = "buildkit"), and
<dir>/base/Dockerfile beside it where the stack's base is rebuilt from NVIDIA's recipe (`--base auto`).

    python scripts/regen-golden.py           # rewrite them (after a deliberate change)
    python scripts/regen-golden.py --check   # exit 1 and list the differences (what CI's tests do)

Which stacks and which network options: examples/golden/goldens.toml. The renders use the
shipped matrix only (ENVMAN_MATRIX is ignored), no user config, and a fixed placeholder in place
of the probe (probe.pyz), so a golden changes only when rendering (templates, envman/render/dockerfile.py),
the shipped rows it shows, or envman's version change. Because of that placeholder, the
render-hash label in a golden differs from the one a real render of the same stack carries.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = ROOT / "examples" / "golden"
SPEC_FILE = GOLDEN_DIR / "goldens.toml"
PROBE_PLACEHOLDER = b"# envman golden renders: placeholder for probe.pyz (see scripts/regen-golden.py)\n"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Golden:
    query: str
    network: dict[str, Any] = field(default_factory=dict)
    builder: str = "classic"


def load_specs(path: Path = SPEC_FILE) -> list[Golden]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    specs = []
    for i, row in enumerate(data.get("golden", [])):
        if not isinstance(row.get("query"), str):
            raise SystemExit(f"{path}: golden[{i}].query must be a stack name")
        net = dict(row.get("network", {}))
        for key in ("ca_bundle", "wheelhouse"):
            if key in net:
                net[key] = str((path.parent / net[key]).resolve())
        builder = row.get("builder", "classic")
        if builder not in ("classic", "buildkit"):
            raise SystemExit(f"{path}: golden[{i}].builder must be classic or buildkit")
        specs.append(Golden(row["query"], net, builder))
    return specs


def render_goldens(specs: list[Golden] | None = None) -> dict[str, str]:
    """{golden file: text} for every golden spec: ``<stack>/Dockerfile`` for the classic builder,
    ``<stack>.buildkit/Dockerfile`` for BuildKit, and ``<dir>/base/Dockerfile`` where the base is
    rebuilt from NVIDIA's recipe."""
    from envman.config import validate_network
    from envman.matrix.load import load_matrix
    from envman.render.base import rebuilt_base
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from envman.stack.resolve import resolve

    saved = os.environ.pop("ENVMAN_MATRIX", None)
    try:
        matrix = load_matrix()
    finally:
        if saved is not None:
            os.environ["ENVMAN_MATRIX"] = saved
    out: dict[str, str] = {}
    for spec in specs if specs is not None else load_specs():
        options = RenderOptions(**validate_network(spec.network, where=lambda k, q=spec.query: f"goldens.toml {q}: {k}"))
        stack = resolve(matrix, spec.query)
        name = stack.name if spec.builder == "classic" else f"{stack.name}.{spec.builder}"
        if f"{name}/Dockerfile" in out:
            raise SystemExit(f"two goldens render {name}: give each its own stack or builder")
        base = rebuilt_base(matrix, stack, registry_mirror=options.registry_mirror, apt_mirror=options.apt_mirror,
                           ca_bundle=options.ca_bundle)
        ctx = render_stack(stack, options, probe=PROBE_PLACEHOLDER, builder=spec.builder, base=base)
        out[f"{name}/Dockerfile"] = ctx.dockerfile
        if base is not None:
            out[f"{name}/base/Dockerfile"] = base.dockerfile
    return out


def golden_dirs() -> list[Path]:
    return sorted(p for p in GOLDEN_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = ap.parse_args(argv)
    rendered = render_goldens()
    dirs = {name.split("/")[0] for name in rendered}
    stale = [d for d in golden_dirs() if d.name not in dirs]
    stale_files = [p for d in golden_dirs() for p in d.rglob("Dockerfile")
                   if p.relative_to(GOLDEN_DIR).as_posix() not in rendered]
    if args.check:
        bad = 0
        for name, text in rendered.items():
            path = GOLDEN_DIR / name
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            if old != text:
                bad += 1
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path), "rendered"))
        for d in [*stale, *stale_files]:
            bad += 1
            print(f"stale golden (no spec renders it): {d}")
        print(f"{len(rendered)} goldens, {bad} differ" + (": run python scripts/regen-golden.py" if bad else ""))
        return 1 if bad else 0
    for d in stale:
        shutil.rmtree(d)
    for f in stale_files:
        f.unlink(missing_ok=True)
    for name, text in rendered.items():
        path = GOLDEN_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(rendered)} goldens under {GOLDEN_DIR.relative_to(ROOT)}" + (f", removed {len(stale)} stale" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
