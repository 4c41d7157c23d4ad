#!/bin/sh
# Runs COMMAND where /sys/fs/cgroup is the pure cgroup v2 hierarchy, as GPU
# hosts have it, on a cgroup v1 hybrid host: in a private mount namespace,
# with the unified hierarchy mounted again over /sys/fs/cgroup (the way
# tests/cgroup_v2.rs runs gpurun). Its controllers stay bound to v1, so
# limits do not apply; the kernel's v2 paths (device programs, cloning
# into the cgroup, the container's cgroup2 mount) are the host's.
# On a pure v2 host, COMMAND runs as it is.
# Usage: scripts/bench/v2view.sh COMMAND [ARGS...]   (as root)
set -eu
[ $# -gt 0 ] || { echo "usage: v2view.sh COMMAND [ARGS...]" >&2; exit 2; }
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then exec "$@"; fi
exec unshare --mount --propagation private sh -euc \
  'mount -t cgroup2 none /sys/fs/cgroup && exec "$@"' sh "$@"
