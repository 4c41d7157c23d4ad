#!/bin/sh
# Checkpoint and restore of a CUDA container holding MIB MiB of device
# memory (tests/fixtures/cuda_worker.c), and of the same worker holding
# MIB MiB of host memory and no GPU, each ROUNDS times: the whole command,
# the CUDA steps (lock + checkpoint, restore + unlock), CRIU's own dump and
# restore, the images' size and MB/s, and the CUDA steps' share of CRIU's
# time (the target: at most 10% at 1 GiB). Medians, from gpurun --debug.
#
# On a host with an NVIDIA driver the real one is used; elsewhere the fake
# host whose libcuda is the stand-in tests/fixtures/fake_cuda.c, whose
# CUDA steps are a copy in host memory, not the driver's.
#
# Usage (root): sh scripts/bench/checkpoint.sh [MIB] [ROUNDS]   (default 256 3)
#   GPURUN_BIN=PATH (default target/release/gpurun, built if missing),
#   GPURUN_CRIU=PATH (default: scripts/fixtures/criu.sh's)
set -eu
cd "$(dirname "$0")/../.."
mib=${1:-256}
rounds=${2:-3}
[ "$(id -u)" = 0 ] || { echo "bench/checkpoint.sh: run as root" >&2; exit 2; }
gpurun=${GPURUN_BIN:-$PWD/target/release/gpurun}
[ -x "$gpurun" ] || cargo build --locked --release -p gpurun >&2
criu=${GPURUN_CRIU:-$(sh scripts/fixtures/criu.sh --gpu)}
work=$(mktemp -d /var/tmp/gpurun-bench-ckpt.XXXXXX)
bundle="$work/bundle"
state="$work/state"
cleanup() {
  for c in $("$gpurun" --root "$state" list -q 2>/dev/null); do
    "$gpurun" --root "$state" delete --force "$c" 2>/dev/null
  done
  umount "$bundle/rootfs" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$bundle/rootfs" "$bundle/upper" "$bundle/work" "$work/log"
sh scripts/fixtures/glibc-rootfs.sh "$work/lower" >/dev/null
cc -O2 -o "$work/lower/usr/bin/cuda_worker" tests/fixtures/cuda_worker.c -ldl
if [ -e /proc/driver/nvidia/version ]; then
  flags="" where="the host's NVIDIA driver $(sed -n 's/.*Kernel Module *\([0-9.]*\).*/\1/p' /proc/driver/nvidia/version | head -1)"
else
  sh scripts/fixtures/gpu-fixtures.sh "$work/fx" >/dev/null
  flags=$(cat "$work/fx/host-checkpoint/flags") where="the fake host's stand-in libcuda (no GPU)"
fi
# An overlay rootfs, as engines give (a plain directory gets gpurun's
# private mount-point overlays, which CRIU cannot save).
mount -t overlay overlay -o "lowerdir=$work/lower,upperdir=$bundle/upper,workdir=$bundle/work" "$bundle/rootfs"
(cd "$bundle" && "$gpurun" spec)
g() { # gpurun with the host's flags
  # shellcheck disable=SC2086
  "$gpurun" --root "$state" --criu "$criu" $flags "$@"
}

config() { # ARGS-JSON
  python3 - "$bundle/config.json" "$work/log" "$1" <<'PY'
import json, sys
path, log, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
c = json.load(open(path))
c["process"]["terminal"] = False
c["process"]["args"] = args
c["process"]["env"] = ["PATH=/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES=0",
                       "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "CUDA_CACHE_DISABLE=1"]
c["root"] = {"path": "rootfs", "readonly": False}
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/log"]
c["mounts"].append({"destination": "/log", "type": "bind", "source": log, "options": ["rbind", "rw"]})
json.dump(c, open(path, "w"))
PY
}

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
wait_ticks() { # LOG N
  for _ in $(seq 1 300); do
    [ "$(grep -c '^tick' "$1" 2>/dev/null || true)" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "bench/checkpoint.sh: the worker does not work: $(tail -2 "$1")" >&2
  exit 1
}

# One round: KIND, printing "KIND ckpt_ms cuda_save_ms criu_dump_ms mib restore_ms criu_restore_ms cuda_back_ms".
round() {
  kind=$1 n=$2 log="$work/log/$1-$2"
  g run -d --bundle "$bundle" "b-$kind-$n" </dev/null >/dev/null 2>&1
  wait_ticks "$log" 2
  t=$(date +%s%N)
  g --debug checkpoint --image-path "$work/img-$kind-$n" "b-$kind-$n" 2>"$work/ckpt.err" >/dev/null
  ckpt=$(ms_since "$t")
  t=$(date +%s%N)
  g --debug restore -d --image-path "$work/img-$kind-$n" --bundle "$bundle" "r-$kind-$n" 2>"$work/rest.err" >/dev/null
  rest=$(ms_since "$t")
  at=$(grep -c '^tick' "$log")
  wait_ticks "$log" $((at + 1))
  g delete --force "r-$kind-$n" >/dev/null 2>"$work/delete.err" || { cat "$work/delete.err" >&2; exit 1; }
  size=$(du -sm "$work/img-$kind-$n" | cut -f1)
  rm -rf "$work/img-$kind-$n"
  python3 - "$kind" "$ckpt" "$rest" "$size" "$work/ckpt.err" "$work/rest.err" <<'PY'
import re, sys
kind, ckpt, rest, size, cerr, rerr = sys.argv[1:]
c, r = open(cerr).read(), open(rerr).read()
def ms(pattern, text, group=1):
    m = re.search(pattern, text)
    return float(m.group(group)) if m else 0.0
save = ms(r"locked in ([\d.]+) ms", c) + ms(r"checkpointed in ([\d.]+) ms", c)
dump = ms(r"CRIU dumped the container in ([\d.]+) ms", c)
back = ms(r"restored and unlocked in ([\d.]+) ms", r)
criu_rest = ms(r"CRIU restored the container in ([\d.]+) ms", r)
print(kind, ckpt, save, dump, size, rest, criu_rest, back)
PY
}

echo "bench-checkpoint: $mib MiB, $rounds rounds, $where, $("$criu" --version | head -1)"
{
  for n in $(seq 1 "$rounds"); do
    config "[\"cuda_worker\", \"$mib\", \"200\", \"/log/gpu-$n\"]"
    round gpu "$n"
    config "[\"cuda_worker\", \"$mib\", \"200\", \"/log/host-$n\", \"--host-only\"]"
    round host "$n"
  done
} > "$work/results"
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(kind, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == kind)
print(f"{'':28}{'CUDA container':>16}{'host memory':>14}")
for name, i in [("checkpoint, whole (ms)", 1), ("  CUDA lock+checkpoint (ms)", 2),
                ("  CRIU dump (ms)", 3), ("images (MiB)", 4), ("restore, whole (ms)", 5),
                ("  CRIU restore (ms)", 6), ("  CUDA restore+unlock (ms)", 7)]:
    print(f"{name:28}{med('gpu', i):16.1f}{med('host', i):14.1f}")
for kind in ("gpu", "host"):
    dump, size = med(kind, 3), med(kind, 4)
    print(f"{kind}: dump {size / (dump / 1000):.0f} MB/s" if dump else f"{kind}: no dump time")
save, dump = med("gpu", 2), med("gpu", 3)
back, crest = med("gpu", 7), med("gpu", 6)
print(f"CUDA steps over CRIU: checkpoint {save / dump * 100:.1f}% of the dump, "
      f"restore {back / crest * 100:.1f}% of CRIU's restore")
PY
