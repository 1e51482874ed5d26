#!/usr/bin/env bash
# Start a Docker engine in the background when none answers, and wait until it does.
#
# For developers and CI on a machine without a service manager (no systemd): installs
# Debian's docker.io when dockerd is missing (needs root), starts dockerd detached with its
# log in a file, and waits for `docker info` to answer. Does nothing when an engine answers.
#
#   scripts/start-dockerd.sh            # idempotent
#
# Environment:
#   ENVMAN_DOCKERD_LOG      dockerd's log file   (default: /var/log/envman-dockerd.log)
#   ENVMAN_DOCKERD_TIMEOUT  seconds to wait      (default: 60)
set -euo pipefail

log_file="${ENVMAN_DOCKERD_LOG:-/var/log/envman-dockerd.log}"
timeout_s="${ENVMAN_DOCKERD_TIMEOUT:-60}"

say() { printf 'start-dockerd: %s\n' "$*" >&2; }

engine_answers() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_answers; then
    say "a Docker engine already answers ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        say "dockerd is not installed and this is not root: install Docker (Debian: apt-get install docker.io)"
        exit 1
    fi
    say "installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
    apt-get update -q >/dev/null
    apt-get install -y -q docker.io >/dev/null
fi

if [ "$(id -u)" != 0 ]; then
    say "no Docker engine answers and starting dockerd needs root (or add your user to the docker group and start the docker service)"
    exit 1
fi

# A stale pid file from a dockerd that died with an earlier session blocks a new one.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
fi

if [ -f /var/run/docker.pid ]; then
    say "dockerd (pid $(cat /var/run/docker.pid)) is running but does not answer yet; waiting"
else
    mkdir -p "$(dirname "$log_file")"
    say "starting dockerd (log: $log_file)"
    # setsid + nohup: the daemon outlives this script and the shell that ran it.
    setsid nohup dockerd >>"$log_file" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$timeout_s"); do
    if engine_answers; then
        say "Docker engine $(docker info --format '{{.ServerVersion}}' 2>/dev/null) answers"
        exit 0
    fi
    sleep 1
done

say "dockerd did not answer within ${timeout_s}s; last lines of $log_file:"
tail -n 40 "$log_file" >&2 || true
exit 1
