"""``envman ci plan|run``, ``envman report`` and ``envman matrix check-tags``: validating the
matrix in CI and publishing what passes where."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from envman.errors import counted

from envman.cli._options import BuildFlags, CaBundle, option_group, platform_option
from envman.cli._out import console, emit_json, emit_line, emit_text, plain, tagged
from envman.stack.names import DEFAULT_PLATFORM

FrameworkOpt = Annotated[Optional[str], typer.Option("--framework", "-f", help="Only this framework: torch, tensorflow (tf), jax, onnxruntime.")]
RowsOpt = Annotated[Optional[list[str]], typer.Option("--rows", help="Only these rows (repeatable; a value may hold several names separated by spaces or commas, as a GitHub matrix passes them).")]
ChangedOpt = Annotated[Optional[str], typer.Option("--changed-since", help="Only rows whose render changed since this git ref (new rows count as changed).")]


PlatformOpt = Annotated[Optional[str], typer.Option("--platform", help="Only the rows with wheels for this platform, resolved and built for it: linux/amd64 (default) or linux/arm64.", show_default=False)]


def _selection(framework: str | None, rows: list[str] | None, changed_since: str | None, platform: str | None = None):
    """(matrix, builds, change set or None) for the selection options shared by plan and run."""
    from envman.ci.run import changed_rows, select_builds, split_names
    from envman.stack.names import DEFAULT_PLATFORM
    from envman.cli import get_matrix

    m = get_matrix()
    builds = select_builds(m, framework=framework, rows=split_names(rows) or None)
    builds = [b for b in builds if (platform or DEFAULT_PLATFORM) in b.platforms]
    changes = None
    if changed_since is not None:
        changes = changed_rows(m, changed_since, builds=builds)
        keep = set(changes.changed)
        builds = [b for b in builds if b.name in keep]
    return m, builds, changes


def plan(
    framework: FrameworkOpt = None,
    rows: RowsOpt = None,
    changed_since: ChangedOpt = None,
    platform: PlatformOpt = None,
    shards: Annotated[int, typer.Option("--shards", "-n", min=1, max=1000, help="Number of shards (CI jobs).")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="The full plan as JSON (the default).")] = False,
    github: Annotated[bool, typer.Option("--github", help="One line of strategy.matrix JSON for GitHub Actions.")] = False,
    fmt: Annotated[Optional[str], typer.Option("--format", hidden=True, help="Old spelling: --format json|github.")] = None,
) -> None:
    """Which rows to validate, as a job matrix: shards that keep rows of one base image together."""
    from envman.ci.run import github_matrix, plan_rows, plan_shards
    from envman.errors import UserError

    if fmt is not None and fmt not in ("github", "json"):
        raise UserError(f"--format {fmt!r}: expected github or json", where="--format", fix="use --json or --github")
    if as_json and (github or fmt == "github"):
        raise UserError("--json and --github contradict each other", where="envman ci plan", fix="give one of them")
    fmt = "github" if github or fmt == "github" else "json"
    plat = platform_option(platform)
    m, builds, changes = _selection(framework, rows, changed_since, plat)
    shard_list = plan_shards(plan_rows(m, builds, plat or DEFAULT_PLATFORM), shards)
    if fmt == "github":
        import json

        emit_line(json.dumps(github_matrix(shard_list), separators=(",", ":")))
        return
    emit_json({
        "shards": shards,
        "rows": len(builds),
        "framework": framework,
        "changed_since": changed_since,
        "platform": plat or DEFAULT_PLATFORM,
        "changed": None if changes is None else {"rows": changes.changed, "new": changes.new, "notes": changes.notes},
        "include": [
            {"shard": s.label, "index": s.index, "rows": " ".join(s.rows), "count": len(s.rows),
             "bases": s.groups, "weight": s.weight}
            for s in shard_list
        ],
    })


@option_group("flags", BuildFlags)
def run(
    shard: Annotated[Optional[str], typer.Option("--shard", help="Run shard I of N of the plan (same selection options as `ci plan`).")] = None,
    framework: FrameworkOpt = None,
    rows: RowsOpt = None,
    changed_since: ChangedOpt = None,
    platform: PlatformOpt = None,
    report: Annotated[Path, typer.Option("--report", help="Directory for results.json, junit.xml, summary.md, Dockerfiles and build logs.")] = Path("envman-report"),
    require_gpu: Annotated[bool, typer.Option("--require-gpu", help="CUDA rows must pass their smoke test on a GPU; with no GPU here they are not-buildable.")] = False,
    accept_cpu_only: Annotated[bool, typer.Option("--accept-cpu-only", help="A cpu-only smoke result (no GPU here) does not fail the run; such images are promoted.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    pull: Annotated[bool, typer.Option("--pull/--no-pull", help="Pull a newer base image first.")] = False,
    flags: BuildFlags = BuildFlags(),
    smoke_timeout: Annotated[float, typer.Option("--smoke-timeout", min=1, help="Seconds before a smoke test is killed.")] = 900,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results JSON on stdout.")] = False,
) -> None:
    """Validate, render, lint, build and smoke-test each selected row; write JUnit, JSON and Markdown. Exit 1 if a row failed."""
    from envman.ci.run import RunOptions, failed, run_rows
    from envman.engine.docker import Engine

    plat = platform_option(platform) or DEFAULT_PLATFORM
    m, builds, _ = _selection(framework, rows, changed_since, plat)
    label, builds = _shard(m, builds, shard, plat)
    if not builds:  # an empty shard, or nothing changed: nothing needs an engine
        from envman.ci.run import write_report

        write_report([], report, m)
        console().print("no rows to validate", highlight=False)
        return
    render_options = flags.render_options()
    builder_pref = flags.builder_preference()
    opts = RunOptions(render_options=render_options, registry_mirror=render_options.registry_mirror, require_gpu=require_gpu,
                      accept_cpu_only=accept_cpu_only, nocache=no_cache, pull=pull, shard=label,
                      smoke_timeout=smoke_timeout, platform=plat, base=flags.base_mode())
    err = console(stderr=True)
    err.print(f"envman ci run: {counted(len(builds), 'row')}" + (f" (shard {label})" if label else "") + f", report in {report}",
              highlight=False, soft_wrap=True)

    def on_step(row: str, step: str, sr) -> None:
        c = COLOURS.get(sr.status, "red")
        err.print(plain(f"{row} {step}: ") + tagged(sr.status, c, f" {sr.message[:160]}"), highlight=False, soft_wrap=True)

    with Engine.connect() as engine:
        from envman.images.stacks import choose_builder

        opts.builder = choose_builder(engine, builder_pref)
        results = run_rows(engine, m, builds, opts, report_dir=report, on_step=on_step)
    bad = failed(results)
    emit_json([r.to_json() for r in results]) if as_json else _print_results(results, bad, report)
    if bad:
        raise typer.Exit(1)


#: A step's or row's status -> its colour (red for the rest).
COLOURS = {"pass": "green", "cpu-only": "yellow", "not-buildable": "blue", "skip": "dim"}


def _shard(m, builds: list, shard: str | None, plat: str) -> tuple[str | None, list]:
    """(``I/N``, the rows of shard I of N, base-image groups adjacent), or every row without ``--shard``."""
    from envman.ci.run import parse_shard, plan_rows, plan_shards

    if shard is None:
        return None, builds
    i, n = parse_shard(shard)
    mine = plan_shards(plan_rows(m, builds, plat), n)[i - 1]
    order = {name: k for k, name in enumerate(mine.rows)}  # base-image groups adjacent
    return f"{i}/{n}", sorted((b for b in builds if b.name in order), key=lambda b: order[b.name])


def _print_results(results: list, bad: list, report: Path) -> None:
    c = console()
    for r in results:
        col = COLOURS.get(r.result, "red")
        c.print(tagged(r.result, col, f" {r.row}" + (f" ({r.name})" if r.name else "") + f": {r.reason}"),
                highlight=False, soft_wrap=True)
    c.print(f"{counted(len(results), 'row')}, {len(bad)} failed; report: {report / 'results.json'}, {report / 'junit.xml'}, "
            f"{report / 'summary.md'}", highlight=False, soft_wrap=True)


def report(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Report directories of `envman ci run` (or their results.json); several shards are merged.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write the support-matrix page (one self-contained HTML file).")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Write the Markdown summary ('-' for stdout).")] = None,
    merged: Annotated[Optional[Path], typer.Option("--merged", help="Also write the merged results.json here.")] = None,
    full_matrix: Annotated[bool, typer.Option("--full-matrix", help="Show every matrix row, tested or not.")] = False,
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "envman support matrix",
    as_json: Annotated[bool, typer.Option("--json", help="Print the merged results as JSON.")] = False,
) -> None:
    """Merge CI results into a support-matrix page (framework versions x CUDA versions) and a summary."""
    import json

    from envman.state import atomic_write
    from envman.ci.report import load_results, markdown_summary, render_html
    from envman.cli import get_matrix

    loaded = load_results(list(paths or [Path("envman-report")]))
    if merged:
        atomic_write(merged, json.dumps(loaded.results, indent=2) + "\n")
        merged.chmod(0o644)
    if html:
        page = render_html(loaded.results, matrix=get_matrix(), full_matrix=full_matrix, title=title,
                           sources=loaded.sources, notes=loaded.notes)
        atomic_write(html, page)
        html.chmod(0o644)
    md = markdown_summary(loaded.results, title=title, sources=loaded.sources, notes=loaded.notes, matrix=get_matrix())
    if markdown and str(markdown) != "-":
        atomic_write(markdown, md)
        markdown.chmod(0o644)
    if as_json:
        emit_json(loaded.results)
    elif str(markdown) == "-" or not (html or markdown or merged):
        emit_text(md)
    else:
        written = [str(p) for p in (html, markdown, merged) if p]
        console(stderr=True).print(f"{counted(len(loaded.results), 'row')} from {counted(len(loaded.sources), 'result')}: wrote {', '.join(written)}",
                                   highlight=False)


def check_tags(
    registry: Annotated[Optional[str], typer.Option("--registry", help="Ask this registry's v2 API (a mirror: https://HOST[:PORT]) instead of Docker Hub's API. Token: ENVMAN_REGISTRY_TOKEN, or ENVMAN_REGISTRY_USER/PASSWORD.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds per request.")] = 5.0,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Parallel requests.")] = 8,
    ca_bundle: CaBundle = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Ask the registry whether each base image tag still exists; flag rows whose tag disappeared.
    Exit 0: all agree; 1: a published tag disappeared; 3: the registry did not answer (nothing judged)."""
    from envman.matrix.tags import RegistryUnreachable, check_tags as _check, make_client
    from envman.cli import get_matrix

    client = make_client(registry, timeout=timeout, ca_bundle=str(ca_bundle) if ca_bundle else None)
    rep = _check(get_matrix(), client, jobs=jobs)
    if as_json:
        emit_json(rep.to_json())
        if not rep.reachable:
            emit_line(f"envman: error: {rep.message}", err=True)
        raise typer.Exit(rep.exit_code)
    if not rep.reachable:
        raise RegistryUnreachable(rep.message, fix="check the network or proxy (HTTPS_PROXY), or pass --registry "
                                  "with a mirror you can reach; no tag was judged")
    c = console()
    colours = {"ok": "green", "update": "yellow", "reappeared": "yellow", "disappeared": "red", "unknown": "magenta"}
    for t in rep.tags:
        if t.verdict == "ok":
            continue
        col = colours[t.verdict]
        used = f" — used by {', '.join(t.used_by[:4])}{' …' if len(t.used_by) > 4 else ''}" if t.used_by else ""
        c.print(tagged(t.verdict, col, f" {t.ref}: matrix says {t.matrix_status}, registry says {t.registry_status}"
                       + (f" ({t.detail})" if t.detail and t.verdict == "unknown" else "") + used), highlight=False)
    s = rep.summary
    c.print(f"{rep.registry}: {counted(len(rep.tags), 'tag')}: " + ", ".join(f"{n} {k}" for k, n in s.items() if n), highlight=False)
    raise typer.Exit(rep.exit_code)

