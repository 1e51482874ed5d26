#!/bin/bash
#SBATCH --job-name=envman-demo
#SBATCH --partition=gpu,debug
#SBATCH --gres=gpu:2
#SBATCH --time=1-00:30
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --export=NONE
# envman submit: project demo, stack torch-2.4.1-cuda12.4-py3.10, runtime pyxis, 2 GPU(s).
# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).
set -uo pipefail
trap 'rm -f /state/slurm/env/demo-1-2.env' EXIT
trap 'exit 143' TERM INT HUP  # scancel: end through the EXIT trap
export ENVMAN_STATE_DIR=/state ENVMAN_CONFIG_DIR=/config
export ENVMAN_MATRIX=/m/a.toml:/m/b.toml
envman() { /opt/venv/bin/python -m envman --matrix /m/x.toml --matrix '/m/y z.toml' "$@"; }
envman node-check '/srv/projects/demo dir' --gpus slurm || exit $?
# The container's environment (ENVMAN_PROJECT, ENVMAN_STACK, EMPTY, SPACES, SQ, DQ, DOLLAR, TICK, HASH, EQ, DASH, BACKSLASH, UNI, QUOTED, COMMA, STAR, SEMI): values in a file only you can read.
. /state/slurm/env/demo-1-2.env || exit 1
rm -f /state/slurm/env/demo-1-2.env  # its values are exported in this shell now
srun --ntasks=1 --export=ENVMAN_PROJECT,ENVMAN_STACK,EMPTY,SPACES,SQ,DQ,DOLLAR,TICK,HASH,EQ,DASH,BACKSLASH,UNI,QUOTED,COMMA,STAR,SEMI --container-image=envman/torch-2.4.1-cuda12.4-py3.10:latest '--container-mounts=/srv/projects/demo dir:/workspace,/state/homes/demo:/home/envman,/srv/data:/data:ro,/srv/out:/out' --container-workdir=/workspace --no-container-mount-home --container-env=ENVMAN_PROJECT,ENVMAN_STACK,EMPTY,SPACES,SQ,DQ,DOLLAR,TICK,HASH,EQ,DASH,BACKSLASH,UNI,QUOTED,COMMA,STAR,SEMI python -c 'print('"'"'$(id); `x`'"'"')'
