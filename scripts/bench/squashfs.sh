#!/bin/sh
# A squashfs image run in place against the same image unpacked, in one
# run, as an HPC node sees it: an image of MB megabytes (a glibc root and
# files of 4 to 64 KiB, as a Python environment's) kept as one .sqsh file
# and as a docker-save archive. Each round drops the page cache, then times:
#   sqsh:        gpurun run --image app.sqsh -- true   (nothing to unpack)
#   import:      gpurun import image.tar -o bundle, then run --rootfs
#   unsquashfs:  unsquashfs -d dir app.sqsh, then run --rootfs (enroot create)
# and then each one's second start (the cache warm); then the same as an
# unprivileged user (run --image through squashfuse, with /dev/fuse open
# to users while it runs, as udev leaves it on systemd hosts; the user's
# import into its user namespace). Prints the medians of ROUNDS with their
# ratios to the .sqsh's, and the inodes and bytes each way leaves on the
# node's filesystem.
# Usage: scripts/bench/squashfs.sh [MB] [ROUNDS]   (as root)
set -eu
cd "$(dirname "$0")/../.."
mb=${1:-2048} rounds=${2:-3}
. scripts/bench/lib.sh
bench_fuse_user sqsh
state="$work/state"
mkdir -p "$state" "$work/user"
chown "$user:" "$work/user"
echo "making a $mb MB image ..."
sh scripts/fixtures/glibc-rootfs.sh "$work/tree" >/dev/null
python3 - "$work/tree/data" "$mb" <<'PY'
import os, random, sys
root, left = sys.argv[1], int(sys.argv[2]) * 1024 * 1024
random.seed(1)
n = 0
while left > 0:
    d = os.path.join(root, f"pkg{n // 500}")
    os.makedirs(d, exist_ok=True)
    size = min(left, random.randint(4, 64) * 1024)
    # Half random, half zeros: compresses as libraries and byte code do.
    with open(os.path.join(d, f"m{n}.so"), "wb") as f:
        f.write(os.urandom(size // 2) + bytes(size - size // 2))
    left, n = left - size, n + 1
PY
mksquashfs "$work/tree" "$work/app.sqsh" -quiet -no-progress >/dev/null
python3 tests/fixtures/make_image.py fromdir "$work/img" "$work/tree" bench true
rm -rf "$work/tree"

cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
run_rootfs() { "$g" --root "$state" run --rootfs "$1" -- true; }
from_import() { "$g" import "$work/img/image.docker.tar" -o "$work/bundle" && run_rootfs "$work/bundle/rootfs"; }
from_unsquash() { unsquashfs -q -n -d "$work/dir" "$work/app.sqsh" && run_rootfs "$work/dir"; }
as_user() { setpriv --reuid="$user" --regid="$user" --init-groups env HOME=/tmp XDG_RUNTIME_DIR="$work/user" "$@"; }
user_image() { as_user "$g" run --image "$work/app.sqsh" -- true; }
user_rootfs() { as_user "$g" run --rootfs "$work/user/bundle/rootfs" -- true; }
user_import() { as_user "$g" import "$work/img/image.docker.tar" -o "$work/user/bundle" && user_rootfs; }
results=""
for round in $(seq 1 "$rounds"); do
  rm -rf "$work/bundle" "$work/dir"
  [ ! -d "$work/user/bundle" ] || as_user "$g" import --remove -o "$work/user/bundle" >/dev/null
  cold; s1=$(seconds "$g" --root "$state" run --image "$work/app.sqsh" -- true)
  s2=$(seconds "$g" --root "$state" run --image "$work/app.sqsh" -- true)
  cold; i1=$(seconds from_import)
  i2=$(seconds run_rootfs "$work/bundle/rootfs")
  cold; u1=$(seconds from_unsquash)
  u2=$(seconds run_rootfs "$work/dir")
  cold; f1=$(seconds user_image)
  f2=$(seconds user_image)
  cold; j1=$(seconds user_import)
  j2=$(seconds user_rootfs)
  echo "round $round: sqsh ${s1}s (again ${s2}s)  import+run ${i1}s (${i2}s)  unsquashfs+run ${u1}s (${u2}s)"
  echo "  as $user: sqsh ${f1}s (again ${f2}s)  import+run ${j1}s (${j2}s)"
  results="$results
$s1 $i1 $u1 $s2 $i2 $u2 $f1 $j1 $f2 $j2"
done
inodes() { find "$1" | wc -l; }
echo "$results" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
cols = [statistics.median(c) for c in zip(*rows)]
names = ["run --image app.sqsh", "import, then run --rootfs", "unsquashfs, then run --rootfs"]
def table(title, names, values):
    print(title)
    for n, m in zip(names, values):
        print(f"  {n:32s} {m:8.3f} s   {m / values[0]:7.2f}x the .sqsh")
print("medians of", len(rows), "rounds")
table("root: first start on a node (cold cache)", names, cols[0:3])
table("root: a second start (warm cache)", names, cols[3:6])
table("user: first start (cold cache)", names[:2], cols[6:8])
table("user: a second start (warm cache)", names[:2], cols[8:10])
'
echo "left on the node's filesystem"
printf '  %-32s %8s inodes %8s KiB\n' "app.sqsh" 1 "$(du -sk "$work/app.sqsh" | cut -f1)"
printf '  %-32s %8s inodes %8s KiB\n' "import's bundle" "$(inodes "$work/bundle")" "$(du -sk "$work/bundle" | cut -f1)"
printf '  %-32s %8s inodes %8s KiB\n' "unsquashfs's tree" "$(inodes "$work/dir")" "$(du -sk "$work/dir" | cut -f1)"
as_user "$g" import --remove -o "$work/user/bundle" >/dev/null
