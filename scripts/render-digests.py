#!/usr/bin/env python3
"""The sha256 of every Dockerfile envman renders over the shipped matrix: each row, under a few
network option sets, with each builder (classic, BuildKit, and the base rebuilt from NVIDIA's
recipe where a row has one), and project and notebook images under the same options.
tests/unit/render/test_dockerfile_digests.py compares them with examples/golden/render-digests.json,
so a refactor of the render keeps every byte of every row's Dockerfile.

    python scripts/render-digests.py           # rewrite the file (after a deliberate change)
    python scripts/render-digests.py --check   # exit 1 and list the renders that differ

The renders use the shipped matrix only (ENVMAN_MATRIX is ignored), no user config, and the
golden renders' placeholder in place of the probe (scripts/regen-golden.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DIGEST_FILE = ROOT / "examples" / "golden" / "render-digests.json"
INPUTS = ROOT / "examples" / "golden" / "_inputs"
PROBE_PLACEHOLDER = b"# envman golden renders: placeholder for probe.pyz (see scripts/regen-golden.py)\n"

#: The network option sets each row is rendered under (the keys of config.toml's [network]).
OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "mirrors": {
        "registry_mirror": "registry.corp.example:5000/dockerhub",
        "pip_index": "https://pypi.corp.example/simple",
        "pip_extra_index": "https://wheels.corp.example/simple",
        "framework_index": "https://torch.corp.example/whl/torch_stable.html",
        "apt_mirror": "http://apt.corp.example/ubuntu",
        "python_install_mirror": "https://pbs.corp.example/releases/download",
    },
    "corporate": {
        "registry_mirror": "registry.corp.example:5000/dockerhub",
        "ca_bundle": str(INPUTS / "ca-bundle.pem"),
        "pip_index": "https://pypi.corp.example/simple",
        "wheelhouse": str(INPUTS / "wheelhouse"),
        "apt_mirror": "http://apt.corp.example/ubuntu",
    },
    # Index credentials: a build secret, so BuildKit only (the classic builder refuses them).
    "credentials": {
        "pip_index": "https://user:s3cret@pypi.corp.example/simple",
        "framework_index": "https://user:s3cret@torch.corp.example/whl/torch_stable.html",
    },
}
#: Option sets the classic builder cannot render.
BUILDKIT_ONLY = ("credentials",)

PROJECT_IMAGE_ID = "sha256:" + "ab" * 32


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def render_digests() -> dict[str, str]:
    """{render name: sha256 of its Dockerfile} (an unrenderable row: its one-line error)."""
    from envman.config import validate_network
    from envman.errors import EnvmanError
    from envman.matrix.load import load_matrix
    from envman.render.base import rebuilt_base
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from envman.render.layerplan import notebook_plan, project_plan
    from envman.render.template import render_dockerfile
    from envman.stack.resolve import resolve_row

    saved = os.environ.pop("ENVMAN_MATRIX", None)
    try:
        matrix = load_matrix()
    finally:
        if saved is not None:
            os.environ["ENVMAN_MATRIX"] = saved
    out: dict[str, str] = {}
    options = {name: RenderOptions(**validate_network(values, where=str)) for name, values in OPTION_SETS.items()}
    for build in matrix.builds:
        try:
            stack = resolve_row(matrix, build)
        except EnvmanError as exc:
            out[f"{build.name}"] = "unresolved: " + exc.line()
            continue
        for opt_name, opts in options.items():
            for builder in ("buildkit",) if opt_name in BUILDKIT_ONLY else ("classic", "buildkit"):
                key = f"{build.name} {opt_name} {builder}"
                try:
                    base = rebuilt_base(matrix, stack, registry_mirror=opts.registry_mirror,
                                       apt_mirror=opts.apt_mirror, ca_bundle=opts.ca_bundle)
                    out[key] = _digest(render_stack(stack, opts, probe=PROBE_PLACEHOLDER, builder=builder).dockerfile)
                    if base is not None:
                        ctx = render_stack(stack, opts, probe=PROBE_PLACEHOLDER, builder=builder, base=base)
                        out[key + " rebuilt-base"] = _digest(ctx.dockerfile)
                        out[key + " base"] = _digest(base.dockerfile)
                except EnvmanError as exc:
                    out[key] = "unrenderable: " + exc.line().replace(str(ROOT), ".")
    for opt_name, opts in options.items():
        for apt in ((), ("git", "libgl1")):
            for requirements, locked in ((False, False), (True, False), (True, True)):
                key = f"project {opt_name} apt={len(apt)} requirements={requirements} locked={locked}"
                plan = project_plan("demo", "torch-2.4.1-cuda12.4-py3.11", PROJECT_IMAGE_ID, apt=apt,
                                    requirements=requirements, locked=locked, report_path="/tmp/envman-report.json",
                                    where="envman.toml", network=opts)
                out[key] = _digest(render_dockerfile(plan))
        out[f"notebook {opt_name}"] = _digest(render_dockerfile(notebook_plan(PROJECT_IMAGE_ID, "jupyterlab==4.2.5", opts)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = ap.parse_args(argv)
    rendered = render_digests()
    if args.check:
        old = json.loads(DIGEST_FILE.read_text(encoding="utf-8"))
        bad = sorted(k for k in old.keys() | rendered.keys() if old.get(k) != rendered.get(k))
        for k in bad:
            print(f"differs: {k}")
        print(f"{len(rendered)} renders, {len(bad)} differ")
        return 1 if bad else 0
    DIGEST_FILE.write_text(json.dumps(rendered, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(rendered)} render digests to {DIGEST_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
