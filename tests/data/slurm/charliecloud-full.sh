#!/bin/bash
#SBATCH --job-name=envman-demo
#SBATCH --partition=gpu,debug
#SBATCH --gres=gpu:2
#SBATCH --time=1-00:30
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --export=NONE
# envman submit: project demo, stack torch-2.4.1-cuda12.4-py3.10, runtime charliecloud, 2 GPU(s).
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
trap 'rm -f /state/slurm/env/demo-1-2.env' EXIT
trap 'exit 143' TERM INT HUP  # scancel: end through the EXIT trap
export ENVMAN_STATE_DIR=/state ENVMAN_CONFIG_DIR=/config
export ENVMAN_MATRIX=/m/a.toml:/m/b.toml
envman() { /opt/venv/bin/python -m envman --matrix /m/x.toml --matrix '/m/y z.toml' "$@"; }
envman node-check '/srv/projects/demo dir' --gpus slurm || exit $?
# The container's environment (HOME, ENVMAN_PROJECT, ENVMAN_STACK, EMPTY, SPACES, SQ, DQ, DOLLAR, TICK, HASH, EQ, DASH, BACKSLASH, UNI, QUOTED, COMMA, STAR, SEMI): values in a file only you can read.
export USER="${USER:-$(id -un)}"  # the ch-* tools need it
# The copy is keyed by the image id the tag names now: a new promotion is converted again.
id=$(docker image inspect --format '{{.Id}}' envman/torch-2.4.1-cuda12.4-py3.10:latest) || exit 1
id="${id#sha256:}"
case "$id" in ""|*[!0-9a-f]*) echo "envman: no image id for the image of the job" >&2; exit 1;; esac
img=/state/charliecloud/envman_torch-2.4.1-cuda12.4-py3.10_latest"_$id"
# Convert it from the node's Docker engine once; jobs after it reuse the copy of that id.
if [ ! -d "$img" ]; then
  mkdir -p "${img%/*}" || exit 1
  ch-convert -i docker envman/torch-2.4.1-cuda12.4-py3.10:latest "$img.$SLURM_JOB_ID" || exit 1
  # The tag may have moved while it was converted: keep the copy only under the id it has.
  if [ "$(docker image inspect --format '{{.Id}}' envman/torch-2.4.1-cuda12.4-py3.10:latest)" != "sha256:$id" ]; then
    rm -rf "$img.$SLURM_JOB_ID"; echo "envman: the image changed during its conversion; submit again" >&2; exit 1
  fi
  mkdir -p "$img.$SLURM_JOB_ID"/workspace "$img.$SLURM_JOB_ID"/home/envman
  mv -T "$img.$SLURM_JOB_ID" "$img" 2>/dev/null || rm -rf "$img.$SLURM_JOB_ID"
fi
ch-run '--bind=/srv/projects/demo dir:/workspace' --bind=/state/homes/demo:/home/envman --bind=/srv/data:/data --bind=/srv/out:/out --cd=/workspace --private-tmp '--unset-env=*' --env-no-expand --set-env --set-env=/state/slurm/env/demo-1-2.env "$img" -- python -c 'print('"'"'$(id); `x`'"'"')'
