#!/bin/sh
# envman entrypoint (/opt/envman/entrypoint.sh): lets the image run as any host uid:gid
# (docker run --user "$(id -u):$(id -g)"), so files written to a mounted project belong to you.
#
# (a) HOME: the image sets HOME=/home/envman (mode 1777, so any uid can create its files there).
#     When HOME is unset, missing or not writable (an odd --env HOME=..., a read-only mount),
#     it falls back to /tmp/envman-home-<uid>.
# (b) Identity: many tools ask the passwd database who they are (getpass.getuser(), ssh, git,
#     torch's compile caches) and fail for a uid it does not list. When the uid or gid is unknown
#     and /etc/passwd or /etc/group is writable (the image makes them so), an entry is added.
#     That grants nothing: envman runs containers with no-new-privileges, so no setuid program
#     can turn a passwd line into privileges.
# Then the command runs in place of this script (exec), receiving signals directly.
set -eu

uid=$(id -u)
gid=$(id -g)

home_ok() {
    [ -n "${HOME:-}" ] && [ -d "$HOME" ] && [ -w "$HOME" ]
}

if ! home_ok; then
    HOME="/tmp/envman-home-$uid"
    mkdir -p "$HOME" 2>/dev/null || true
    if ! home_ok; then
        HOME=$(mktemp -d "/tmp/envman-home-$uid.XXXXXX")
    fi
    export HOME
fi

if ! getent group "$gid" >/dev/null 2>&1 && [ -w /etc/group ]; then
    group=envman
    if getent group "$group" >/dev/null 2>&1; then
        group="envman-$gid"
    fi
    printf '%s:x:%s:\n' "$group" "$gid" >>/etc/group
fi

if ! getent passwd "$uid" >/dev/null 2>&1 && [ -w /etc/passwd ]; then
    user=envman
    if getent passwd "$user" >/dev/null 2>&1; then
        user="envman-$uid"
    fi
    printf '%s:x:%s:%s:envman user:%s:/bin/sh\n' "$user" "$uid" "$gid" "$HOME" >>/etc/passwd
fi

if [ "$#" -eq 0 ]; then
    set -- python
fi
exec "$@"
