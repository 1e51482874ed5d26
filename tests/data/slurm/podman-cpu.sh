#!/bin/bash
#SBATCH --job-name=envman-p
# envman submit: project p, stack torch-2.4.1-cpu-py3.10, runtime podman, no GPU.
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
export ENVMAN_STATE_DIR=/s ENVMAN_CONFIG_DIR=/c
envman() { python3 -m envman "$@"; }
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
envman run /srv/p --no-gpu --name "$container" -- run &
wait "$!"
rc=$?
stop_service
exit "$rc"
