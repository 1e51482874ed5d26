"""``envman submit``, ``envman jobs``, ``envman logs``: projects as Slurm batch jobs (see envman.cluster.slurm)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from envman.cli.complete import complete_project
from envman.cli._help import Command

from envman.cli._out import console, emit_json, emit_line, emit_text, local_time, plain

_META_CMD = "envman.submit.command"


class SubmitCommand(Command):
    """The words after the first ``--`` are the job's command, not options or arguments."""

    def parse_args(self, ctx, args):
        from envman.cli._words import keep_command_words

        return super().parse_args(ctx, keep_command_words(ctx, args, _META_CMD))


def count_option(value: str | None, where: str, minimum: int) -> int | None:
    """A whole-number option (``--cpus 4``): ASCII digits, at least ``minimum``; ``None`` stays ``None``."""
    from envman.errors import UserError
    from envman.cluster.slurm import check_count

    if value is None:
        return None
    v = value.strip()
    if not (v.isascii() and v.isdigit()) or v != value:
        raise UserError(f"{value!r} is not a whole number", where=where, fix=f"give a count of at least {minimum}")
    return check_count(int(v), where=where, minimum=minimum)


def submit(
    ctx: typer.Context,
    project: Annotated[Optional[str], typer.Argument(help="Registered project name or path (default: the project of the current directory).", autocompletion=complete_project)] = None,
    partition: Annotated[Optional[str], typer.Option("--partition", "-p", help="Slurm partition (default: \\[slurm] partition in the user config, else the cluster's default).")] = None,
    gpus: Annotated[Optional[str], typer.Option("--gpus", help="GPUs to allocate; the container gets exactly those (default: the project's count, 1 for \"all\", 0 for a CPU stack).")] = None,
    time_limit: Annotated[Optional[str], typer.Option("--time", "-t", help="Time limit: minutes, H:MM:SS, D-HH[:MM[:SS]] or UNLIMITED.")] = None,
    cpus: Annotated[Optional[str], typer.Option("--cpus", "-c", help="CPUs for the job (--cpus-per-task).")] = None,
    mem: Annotated[Optional[str], typer.Option("--mem", help="Memory per node, e.g. 16G (K, M, G, T; default unit M).")] = None,
    runtime: Annotated[Optional[str], typer.Option("--runtime", help="docker, podman, pyxis, apptainer or charliecloud (default: \\[slurm] runtime in the user config, else docker).")] = None,
    image: Annotated[Optional[str], typer.Option("--image", help="For pyxis/apptainer/charliecloud: the image to run (default: the promoted image from the node's Docker engine).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the batch script instead of submitting it.")] = False,
) -> None:
    """Submit a project's command as a Slurm batch job: envman submit [PROJECT] [OPTIONS] [-- CMD ARGS...]."""
    from envman.cluster.slurm import (
        Resources, SubmitRequest, build_spec, check_mem, check_partition, check_runtime, check_time, render_script,
        submit as do_submit,
    )
    from envman.cli import matrix_source

    n_gpus = count_option(gpus, "--gpus", 0)
    res = Resources(
        partition=check_partition(partition) if partition is not None else None,
        gpus=-1 if n_gpus is None else n_gpus,
        time=check_time(time_limit) if time_limit is not None else None,
        cpus=count_option(cpus, "--cpus", 1),
        mem=check_mem(mem) if mem is not None else None,
    )
    req = SubmitRequest(project, res, runtime=check_runtime(runtime) if runtime is not None else None, image=image,
                        command=tuple(ctx.meta.get(_META_CMD, [])), matrix_files=matrix_source().extra)
    spec = build_spec(req)
    if dry_run:
        emit_text(render_script(spec))
        return
    rec = do_submit(spec)
    gpu_text = f"{rec.gpus} GPU{'s' if rec.gpus != 1 else ''}" if rec.gpus else "no GPU"
    console().print(f"submitted job {rec.id}: project {rec.project} on {rec.stack} ({rec.runtime}, {gpu_text})\n"
                    f"log: {rec.log}\nfollow it: envman logs {rec.id}; all jobs: envman jobs",
                    markup=False, highlight=False, soft_wrap=True)


def jobs(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    limit: Annotated[str, typer.Option("--limit", "-n", help="Show the newest N jobs.")] = "20",
) -> None:
    """Your envman Slurm jobs: id, project, runtime, GPUs, state and exit code (squeue, then sacct; --json adds the stack)."""

    from envman.cluster.slurm import jobs as list_jobs

    rows = list_jobs(limit=count_option(limit, "--limit", 1))
    if as_json:
        emit_json([{**r.to_json(), "state": s.state, "exit_code": s.exit_code, "signal": s.signal,
                    "reason": s.reason} for r, s in rows])
        return
    if not rows:
        console().print("no envman jobs (submit one: envman submit PROJECT -- CMD)")
        return
    from rich.table import Table

    t = Table(box=None, pad_edge=False)
    for col in ("job", "project", "runtime", "gpus", "state", "exit", "submitted"):
        t.add_column(col, no_wrap=True)
    for r, s in rows:
        code = "-" if s.exit_code is None else str(s.exit_code)
        if s.signal:
            code += f" (signal {s.signal})"
        state = s.state + (f" ({s.reason})" if s.reason and s.state == "PENDING" else "")
        when = local_time(r.submitted, "%m-%d %H:%M:%S")
        t.add_row(*map(plain, (r.id, r.project, r.runtime, str(r.gpus), state, code, when)))
    console().print(t, markup=False)


def logs(
    job: Annotated[str, typer.Argument(help="Job id, as envman jobs lists it.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing as the log grows, until the job ends.")] = False,
) -> None:
    """Print the log of one of your envman jobs."""
    from envman.cluster.slurm import follow_log, read_log

    if follow:
        state = follow_log(job, emit_text)
        code = "" if state.exit_code is None else f", exit code {state.exit_code}"
        emit_line(f"envman: job {state.id} {state.state}{code}", err=True)
        return
    rec, text = read_log(job)
    if not text:
        from envman.errors import printable

        emit_line(printable(f"envman: job {rec.id} has written nothing yet ({rec.log})"), err=True)
    emit_text(text)


def node_check(
    project: Annotated[str, typer.Argument(help="Project root or name.")],
    gpus: Annotated[Optional[str], typer.Option("--gpus", help="\"slurm\": the GPUs Slurm allocated to this job.")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="A CPU job: nothing to check.")] = False,
) -> None:
    """On a Slurm node: the driver and architecture checks envman run makes (used by non-docker job scripts)."""
    from envman.errors import UserError, printable
    from envman.cluster.slurm import node_check as check
    from envman.cli import matrix_source

    if no_gpu == (gpus is not None) or (gpus is not None and gpus != "slurm"):
        raise UserError("give --gpus slurm or --no-gpu", where="envman node-check")
    for w in check(project, gpus is not None, matrix_source()):
        emit_line(f"envman: warning: {printable(w)}", err=True)

