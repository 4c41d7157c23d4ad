#!/bin/sh
# Makes sure the unprivileged test user USER (default gpurun-test) exists,
# with subordinate uid and gid ranges for rootless containers.
# tests/support/lib.rs (TestUser::get) does the same for the Rust tests.
# Usage: scripts/test-user.sh [USER]   (as root)
set -eu
user=${1:-gpurun-test}
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
grep -q "^$user:" /etc/subuid || echo "$user:200000:65536" >> /etc/subuid
grep -q "^$user:" /etc/subgid || echo "$user:200000:65536" >> /etc/subgid
