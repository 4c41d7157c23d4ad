#!/bin/sh
# Checks the .deb as a user gets it: lintian reports no error, and in a
# clean Debian 12 root (mmdebstrap, cached; nothing else installed in it)
# the package installs with dpkg, its dependencies resolved from its own
# Depends line, and `gpurun --version` and `gpurun features` run there. A
# dependency written wrong (a library missing, or glibc too old for the
# binary) fails here.
#   sh scripts/ci/check-deb.sh [BINARY]   (as root; default target/debug/gpurun)
set -eu
cd "$(dirname "$0")/../.."
binary=${1:-target/debug/gpurun}
cache=${GPURUN_DEB_CHECK_CACHE:-/var/cache/gpurun-deb-check}
mkdir -p "$cache"
deb=$(GPURUN_PACKAGE_BINARY="$binary" sh scripts/package-deb.sh)
depends=$(dpkg-deb -f "$deb" Depends)
echo "check-deb: Depends: $depends"
# The manual the example config and gpurun's messages point at is shipped.
contents=$(dpkg-deb -c "$deb")
for page in usr/share/doc/gpurun/docs/config.md usr/share/doc/gpurun/SECURITY.md usr/lib/gpurun/spank_gpurun.so; do
  echo "$contents" | grep -q " \./$page\$" \
    || { echo "check-deb: error: the package lacks /$page, which its docs name (README, hpc-admin.md)" >&2; exit 1; }
done
# The glibc the binary needs: its newest GLIBC_2.x version, and 2.36 for
# packed relative relocations (GLIBC_ABI_DT_RELR, a version without a
# symbol). The Depends line must ask for at least that.
needed=$(readelf -V "$binary" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -V | tail -1)
if readelf -V "$binary" | grep -q GLIBC_ABI_DT_RELR && dpkg --compare-versions "$needed" lt 2.36; then
  needed=2.36
fi
declared=$(echo "$depends" | sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p')
if [ -z "$declared" ] || dpkg --compare-versions "$declared" lt "$needed"; then
  echo "check-deb: error: the binary needs glibc >= $needed, the package asks for libc6 (>= ${declared:-nothing})" >&2
  exit 1
fi
# --fail-on error: warnings and pedantic tags are reported, not fatal. The
# maintainer tags are the one exception, said here: the project has no
# public address yet, so the package names its builder's local root
# (package-deb.sh) rather than an address that does not exist.
rc=0
lintian --fail-on error --suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog,root-in-contact \
  "$deb" > "$cache.lintian" 2>&1 || rc=$?
grep -v 'running with root privileges' "$cache.lintian" | sed 's/^/check-deb: lintian: /' || true
[ "$rc" = 0 ] || { echo "check-deb: error: lintian reports errors (above)" >&2; exit 1; }
# The systemd units it ships parse (systemd's own check), where systemd is.
if command -v systemd-analyze >/dev/null; then
  units=$(mktemp -d)
  dpkg-deb -x "$deb" "$units"
  # Only what is wrong with the units themselves counts: this host has no
  # /usr/bin/gpurun of the package's, and may run no systemd.
  problems=$(systemd-analyze verify --man=no "$units"/usr/lib/systemd/system/gpurun-cdi-refresh.* 2>&1 |
    grep -v 'is not executable: No such file\|Cannot add dependency\|not found\|Failed to prepare' || true)
  rm -rf "$units"
  [ -z "$problems" ] || { echo "check-deb: error: systemd-analyze: $problems" >&2; exit 1; }
  echo "check-deb: the CDI refresh units pass systemd-analyze verify"
fi
root="$cache/bookworm"
if [ ! -f "$root/.complete" ]; then
  rm -rf "$root"
  mkdir -p "$cache"
  # The bare minimum a Debian 12 system has: whatever else the binary
  # loads, the package must bring in through its Depends.
  mmdebstrap --quiet --variant=apt --mode=root \
    --skip=cleanup/apt/lists bookworm "$root" "$(sh scripts/fixtures/debian-mirror.sh)" >&2
  touch "$root/.complete"
fi
work=$(mktemp -d)
cleanup() {
  umount "$work/merged/proc" 2>/dev/null || true
  umount "$work/merged" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$work/upper" "$work/work" "$work/merged"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$work/merged"
mount -t proc proc "$work/merged/proc"
cp "$deb" "$work/merged/tmp/gpurun.deb"
cp /etc/resolv.conf "$work/merged/etc/resolv.conf" 2>/dev/null || true
chroot "$work/merged" sh -c 'apt-get install -y -qq /tmp/gpurun.deb >/dev/null 2>&1 || apt-get install -y /tmp/gpurun.deb' >&2
version=$(chroot "$work/merged" gpurun --version | head -1)
echo "check-deb: installed in a clean bookworm root: $version"
chroot "$work/merged" gpurun features > "$work/features.json"
python3 -c 'import json, sys; f = json.load(open(sys.argv[1])); print("check-deb: features:", f["ociVersionMin"], "to", f["ociVersionMax"])' "$work/features.json"
