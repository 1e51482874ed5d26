"""A second ``envman build`` of an unchanged stack against a fully cached ``docker build`` of the
same context with the same builder, interleaved; prints the ratios.

    python benchmarks/bench_build.py STACK [--builder classic|buildkit|both] [-- BUILD OPTIONS...]
    python benchmarks/bench_build.py --standin [--json PATH]        # no registry: stand-in bases

For each builder (both by default): the first ``envman build --builder B`` (not timed) builds,
smoke-tests and promotes the stack; it may take minutes. ``envman render --builder B`` then
writes the very context that build used (a BuildKit context has cache mounts a classic build
refuses), and one ``docker build`` of it with the same builder (``DOCKER_BUILDKIT=0``; for
BuildKit the CLI envman's builder uses: ``docker buildx build --load``, else a docker CLI before 23
with ``DOCKER_BUILDKIT=1``) warms that command. Timed, interleaved, ``-n`` rounds:

* ``envman build STACK``: the result of the last identical no-op, served by the cache of
  ``envman.run.fastpath`` after checking that nothing it depends on changed (code, templates,
  matrices, config, wheelhouse, reports, the candidate and stable image ids);
* the same with ``ENVMAN_RUN_CACHE=0``: it renders the stack, finds its content-addressed
  candidate and the smoke report kept for it, and does no Docker build either;
* the same after its run-plan entry is removed (as after a change to anything the entry
  watches): the full path with the other caches (matrix parses, wheel facts) kept;
* ``docker build -t TAG CONTEXT``: every step a cache hit, the context sent each time.

Goals (issue 26): the no-op at most 0.05x the cached ``docker build``, the full path at most 1x.
``--compare PYTHON`` times the envman installed beside PYTHON (e.g. a checkout of an earlier
commit) in the same rounds, with its own state directory (its first build smoke-tests again);
both must render the same context (else each would re-promote the one stable tag in turn).
Options after ``--`` go to both ``envman build`` and ``envman render`` (network options such as
``--wheelhouse``, ``--ca-bundle``).

``--standin`` needs no registry: it makes the test suite's stand-in base images
(``tests/support/standin.py``: a debootstrapped Debian tagged with the name the Dockerfile uses),
downloads the CPU wheel of torch 2.13.0 into a wheelhouse, and builds ``torch-2.13.0-cpu`` from
``tests/data/standin-torch.toml`` with the host's CA bundle; the smoke test there is ``cpu-only``.

envman's state (logs, reports) goes to a temporary directory; the images stay on the engine
(the next run reuses them) except the benchmark's own ``docker build`` tag, which is removed.

``--builders`` compares the two builders side by side on the stand-in ``torch-2.13.0-cpu``
(same stack, same wheelhouse and CA bundle), through ``envman.images.build.build_stack``:

    python benchmarks/bench_build.py --builders

For the classic builder, then BuildKit:

1. cold build: ``--no-cache`` (every layer rebuilt); before BuildKit's, envman's own BuildKit
   cache mounts are removed (only those: ``cached mount /var/cache/envman/...`` and apt's lists
   under envman's cache ids), so it starts with empty caches too;
2. rebuild after a framework-layer change with warm caches: more pins in the framework layer
   (a random subset of torch's dependencies at the versions the cold build installed, the same
   subset for both builders, so each run makes a layer no cache holds yet), everything else
   unchanged; a run whose framework step came from a layer cache is refused, not reported;
3. rebuild after a project-requirements change: a project image on the result (``six``), then
   the same project with one more requirement (``idna``); the layers of the stack image must be
   the first layers of the new project image, unchanged;
4. image size against the floor: the base image plus the bytes of the files the build installed
   (``du -sbx /`` inside the image, less the wheelhouse copy the classic image carries, minus
   the same in the base), i.e. a squashed ideal;
5. wheel bytes in the layers: every layer's tar from ``docker save``, ``*.whl`` files outside
   ``/usr/share/python-wheels`` (Debian's python3-venv ships ensurepip's wheels there).

Targets (issue 13): (2) BuildKit <= 0.5x classic; (3) only the project layers rebuilt;
(4) BuildKit <= 1.02x the floor; (5) zero. Exit 0 when every target holds. The images built are
removed at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Report, envman_cmd, interleaved, json_option, other_envman  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STANDIN_MATRIX = ROOT / "tests" / "data" / "standin-torch.toml"
STANDIN_STACK = "torch-2.13.0-cpu"
BENCH_TAG = "envman-bench/docker-build:cached"
#: Goals (issue 26): a no-op build at most 0.05x a fully cached ``docker build`` of the same
#: context with the same builder; the uncached path no slower than that one ``docker build``.
GOAL_NOOP, GOAL_FULL = 0.05, 1.0


def run(cmd: list[str], env: dict[str, str], what: str) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{(p.stderr or p.stdout).strip()[-2000:]}")
    return p


def timed(cmd: list[str], env: dict[str, str], what: str) -> float:
    t = time.perf_counter()
    run(cmd, env, what)
    return time.perf_counter() - t


def standin_setup(tmp: Path) -> tuple[list[str], str, list[str]]:
    """(matrix options, stack, build options) for the stand-in build."""
    sys.path.insert(0, str(ROOT))
    from envman.engine.docker import Engine
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve
    from tests.support.standin import ensure_standin

    with Engine.connect() as engine:
        ensure_standin(resolve(load_matrix([STANDIN_MATRIX]), STANDIN_STACK).base_image, engine=engine)
    wheels = tmp / "wheelhouse"
    run([sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(wheels), "-q"],
        dict(os.environ), "pip download of the torch 2.13.0 CPU wheel")
    paths = ssl.get_default_verify_paths()
    ca = next((p for p in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile) if p and Path(p).is_file()), None)
    opts = ["--wheelhouse", str(wheels)] + (["--ca-bundle", ca] if ca else [])
    return ["--matrix", str(STANDIN_MATRIX)], STANDIN_STACK, opts


# --------------------------------------------------------------------------- --builders

ENVMAN_CACHE_MOUNT_RE = r"^cached mount (/var/cache/envman/|/var/lib/apt/lists from exec /bin/sh -c set -eu;.*Dir::Cache::Archives=/var/cache/envman/)"
DISTRO_WHEELS = "usr/share/python-wheels/"


def prune_envman_cache_mounts() -> int:
    """Remove envman's BuildKit cache mounts (and nothing else); how many went."""
    import re

    from envman.engine.docker import Engine

    with Engine.connect() as engine:
        api = engine._api  # noqa: SLF001 - the SDK has no call for the build cache's records
        records = api._result(api._get(api._url("/system/df"), params={"type": "build-cache"}), json=True)
        ids = [r["ID"] for r in records.get("BuildCache") or []
               if r.get("Type") == "exec.cachemount" and not r.get("InUse")
               and re.match(ENVMAN_CACHE_MOUNT_RE, r.get("Description") or "", re.S)]
        for i in ids:
            api._result(api._post(api._url("/build/prune"), params={"filters": json.dumps({"id": [i]})}), json=True)
    return len(ids)


