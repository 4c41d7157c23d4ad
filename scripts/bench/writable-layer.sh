#!/bin/sh
# A user's writable layer over a squashfs image, in one run: the kernel's
# overlayfs that the container's init lays in its user namespace (`run
# --image --writable`) against fuse-overlayfs (`run --image --layer DIR`,
# a fresh DIR each round, which keeps fuse-overlayfs's layer). Both over
# the same image served by squashfuse, as an unprivileged user, with
# /dev/fuse open to users while it runs (as udev leaves it on systemd
# hosts). Times, as medians of ROUNDS:
#   start:   the command `true`
#   files:   writing FILES small files
#   copy-up: appending to each file of the image's /usr/bin (every one
#            copied up into the layer first)
# and prints each ratio of fuse-overlayfs to the kernel's overlayfs.
# Usage: scripts/bench/writable-layer.sh [ROUNDS] [FILES]   (as root)
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-5} files=${2:-2000}
. scripts/bench/lib.sh
bench_fuse_user layer
sh scripts/fixtures/glibc-rootfs.sh "$work/tree" >/dev/null
mksquashfs "$work/tree" "$work/app.sqsh" -quiet -no-progress >/dev/null
rm -rf "$work/tree"
mkdir "$work/user"
chown "$user:" "$work/user"

as_user() { runuser -u "$user" -- env XDG_RUNTIME_DIR= "$@"; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
kernel() { as_user "$g" --root "$work/user/state" run --image "$work/app.sqsh" --writable -- sh -c "$1"; }
fuse() {
  rm -rf "$work/user/layer"
  as_user "$g" --root "$work/user/state" run --image "$work/app.sqsh" --layer "$work/user/layer" -- sh -c "$1"
}
write_files="i=0; while [ \$i -lt $files ]; do echo x > /f\$i; i=\$((i + 1)); done"
copy_up='for f in /usr/bin/*; do [ -f "$f" ] && [ ! -L "$f" ] && echo >> "$f"; done; true'

echo "a user's writable layer over a squashfs image, medians of $rounds (s):"
printf '%-10s %10s %16s %8s\n' workload overlayfs fuse-overlayfs ratio
for name in start files copy-up; do
  case $name in
    start) cmd=true ;;
    files) cmd=$write_files ;;
    copy-up) cmd=$copy_up ;;
  esac
  k="" f=""
  for _ in $(seq "$rounds"); do
    k="$k $(seconds kernel "$cmd")"
    f="$f $(seconds fuse "$cmd")"
  done
  k=$(echo "$k" | median) f=$(echo "$f" | median)
  printf '%-10s %10s %16s %8s\n' "$name" "$k" "$f" "$(echo "$f $k" | awk '{printf "%.2f", $1 / $2}')"
done
