#!/bin/sh
# Checks what users install, for each architecture named (default: amd64
# arm64): the glibc 2.28 release binary (scripts/release-build.sh) is an
# ELF of that machine, needs no glibc symbol newer than GLIBC_2.28 and no
# GLIBC_ABI_DT_RELR, and starts in Debian 11's root (glibc 2.31, the
# oldest the configured mirror has; arm64 under qemu-user); its .deb
# passes lintian and installs there with apt (its Depends resolved), its
# .rpm's Requires and file list are read back (rpm -qpR, -qpl), rpmlint
# reports no error, and installed with rpm into a copy of the same root;
# `gpurun --version` and `gpurun features` run from each.
#   sh scripts/ci/check-release.sh [amd64|arm64 ...]   (as root)
#   GPURUN_RELEASE_PROFILE=link-check checks an unoptimised build instead
#   (quicker; scripts/release-build.sh says why it links the same glibc).
set -eu
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- amd64 arm64
floor=2.28
say() { echo "check-release: $*"; }
fail() { echo "check-release: error: $*" >&2; exit 1; }
sh scripts/install-deps.sh --build >&2
for p in rpm rpmlint lintian qemu-user-static binfmt-support mmdebstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done

# Foreign programs run through qemu-user's binfmt handlers.
binfmt() {
  [ -e /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  update-binfmts --enable qemu-aarch64 2>/dev/null || true
}

# in_overlay ROOT CMD: CMD (a shell command) in a throwaway overlay of ROOT,
# with the packages in $work/pkgs at /tmp/pkgs.
in_overlay() {
  o=$(mktemp -d)
  mkdir -p "$o/upper" "$o/work" "$o/merged"
  mount -t overlay overlay -o "lowerdir=$1,upperdir=$o/upper,workdir=$o/work" "$o/merged"
  mount -t proc proc "$o/merged/proc"
  mkdir -p "$o/merged/tmp/pkgs"
  cp "$work"/pkgs/* "$o/merged/tmp/pkgs/"
  cp /etc/resolv.conf "$o/merged/etc/resolv.conf" 2>/dev/null || true
  rc=0
  chroot "$o/merged" sh -euc "$2" || rc=$?
  umount "$o/merged/proc" "$o/merged"
  rm -rf "$o"
  return "$rc"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
# Every architecture's binary in one build, in the order named.
build_args=""
for arch in "$@"; do build_args="$build_args --arch $arch"; done
# shellcheck disable=SC2086
sh scripts/release-build.sh $build_args > "$work/binaries"
for arch in "$@"; do
  case "$arch" in
    amd64) machine=x86-64; rpm_arch=x86_64 ;;
    arm64) machine=aarch64; rpm_arch=aarch64; binfmt ;;
    *) fail "no release for $arch: use amd64 or arm64" ;;
  esac
  binary=$(sed -n 1p "$work/binaries"); sed -i 1d "$work/binaries"
  file -b "$binary" | grep -q "$machine" || fail "$binary is not an $machine ELF: $(file -b "$binary")"
  needed=$(readelf -V "$binary" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  dpkg --compare-versions "$needed" le "$floor" || fail "$arch: the binary needs GLIBC_$needed, over the floor $floor"
  ! readelf -V "$binary" | grep -q GLIBC_ABI_DT_RELR || fail "$arch: the binary needs GLIBC_ABI_DT_RELR (glibc 2.36)"
  say "$arch: $(file -b "$binary" | cut -d, -f1-2); newest glibc symbol GLIBC_$needed; no DT_RELR"
  plugin=$(dirname "$binary")/libspank_gpurun.so
  file -b "$plugin" | grep -q "$machine" || fail "$plugin is not an $machine ELF: $(file -b "$plugin")"
  needed=$(readelf -V "$plugin" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  dpkg --compare-versions "$needed" le "$floor" || fail "$arch: the SPANK plugin needs GLIBC_$needed, over the floor $floor"
  say "$arch: the SPANK plugin's newest glibc symbol GLIBC_$needed"
  rm -rf "$work/pkgs"; mkdir -p "$work/pkgs"
  deb=$(GPURUN_PACKAGE_BINARY="$binary" sh scripts/package-deb.sh --arch "$arch")
  rpm=$(GPURUN_PACKAGE_BINARY="$binary" sh scripts/package-rpm.sh --arch "$rpm_arch")
  cp "$deb" "$work/pkgs/gpurun.deb"; cp "$rpm" "$work/pkgs/gpurun.rpm"
  say "$arch: $(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"
  lintian --fail-on error --suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog,root-in-contact \
    "$deb" > "$work/lintian" 2>&1 || { cat "$work/lintian" >&2; fail "$arch: lintian reports errors"; }
  requires=$(rpm -qpR "$rpm" 2>/dev/null | grep -v '^rpmlib(')
  say "$rpm_arch: $(basename "$rpm"): Requires: $(echo "$requires" | grep -v '(GLIBC_' | tr '\n' ' ')and" \
    "$(echo "$requires" | grep -c '(GLIBC_') symbol versions, the newest" \
    "$(echo "$requires" | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)"
  rpm -qpl "$rpm" 2>/dev/null | grep -qx /usr/bin/gpurun || fail "$rpm_arch: the rpm has no /usr/bin/gpurun"
  rpm -qpl "$rpm" 2>/dev/null | grep -q '^/usr/share/man/man8/gpurun.8' || fail "$rpm_arch: the rpm has no man page"
  # Unsigned: a package built here has no key to be signed with.
  echo 'addFilter("no-signature")' > "$work/rpmlintrc"
  rpmlint -r "$work/rpmlintrc" "$rpm" > "$work/rpmlint" 2>&1 || true
  grep -q ' 0 errors' "$work/rpmlint" || { cat "$work/rpmlint" >&2; fail "$rpm_arch: rpmlint reports errors"; }
  root=$(sh scripts/fixtures/debian11-root.sh "$arch")
  glibc=$(chroot "$root" dpkg-query -W -f='${Version}' libc6)
  in_overlay "$root" 'apt-get install -y -qq /tmp/pkgs/gpurun.deb >/dev/null 2>&1 || apt-get install -y /tmp/pkgs/gpurun.deb
    gpurun --version > /tmp/version; head -1 /tmp/version; gpurun features > /tmp/features.json
    grep -q ociVersionMax /tmp/features.json' > "$work/deb-run" ||
    { cat "$work/deb-run" >&2; fail "$arch: the .deb does not install and run in Debian 11 (glibc $glibc)"; }
  say "$arch: .deb installed in Debian 11 (libc6 $glibc): $(head -1 "$work/deb-run"); features ok"
  # The rpm's own files, without its dependencies (a Debian root has no
  # rpm database of them): that the binary starts on glibc 2.31.
  in_overlay "$root" 'apt-get install -y -qq rpm >/dev/null 2>&1
    rpm -i --nodeps --noscripts /tmp/pkgs/gpurun.rpm
    gpurun --version > /tmp/version; head -1 /tmp/version; gpurun features > /tmp/features.json; grep -q ociVersionMax /tmp/features.json' > "$work/rpm-run" ||
    { cat "$work/rpm-run" >&2; fail "$rpm_arch: the .rpm's binary does not run in Debian 11"; }
  say "$rpm_arch: .rpm installed in Debian 11: $(head -1 "$work/rpm-run"); features ok"
done
say "every package checked: $*"
