#!/bin/sh
# Times unpacking one large multi-layer image (default 500 MB in 10 gzip
# layers, made by tests/fixtures/make_image.py) into a rootfs, in one run:
#   gpurun import                  (as root, and rootless as gpurun-test)
#   umoci unpack --rootless        (as gpurun-test)
#   skopeo copy oci: dir: + tar -x (each layer in order, no whiteouts)
# Prints each median of ROUNDS and its ratio to gpurun's.
# Usage: scripts/bench/import.sh [MB] [LAYERS] [ROUNDS]   (as root)
set -eu
cd "$(dirname "$0")/../.."
mb=${1:-500} layers=${2:-10} rounds=${3:-3}
sh scripts/install-deps.sh
cargo build --locked --release -p gpurun >/dev/null 2>&1
gpurun="$PWD/target/release/gpurun"
user=gpurun-test
sh scripts/fixtures/test-user.sh "$user"
work=$(mktemp -d /var/tmp/gpurun-bench-import.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
echo "making a ${mb} MB image with $layers layers ..."
python3 tests/fixtures/make_image.py big "$work/image" "$mb" "$layers"
chmod -R a+rX "$work/image"
mkdir "$work/out" && chown "$user" "$work/out"

as_user() { su -s /bin/sh "$user" -c "$*"; }
time_one() { # NAME COMMAND...: prints seconds
  name=$1; shift
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "$name failed" >&2; exit 1; }
  end=$(date +%s%N)
  python3 -c "print(($end - $start) / 1e9)"
}
skopeo_tar() {
  skopeo copy --quiet "oci:$work/image/layout:latest" "dir:$work/out/sk" &&
  mkdir -p "$work/out/sk-rootfs" &&
  for l in $(jq -r '.layers[].digest | sub("sha256:"; "")' "$work/out/sk/manifest.json"); do
    tar -xzf "$work/out/sk/$l" -C "$work/out/sk-rootfs" || return 1
  done
}
results=""
for round in $(seq 1 "$rounds"); do
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  t1=$(time_one "gpurun import (root)" "$gpurun" import "$work/image/layout" -o "$work/out/g-root")
  rm -rf "$work/out/g-root"
  t2=$(time_one "gpurun import (rootless)" as_user "$gpurun import $work/image/layout -o $work/out/g-user")
  rm -rf "$work/out/g-user"
  t3=$(time_one "umoci unpack --rootless" as_user "umoci unpack --rootless --image $work/image/layout:latest $work/out/umoci")
  rm -rf "$work/out/umoci"
  t4=$(time_one "skopeo + tar" skopeo_tar)
  rm -rf "$work/out/sk" "$work/out/sk-rootfs"
  results="$results
$t1 $t2 $t3 $t4"
  echo "round $round: gpurun(root) ${t1}s  gpurun(rootless) ${t2}s  umoci ${t3}s  skopeo+tar ${t4}s"
done
echo "$results" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
cols = list(zip(*rows))
names = ["gpurun import (root)", "gpurun import (rootless)", "umoci unpack --rootless", "skopeo copy + tar -x"]
base = statistics.median(cols[1])
for n, c in zip(names, cols):
    m = statistics.median(c)
    print(f"{n:28s} median {m:6.2f}s   {m / base:5.2f}x gpurun rootless")
'