def pinned_matrix(tmp: Path, pins: list[str]) -> Path:
    """The stand-in matrix with more pins in the CPU row's framework layer."""
    extra = "".join(f', "{p}"' for p in pins)
    text = STANDIN_MATRIX.read_text().replace('packages = ["torch==2.13.0"]', f'packages = ["torch==2.13.0"{extra}]', 1)
    path = tmp / "pinned.toml"
    path.write_text(text)
    return path


def image_du(engine, ref: str) -> int:
    res = engine.run(ref, ["du", "-sbx", "--exclude=/opt/envman/wheels", "/"], network="none", timeout=300, user="0")
    if not res.ok:
        raise SystemExit(f"du in {ref} failed: {res.stderr.strip()[-300:]}")
    return int(res.stdout.split()[0])


def wheel_bytes(ref: str) -> tuple[int, list[str]]:
    import io
    import tarfile

    saved = subprocess.run(["docker", "save", ref], check=True, capture_output=True).stdout
    total, names = 0, []
    with tarfile.open(fileobj=io.BytesIO(saved)) as image:
        manifest = json.loads(image.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=image.extractfile(layer)) as lt:  # type: ignore[arg-type]
                for m in lt:
                    if m.isfile() and m.name.endswith(".whl") and not m.name.startswith(DISTRO_WHEELS):
                        total += m.size
                        names.append(m.name)
    return total, names


