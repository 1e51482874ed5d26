#!/bin/bash
#SBATCH --job-name=envman-demo
#SBATCH --partition=gpu,debug
#SBATCH --gres=gpu:2
#SBATCH --time=1-00:30
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
# envman submit: project demo, stack torch-2.4.1-cuda12.4-py3.10, runtime podman, 2 GPU(s).
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
export ENVMAN_STATE_DIR=/state ENVMAN_CONFIG_DIR=/config
export ENVMAN_MATRIX=/m/a.toml:/m/b.toml
envman() { /opt/venv/bin/python -m envman --matrix /m/x.toml --matrix '/m/y z.toml' "$@"; }
# A Podman service for this job only, in a private folder; envman run finds it through DOCKER_HOST.
sockdir=$(mktemp -d) || exit 1
podman system service --time=0 "unix://$sockdir/podman.sock" &
service=$!
export DOCKER_HOST="unix://$sockdir/podman.sock"
for _ in $(seq 100); do [ -S "$sockdir/podman.sock" ] && break; sleep 0.1; done
container="envman-job-${SLURM_JOB_ID}"
stop_service() { kill "$service" 2>/dev/null; wait "$service" 2>/dev/null; rm -rf "$sockdir"; }
# scancel signals every process of the job (the service too) and kills the podman client, not the
# container: remove it by name with the podman CLI itself (same storage), then end as cancelled.
trap 'podman rm -f "$container" >/dev/null 2>&1; stop_service; exit 143' TERM INT HUP
envman run '/srv/projects/demo dir' --gpus slurm --name "$container" -- python -c 'print('"'"'$(id); `x`'"'"')' &
wait "$!"
rc=$?
stop_service
exit "$rc"
