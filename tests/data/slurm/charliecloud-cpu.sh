#!/bin/bash
#SBATCH --job-name=envman-p
#SBATCH --export=NONE
# envman submit: project p, stack torch-2.4.1-cpu-py3.10, runtime charliecloud, no GPU.
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
trap 'rm -f /state/e.env' EXIT
trap 'exit 143' TERM INT HUP  # scancel: end through the EXIT trap
export ENVMAN_STATE_DIR=/s ENVMAN_CONFIG_DIR=/c
envman() { python3 -m envman "$@"; }
envman node-check /srv/p --no-gpu || exit $?
# The container's environment (HOME, ENVMAN_PROJECT, ENVMAN_STACK, NVIDIA_VISIBLE_DEVICES): values in a file only you can read.
export USER="${USER:-$(id -un)}"  # the ch-* tools need it
# The copy is keyed by the image id the tag names now: a new promotion is converted again.
id=$(docker image inspect --format '{{.Id}}' img:1) || exit 1
id="${id#sha256:}"
case "$id" in ""|*[!0-9a-f]*) echo "envman: no image id for the image of the job" >&2; exit 1;; esac
img=/s/charliecloud/img_1"_$id"
# Convert it from the node's Docker engine once; jobs after it reuse the copy of that id.
if [ ! -d "$img" ]; then
  mkdir -p "${img%/*}" || exit 1
  ch-convert -i docker img:1 "$img.$SLURM_JOB_ID" || exit 1
  # The tag may have moved while it was converted: keep the copy only under the id it has.
  if [ "$(docker image inspect --format '{{.Id}}' img:1)" != "sha256:$id" ]; then
    rm -rf "$img.$SLURM_JOB_ID"; echo "envman: the image changed during its conversion; submit again" >&2; exit 1
  fi
  mkdir -p "$img.$SLURM_JOB_ID"/workspace "$img.$SLURM_JOB_ID"/home/envman
  mv -T "$img.$SLURM_JOB_ID" "$img" 2>/dev/null || rm -rf "$img.$SLURM_JOB_ID"
fi
ch-run --bind=/srv/p:/workspace --bind=/h:/home/envman --cd=/workspace --private-tmp '--unset-env=*' --env-no-expand --set-env --set-env=/state/e.env "$img" -- run
