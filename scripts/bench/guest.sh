#!/bin/sh
# Times `run` of `true` (or, with --engine, the engine path) interleaved,
# as root, in the pure cgroup v2 systemd guest of Debian unstable
# (scripts/vm.sh --systemd-root unstable: kernel 6.12 under emulation),
# where crun runs: gpurun against crun 1.28 and runc 1.3.6 from that
# root, and Debian 12's runc carried in. Under emulation every runtime is
# several times slower than on hardware: compare the ratios.
# GPURUN_BIN=... uses that binary instead of a release build.
# Usage: scripts/bench/guest.sh [--engine] [ROUNDS]   (default 40; as root)
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
bench_mode 40 "$@"
# Under the checkout, which the guest sees at the same path.
work=$(mktemp -d "$PWD/target/bench-guest.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
bench_bundle "$work/bundle" "$g"
cp "$g" "$work/gpurun"
cp "$(command -v runc)" "$work/runc-debian12"
old=$("$work/runc-debian12" --version | head -1 | awk '{print $3}')
sh scripts/vm.sh --systemd-root unstable 6.12 -- sh -euc '
  work=$1 rounds=$2 old=$3 bench=$4
  state=$(mktemp -d -p /run)
  new=$(runc --version | head -1 | awk "{print \$3}")
  crun=$(crun --version | head -1 | awk "{print \$3}")
  echo "guest: $(uname -r), systemd $(systemctl --version | awk "NR == 1 {print \$2}"), $(stat -f -c %T /sys/fs/cgroup)"
  python3 "scripts/$bench" "$rounds" "$work/bundle" "gpurun=$work/gpurun --root $state/gpurun" \
    "runc-$old=$work/runc-debian12 --root $state/runc-old" "runc-$new=runc --root $state/runc-new" \
    "crun-$crun=crun --root $state/crun"
' sh "$work" "$rounds" "$old" "$bench" 2>&1 | grep -av '^\[ *[0-9.]*\] \|SeaBIOS\|Booting' | tr -d '\033' | grep -aE '^(guest:|runtime|gpurun|runc|crun|\()'