def freeze(engine, ref: str) -> dict[str, str]:
    res = engine.run(ref, ["python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                     network="none", timeout=120)
    from packaging.utils import canonicalize_name

    pairs = (line.strip().split("==", 1) for line in res.stdout.splitlines() if "==" in line)
    return {str(canonicalize_name(name)): version for name, version in pairs}


def note_step(steps: dict[str, str], ev) -> None:
    """Remember whether the framework step (the RUN that installs the pins) ran or was cached."""
    if ev.kind == "step":
        steps["current"] = "framework" if "install" in ev.text and "torch==2.13.0" in ev.text else ""
        if steps["current"]:
            steps["framework"] = "ran"
    elif steps.get("current") == "framework" and ev.text.strip().endswith(("CACHED", "Using cache")):
        steps["framework"] = "cached"


def candidate(stack, options, kind: str) -> str:
    from envman.render.dockerfile import render_stack
    from envman.state import candidate_ref

    return candidate_ref(stack.name, render_stack(stack, options, builder=kind).render_hash)


def compare_builders(tmp: Path) -> int:
    from envman.images.build import build_stack
    from envman.engine.builder import ClassicBuilder, select_builder
    from envman.engine.docker import Engine
    from envman.matrix.load import load_matrix
    from envman.project.file import ProjectConfig
    from envman.project.image import build_project_image
    from envman.render.options import RenderOptions
    from envman.stack.resolve import resolve

    _, stack_name, opts = standin_setup(tmp)
    options = RenderOptions(wheelhouse=Path(opts[opts.index("--wheelhouse") + 1]),
                            ca_bundle=Path(opts[opts.index("--ca-bundle") + 1]) if "--ca-bundle" in opts else None)
    stack = resolve(load_matrix([STANDIN_MATRIX]), stack_name)
    deps = ("filelock", "fsspec", "jinja2", "markupsafe", "mpmath", "networkx", "sympy", "typing-extensions")
    subset = sorted(random.sample(deps, random.randint(1, len(deps))))
    print(f"framework-pin change: pins for {', '.join(subset)}", flush=True)
    built: list[str] = []
    rows: dict[str, dict[str, object]] = {}
    with Engine.connect() as engine:
        base_du = image_du(engine, stack.base_image)
        base_size = engine.inspect_image(stack.base_image).size
        try:
            for kind in ("classic", "buildkit"):
                builder = ClassicBuilder(engine) if kind == "classic" else select_builder(engine, "buildkit")
                row: dict[str, object] = {}
                if kind == "buildkit":
                    row["pruned"] = prune_envman_cache_mounts()
                mine = not engine.image_exists(candidate(stack, options, kind))
                t = time.perf_counter()
                cold = build_stack(engine, stack, options, nocache=True, builder=builder)
                row["cold"] = time.perf_counter() - t
                if mine:  # an image that was there before the benchmark stays
                    built.append(cold.ref)
                installed = freeze(engine, cold.ref)
                missing = [d for d in subset if d not in installed]
                if missing:
                    raise SystemExit(f"{cold.ref} lacks {missing}: cannot make the framework-pin change")
                changed = resolve(load_matrix([pinned_matrix(tmp, [f"{d}=={installed[d]}" for d in subset])]), stack_name)
                steps: dict[str, str] = {}
                t = time.perf_counter()
                warm = build_stack(engine, changed, options, builder=builder, on_event=lambda ev: note_step(steps, ev))
                row["pin"] = time.perf_counter() - t
                if steps.get("framework") == "cached":
                    raise SystemExit(f"{kind}: the framework step of the pin change came from a layer cache; rerun")
                built.append(warm.ref)
                if warm.cached:
                    raise SystemExit(f"{kind}: the pin change found an existing candidate {warm.ref}; remove it and rerun")
                project = ProjectConfig(name=f"bench-{kind}", root=tmp, file=tmp / "envman.toml", requirements="six==1.17.0\n")
                first = build_project_image(engine, project, stack_name, warm.image_id, builder=builder, nocache=True)
                built.append(first)
                more = ProjectConfig(name=f"bench-{kind}", root=tmp, file=tmp / "envman.toml",
                                     requirements="six==1.17.0\nidna==3.10\n")
                t = time.perf_counter()
                second = build_project_image(engine, more, stack_name, warm.image_id, builder=builder)
                row["project"] = time.perf_counter() - t
                built.append(second)
                stack_layers = list(engine.inspect_image(warm.image_id).layers)
                project_layers = list(engine.inspect_image(second).layers)
                row["project_only"] = project_layers[: len(stack_layers)] == stack_layers
                row["project_new_layers"] = len(project_layers) - len(stack_layers)
                size = engine.inspect_image(cold.ref).size
                floor = base_size + image_du(engine, cold.ref) - base_du
                row["size"], row["floor"] = size, floor
                row["wheel_bytes"], row["wheels"] = wheel_bytes(cold.ref)
                row["packages"] = freeze(engine, cold.ref)
                rows[kind] = row
        finally:
            for ref in reversed(built):
                subprocess.run(["docker", "rmi", ref], capture_output=True)
    return report_builders(rows)


def report_builders(rows: dict[str, dict[str, object]]) -> int:
    c, b = rows["classic"], rows["buildkit"]
    gb = 1e9
    print(f"stack {STANDIN_STACK} (stand-in base, torch 2.13.0 CPU wheel from a wheelhouse, host CA bundle)")
    print(f"BuildKit cache mounts of envman removed before its cold build: {b['pruned']}")
    print(f"{'':44} {'classic':>10} {'BuildKit':>10} {'ratio':>7}")
    for key, what in (("cold", "cold build (--no-cache) [s]"), ("pin", "framework-pin change, warm caches [s]"),
                      ("project", "project-requirements change [s]")):
        print(f"{what:44} {c[key]:10.1f} {b[key]:10.1f} {b[key] / c[key]:6.2f}x")  # type: ignore[operator]
    print(f"{'image size [GB]':44} {c['size'] / gb:10.2f} {b['size'] / gb:10.2f} {b['size'] / c['size']:6.2f}x")  # type: ignore[operator]
    print(f"{'floor: base + installed files [GB]':44} {c['floor'] / gb:10.2f} {b['floor'] / gb:10.2f}")  # type: ignore[operator]
    print(f"{'size / floor':44} {c['size'] / c['floor']:9.3f}x {b['size'] / b['floor']:9.3f}x")  # type: ignore[operator]
    print(f"{'wheel bytes in layers [MB]':44} {c['wheel_bytes'] / 1e6:10.1f} {b['wheel_bytes'] / 1e6:10.1f}")  # type: ignore[operator]
    print(f"{'project change: stack layers reused, new':44} {str(c['project_only']) + ', ' + str(c['project_new_layers']):>10} "
          f"{str(b['project_only']) + ', ' + str(b['project_new_layers']):>10}")
    same = c["packages"] == b["packages"]
    print(f"same installed packages in both images: {same}"
          + ("" if same else f" (differ: {sorted(set(c['packages'].items()) ^ set(b['packages'].items()))})"))  # type: ignore[union-attr]
    targets = {
        "framework-pin rebuild <= 0.5x classic": b["pin"] / c["pin"] <= 0.5,  # type: ignore[operator]
        "project change rebuilds only the project layers": bool(b["project_only"]),
        "BuildKit image <= 1.02x the floor": b["size"] / b["floor"] <= 1.02,  # type: ignore[operator]
        "zero wheel bytes in BuildKit's layers": b["wheel_bytes"] == 0,
    }
    for what, ok in targets.items():
        print(f"  {'met ' if ok else 'MISSED'} {what}")
    return 0 if all(targets.values()) else 1


def noop_vs_docker(report: Report, kind: str, matrix: list[str], stack: str, opts: list[str], n: int,
                   base_env: dict[str, str], tmp: Path, compare: str | None = None) -> None:
    """A no-op ``envman build --builder KIND`` (cached and full path) against a fully cached
    ``docker build`` of the context ``envman render --builder KIND`` writes, with that builder;
    with ``compare``, the envman beside that interpreter too."""
    env = dict(base_env, DOCKER_BUILDKIT="1" if kind == "buildkit" else "0")
    words = [*matrix, "build", stack, "--builder", kind, "--accept-cpu-only", "--json", *opts]
    build = [*envman_cmd(), *words]
    other = [*other_envman(compare), *words] if compare else None
    other_env = {**env, "ENVMAN_STATE_DIR": str(tmp / "state-compare")}
    images = set()
    for cmd, e, who in ((build, env, ""), *(((other, other_env, "--compare's "),) if other else ())):
        t0 = time.perf_counter()
        first = json.loads(run(cmd, e, f"the first {who}envman build ({kind})").stdout)[0]
        images.add(first["image"])
        print(f"first {who}envman build ({kind}): {time.perf_counter() - t0:.1f} s, {first['smoke']}, "
              f"{'cached' if first['cached'] else 'built'} {first['image']}", flush=True)
        if first["smoke"] == "fail":
            raise SystemExit(f"{stack}: the smoke test fails ({first['reason']}); a no-op build reruns it, pick a stack that passes")
    if len(images) > 1:  # each would promote its own candidate to the one stable tag, in turn: no no-op left
        raise SystemExit(f"--compare: the two envman versions render different contexts ({', '.join(sorted(images))}); "
                         "compare versions that render the same one")
    ctx = tmp / f"context-{kind}"
    run([*envman_cmd(), *matrix, "render", stack, "--builder", kind, "-o", str(ctx), *opts], env, "envman render")
    docker = ["docker", "build", "-q", "-t", BENCH_TAG, str(ctx)]
    if kind == "buildkit":  # the docker CLI envman's BuildKit builder uses: buildx, else DOCKER_BUILDKIT=1
        from envman.engine.builder import find_buildkit_cli

        cli = find_buildkit_cli()
        if cli is None:
            raise SystemExit("no docker CLI here builds with BuildKit (buildx, or a CLI before 23 with DOCKER_BUILDKIT=1)")
        docker = [cli.docker, "buildx", "build", "--load", *docker[2:]] if cli.buildx else [cli.docker, *docker[1:]]
    full_env = {**env, "ENVMAN_RUN_CACHE": "0"}

    def envman_build(e: dict[str, str], cmd: list[str] = build) -> float:
        t = time.perf_counter()
        again = json.loads(run(cmd, e, "envman build").stdout)[0]
        if not again["cached"]:
            raise SystemExit("the second envman build was not a no-op: " + json.dumps(again))
        return time.perf_counter() - t

    runs = Path(env["ENVMAN_STATE_DIR"]) / "cache" / "runs.json"

    def after_a_change() -> float:  # the run-plan cache misses, the other caches are kept
        runs.unlink(missing_ok=True)
        return envman_build(env)

    samples = {"docker": lambda: timed(docker, env, f"docker build ({kind})"),
               "cached": lambda: envman_build(env), "full": lambda: envman_build(full_env),
               "miss": after_a_change}
    if other:
        samples["other cached"] = lambda: envman_build(other_env, other)
        samples["other full"] = lambda: envman_build({**other_env, "ENVMAN_RUN_CACHE": "0"}, other)
    times = interleaved(samples, n)
    size = sum(f.stat().st_size for f in ctx.rglob("*") if f.is_file())
    report.ratio(f"no-op envman build / cached docker build, {kind}", times["cached"], times["docker"], GOAL_NOOP,
                 f"context {size / 1e6:.0f} MB")
    report.ratio(f"  the same, full path (ENVMAN_RUN_CACHE=0), {kind}", times["full"], times["docker"], GOAL_FULL)
    report.ratio(f"  the same, full path with the other caches kept (run-plan entry removed), {kind}", times["miss"],
                 times["docker"], GOAL_FULL)
    if other:
        report.ratio(f"  --compare's no-op envman build / cached docker build, {kind}", times["other cached"],
                     times["docker"], None)
        report.ratio(f"  --compare's full path, {kind}", times["other full"], times["docker"], None)


def main() -> int:
    argv, out = json_option(sys.argv[1:])
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stack", nargs="?", help="the stack to build (e.g. torch-2.4-cuda12)")
    ap.add_argument("--standin", action="store_true", help=f"build {STANDIN_STACK} on stand-in bases (no registry needed)")
    ap.add_argument("-n", type=int, default=9, help="rounds (default 9)")
    ap.add_argument("--builder", choices=("classic", "buildkit", "both"), default="both",
                    help="which builder to time (default both, each against docker build with the same builder)")
    ap.add_argument("--compare", metavar="PYTHON",
                    help="also time the envman installed beside PYTHON (e.g. an earlier checkout's venv), same rounds")
    ap.add_argument("--builders", action="store_true", help=f"classic vs BuildKit side by side on {STANDIN_STACK} (stand-in)")
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.builders:
        tmp = Path(tempfile.mkdtemp(prefix="envman-bench-builders-"))
        os.environ["ENVMAN_STATE_DIR"] = str(tmp / "state")
        try:
            return compare_builders(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if bool(args.stack) == bool(args.standin):
        ap.error("give a STACK or --standin")

    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-build-"))
    env = dict(os.environ, ENVMAN_STATE_DIR=str(tmp / "state"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envman has its .pyc files
    report = Report("build")
    try:
        matrix, stack, opts = standin_setup(tmp) if args.standin else ([], args.stack, [])
        opts += extra
        for kind in ("classic", "buildkit") if args.builder == "both" else (args.builder,):
            noop_vs_docker(report, kind, matrix, stack, opts, args.n, env, tmp, args.compare)
    finally:
        subprocess.run(["docker", "rmi", BENCH_TAG], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return report.save(out)


if __name__ == "__main__":
    sys.exit(main())
