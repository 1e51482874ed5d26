#!/bin/bash
#SBATCH --job-name=envman-p
# envman submit: project p, stack torch-2.4.1-cpu-py3.10, runtime charliecloud, no GPU.
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
export ENVMAN_STATE_DIR=/s ENVMAN_CONFIG_DIR=/c
envman() { python3 -m envman "$@"; }
envman node-check /srv/p --no-gpu || exit $?
# The container's environment (HOME, ENVMAN_PROJECT, ENVMAN_STACK): values in a file only you can read.
export USER="${USER:-$(id -un)}"  # the ch-* tools need it
img=/s/charliecloud/img_1
# Convert the image from the node's Docker engine once; jobs after it reuse the copy.
if [ ! -d "$img" ]; then
  mkdir -p "${img%/*}" || exit 1
  ch-convert -i docker img:1 "$img.$SLURM_JOB_ID" || exit 1
  mkdir -p "$img.$SLURM_JOB_ID"/workspace "$img.$SLURM_JOB_ID"/home/envman
  mv -T "$img.$SLURM_JOB_ID" "$img" 2>/dev/null || rm -rf "$img.$SLURM_JOB_ID"
fi
ch-run --bind=/srv/p:/workspace --bind=/h:/home/envman --cd=/workspace --unset-env=PWD --unset-env=OLDPWD --env-no-expand --set-env --set-env=/state/e.env "$img" -- run
