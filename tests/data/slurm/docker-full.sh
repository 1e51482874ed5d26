#!/bin/bash
#SBATCH --job-name=envman-demo
#SBATCH --partition=gpu,debug
#SBATCH --gres=gpu:2
#SBATCH --time=1-00:30
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
# envman submit: project demo, stack torch-2.4.1-cuda12.4-py3.10, runtime docker, 2 GPU(s).
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
export ENVMAN_STATE_DIR=/state ENVMAN_CONFIG_DIR=/config
export ENVMAN_MATRIX=/m/a.toml:/m/b.toml
envman() { /opt/venv/bin/python -m envman --matrix /m/x.toml --matrix '/m/y z.toml' "$@"; }
container="envman-job-${SLURM_JOB_ID}"
# scancel signals the job's processes: that kills the docker client, not the container.
# Remove the container named after the job, then end as cancelled.
trap 'docker rm -f "$container" >/dev/null 2>&1; exit 143' TERM INT HUP
# envman run: the same preflight as on a workstation (driver, verdict on each allocated GPU,
# promoted image and its smoke test), then docker run with exactly the GPUs Slurm allocated.
envman run '/srv/projects/demo dir' --gpus slurm --name "$container" -- python -c 'print('"'"'$(id); `x`'"'"')' &
wait "$!"
