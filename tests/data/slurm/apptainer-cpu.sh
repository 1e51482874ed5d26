#!/bin/bash
#SBATCH --job-name=envman-p
#SBATCH --export=NONE
# envman submit: project p, stack torch-2.4.1-cpu-py3.10, runtime apptainer, no GPU.
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
trap 'rm -f /state/e.env' EXIT
trap 'exit 143' TERM INT HUP  # scancel: end through the EXIT trap
export ENVMAN_STATE_DIR=/s ENVMAN_CONFIG_DIR=/c
envman() { python3 -m envman "$@"; }
envman node-check /srv/p --no-gpu || exit $?
# The container's environment (HOME, ENVMAN_PROJECT, ENVMAN_STACK, NVIDIA_VISIBLE_DEVICES): values in a file only you can read.
. /state/e.env || exit 1
rm -f /state/e.env  # its values are exported in this shell now
apptainer exec --cleanenv --containall --no-home --pwd /workspace --bind /srv/p:/workspace --bind /h:/home/envman img:1 run
