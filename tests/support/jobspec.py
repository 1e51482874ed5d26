"""A batch job's spec for the Slurm tests (``tests/unit/cluster/test_batch.py``, ``test_slurm.py``), and
readers of the script rendered from it."""

from __future__ import annotations

import shlex
import subprocess

from envman.cluster.batch import JobSpec, Resources


def spec(runtime="docker", gpus=1, command=("python", "-c", "print('$(id); `x`')"), **kw) -> JobSpec:
    base = dict(project="demo", root="/srv/projects/demo dir", stack="torch-2.4.1-cuda12.4-py3.10",
                image="envman/torch-2.4.1-cuda12.4-py3.10:latest", runtime=runtime,
                resources=Resources(partition="gpu", gpus=gpus, time="1:00:00", cpus=4, mem="16G"),
                envman=("/opt/venv/bin/python", "-m", "envman"), command=command, matrix_files=("/m/x.toml",),
                environment=(("WANDB_MODE", "off line"),), home="/state/homes/demo", state_dir="/state",
                config_dir="/config", env_file="/state/slurm/env/demo.env")
    base.update(kw)
    return JobSpec(**base)


def bash_ok(text: str) -> None:
    p = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def commands(text: str) -> list[list[str]]:
    """The script's lines as shell words (comments and directives dropped)."""
    return [shlex.split(ln) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
