#!/bin/sh
# The GPU library's unit tests built for aarch64 and run under qemu-user
# (Debian unstable's qemu-aarch64, which has openat2), in the cross root
# (scripts/fixtures/cross-root.sh): there Platform::native() is aarch64's,
# so the linker-cache flags, library directories and ELF machine checks
# are the Arm ones; the fake driver trees' libraries are compiled for
# aarch64 (GPURUN_TEST_CC).
#   sh scripts/ci/test-aarch64.sh [CARGO TEST ARGS...]   (as root)
set -eu
cd "$(dirname "$0")/../.."
cache=${GPURUN_CROSS_ROOT:-/var/cache/gpurun-cross}
for p in qemu-user-static binfmt-support; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done
sh scripts/fixtures/cross-root.sh build >/dev/null
# The release build's own link and target directory (scripts/release-build.sh),
# and profile (link-check), so the arm64 build of check-release.sh in the
# test command has built most of it.
sh scripts/fixtures/cross-root.sh enter env \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS=-Clink-arg=-Wl,--allow-shlib-undefined \
  CARGO_HOME="$cache/cargo-home" CARGO_TARGET_DIR="$PWD/target/release-2.28" \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 GPURUN_TEST_CC=aarch64-linux-gnu-gcc \
  LIBBPF_SYS_EXTRA_CFLAGS="-idirafter /usr/include" \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig \
  cargo-zigbuild test --locked --no-fail-fast --profile link-check --target aarch64-unknown-linux-gnu.2.28 \
  -p gpurun-gpu -p safe-fs --lib -- "$@"

# The arm64 binary's GPU flow over an arm64 fake host (NVIDIA's arm64 535
# files), short of a container (which qemu-user cannot run): `gpu list`
# finds the driver in aarch64's directories, and `gpu plan` puts its
# libraries in the image's aarch64 directory with aarch64's linker-cache
# flags (0x0a03). The amd64 binary over the same host takes none of them.
# (check-release.sh's build where the test command made it.)
binary=target/release-2.28/aarch64-unknown-linux-gnu/link-check/gpurun
[ -x "$binary" ] || binary=$(GPURUN_RELEASE_PROFILE=link-check sh scripts/release-build.sh --arch arm64)
binary=$PWD/$binary
host=$(mktemp -d)
trap 'rm -rf "$host"' EXIT
sh scripts/fixtures/fake-gpu-host.sh --arch arm64 "$host/host" 1 >/dev/null
mkdir -p "$host/bundle/rootfs/usr/lib/aarch64-linux-gnu" "$host/bundle/rootfs/etc"
# shellcheck disable=SC2016
sh scripts/fixtures/cross-root.sh enter sh -euc '
  g="qemu-aarch64 $1"; flags=$(cat "$2/host/flags"); cd "$2/bundle"
  $g spec >/dev/null
  python3 -c "import json; c = json.load(open(\"config.json\")); c[\"process\"][\"env\"].append(\"NVIDIA_VISIBLE_DEVICES=0\"); json.dump(c, open(\"config.json\", \"w\"))"
  $g $flags gpu list --json > "$2/list.json"
  $g $flags gpu plan --json "$2/bundle" > "$2/plan.json"
' sh "$binary" "$host"
target/debug/gpurun $(cat "$host/host/flags") gpu list --json > "$host/list-amd64.json" 2>/dev/null ||
  cargo run --locked -q -p gpurun -- $(cat "$host/host/flags") gpu list --json > "$host/list-amd64.json"
python3 - "$host" <<'PY'
import json, sys
d = sys.argv[1]
libs = lambda listing: ["/" + f["pathInRoot"] for fs in listing["files"].values() for f in fs if f["kind"] == "library"]
arm = libs(json.load(open(d + "/list.json")))
ml = [f for f in arm if "/libnvidia-ml.so." in f]
# The X server's modules live in directories every architecture shares.
x_modules = [f for f in arm if f.rsplit("/", 1)[1].startswith(("nvidia_drv.so", "libglxserver_nvidia.so"))]
assert ml and x_modules, f"arm64 gpu list: {arm}"
assert all("/usr/lib/aarch64-linux-gnu/" in f for f in arm if f not in x_modules), f"arm64 gpu list: {arm}"
plan = json.load(open(d + "/plan.json"))
cuda = [e for e in plan["ldcache"] if e["name"] == "libcuda.so.1"]
assert cuda and cuda[0]["flags"] == 0x0A03 and cuda[0]["path"] == "/usr/lib/aarch64-linux-gnu/libcuda.so.1", cuda
x86 = libs(json.load(open(d + "/list-amd64.json")))
assert not x86, f"the amd64 binary took arm64 libraries: {x86}"
print(f"test-aarch64: arm64 gpu list: {len(arm) - len(x_modules)} libraries in aarch64's directories, "
      f"{len(x_modules)} X modules; "
      f"gpu plan: {len(plan['ldcache'])} cache entries, libcuda.so.1 flags 0x{cuda[0]['flags']:04x}; amd64 binary: none")
PY
