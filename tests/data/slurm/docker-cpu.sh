#!/bin/bash
#SBATCH --job-name=envman-p
# envman submit: project p, stack torch-2.4.1-cpu-py3.10, runtime docker, no GPU.
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
export ENVMAN_STATE_DIR=/s ENVMAN_CONFIG_DIR=/c
envman() { python3 -m envman "$@"; }
container="envman-job-${SLURM_JOB_ID}"
# scancel signals the job's processes: that kills the docker client, not the container.
# Remove the container named after the job, then end as cancelled.
trap 'docker rm -f "$container" >/dev/null 2>&1; exit 143' TERM INT HUP
# envman run: the same preflight as on a workstation (driver, verdict on each allocated GPU,
# promoted image and its smoke test), then docker run with exactly the GPUs Slurm allocated.
envman run /srv/p --no-gpu --name "$container" -- run &
wait "$!"
