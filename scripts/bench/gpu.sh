#!/bin/sh
# GPU start cost, one interleaved run over the fake GPU host, `run` of `true`:
#   gpurun            no GPU
#   gpurun+gpu        one GPU, compute,utility (native injection)
#   runc+cdi+ldconfig runc with the same mounts and devices written into
#                     config.json plus a createContainer hook running
#                     ldconfig (the CDI-mode toolkit's cost)
# and, in a second interleaved run, the CDI flow: NVIDIA's CDI spec
# (integration/lib/toolkit_cdi_spec.py) applied to config.json as
# containerd applies it (scripts/fixtures/cdi-apply.py),
#   gpurun+cdi        gpurun doing the spec's nvidia-cdi-hook hooks natively
#   runc+cdi-hooks    runc running them as processes: `gpurun cdi-hook` for
#                     each, and ldconfig in the container's root for
#                     update-ldcache, as the toolkit's hook does
# Prints medians, ratios to the last runtime and peak RSS, then step 1's
# cost with a cold and with a kept driver cache (scripts/bench/costs.py).
# GPURUN_BIN=... uses that binary instead of building one;
# GPURUN_REAL_DRIVER=1 uses the host's own driver instead of a fake host.
# Usage: scripts/bench/gpu.sh [ROUNDS]   (default 100)
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-100}
sh scripts/install-deps.sh
g=$(sh scripts/bench/binary.sh)
work=$(mktemp -d)
# State on tmpfs, where both runtimes keep it by default (/run/gpurun,
# /run/runc); bundles stay on disk.
state=$(mktemp -d -p /run)
trap 'rm -rf "$work" "$state"' EXIT
if [ "${GPURUN_REAL_DRIVER:-0}" = 1 ]; then
  roots=""
else
  sh scripts/fixtures/gpu-fixtures.sh "$work/fx"
  roots=$(cat "$work/fx/host/flags")
fi
for b in plain gpu runc cdi cdirunc; do
  mkdir -p "$work/$b"
  sh scripts/fixtures/glibc-rootfs.sh "$work/$b/rootfs"
  (cd "$work/$b" && "$g" spec)
  jq '.process.terminal=false | .process.args=["/usr/bin/true"]' "$work/$b/config.json" > "$work/c" && mv "$work/c" "$work/$b/config.json"
done
jq '.process.env += ["NVIDIA_VISIBLE_DEVICES=0","NVIDIA_DRIVER_CAPABILITIES=compute,utility"]' \
  "$work/gpu/config.json" > "$work/c" && mv "$work/c" "$work/gpu/config.json"
# runc's bundle: gpurun's own plan, written as plain mounts/devices (as CDI
# would), with the ldconfig hook the toolkit runs in CDI mode.
$g $roots gpu plan "$work/gpu" --json > "$work/plan.json"
jq --slurpfile p "$work/plan.json" --arg root "$work/runc/rootfs" '
  .mounts += [$p[0].mounts[] | {destination, type: "bind", source, options}]
  | .linux.devices = [$p[0].deviceNodes[] | {path, type: "c", major, minor, fileMode, uid: 0, gid: 0}]
  | .linux.resources.devices += [$p[0].deviceNodes[] | {allow: true, type: "c", major, minor, access: "rwm"}]
  | .hooks.createContainer = [{path: "/usr/sbin/ldconfig", args: ["ldconfig"]}]' \
  "$work/runc/config.json" > "$work/c" && mv "$work/c" "$work/runc/config.json"
if [ -z "$roots" ]; then
  echo "bench/gpu.sh: the CDI flow needs the fake host's driver files; skipped with GPURUN_REAL_DRIVER=1" >&2
  cdi=no
else
  cdi=yes
  python3 integration/lib/toolkit_cdi_spec.py "$work/fx/host/driver" "$work/fx/host/dev" "$work/nvidia-cdi.json"
  python3 scripts/fixtures/cdi-apply.py "$work/nvidia-cdi.json" "$work/cdi/config.json" 0
  python3 scripts/fixtures/cdi-apply.py "$work/nvidia-cdi.json" "$work/cdirunc/config.json" 0 \
    --hooks-via "$g" --ldconfig
fi
cd "$work"
python3 "$OLDPWD/scripts/bench/interleave.py" "$rounds" - \
  "gpurun=$g --root $state/s1 run --bundle $work/plain" \
  "gpurun+gpu=$g $roots --root $state/s2 run --bundle $work/gpu" \
  "runc+cdi+ldconfig=runc --root $state/s3 run --bundle $work/runc"
if [ "$cdi" = yes ]; then
  python3 "$OLDPWD/scripts/bench/interleave.py" "$rounds" - \
    "gpurun+cdi=$g $roots --root $state/s4 run --bundle $work/cdi" \
    "runc+cdi-hooks=runc --root $state/s5 run --bundle $work/cdirunc"
fi
cd "$OLDPWD"
python3 scripts/bench/costs.py "$rounds" "$g" "$work/gpu" -- $roots
