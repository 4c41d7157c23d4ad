#!/bin/sh
# Builds target/debian/gpurun_<version>_<arch>.deb (amd64 or arm64): the
# glibc 2.28 release binary (scripts/release-build.sh) in /usr/bin
# (root-owned, 0755), its man pages, completions, README, CHANGELOG, an
# example config and the CDI refresh units (scripts/lib/package-files.sh).
# Every file is dpkg's, and the postrm removes gpurun's driver cache from
# /run/gpurun: `apt-get remove gpurun` leaves nothing. The Depends line is
# computed from the binary (dpkg-shlibdeps, against the architecture's own
# libraries in the cross root), never written by hand.
# Usage: sh scripts/package-deb.sh [--arch amd64|arm64]   (prints the .deb's path)
#   GPURUN_PACKAGE_BINARY=PATH packages that binary (stripped) instead of a
#   release build, with fast compression: for the package checks
#   (scripts/ci/check-deb.sh), which need no release build.
set -eu
cd "$(dirname "$0")/.."
arch=$(dpkg --print-architecture)
[ "${1:-}" = --arch ] && arch=${2:?--arch needs amd64 or arm64}
case "$arch" in
  amd64|arm64) ;;
  *) echo "package-deb.sh: error: no package for $arch: use --arch amd64 or arm64" >&2; exit 2 ;;
esac
. scripts/lib/package-files.sh
sh scripts/install-deps.sh --build >&2
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
compress="-Zxz"
[ -z "${GPURUN_PACKAGE_BINARY:-}" ] || compress="-Zgzip -z1"
binary=$(release_binary "$arch")
out=target/debian
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
chmod 755 "$pkg"
stage_package_files "$pkg" "$binary" /usr/share/zsh/vendor-completions
doc="$pkg/usr/share/doc/gpurun"
# Machine-readable copyright (DEP-5), naming Debian's copy of the licence.
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: gpurun

Files: *
Copyright: 2026 gpurun developers
License: Apache-2.0
 On Debian systems the full text of the Apache License, Version 2.0, is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT
chmod 644 "$doc/copyright"
# A native package's changelog, in Debian's form; CHANGELOG.md has the rest.
stamp=$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
printf 'gpurun (%s) unstable; urgency=medium\n\n  * See /usr/share/doc/gpurun/CHANGELOG.md.\n\n -- gpurun developers <root@localhost>  %s\n' \
  "$version" "$stamp" | gzip -9n > "$doc/changelog.gz"
chmod 644 "$doc/changelog.gz"
# The Rust binary is static in its Rust crates, one of which (unsafe-libyaml,
# for CDI's YAML specs) is libyaml translated to Rust: not a copy to share.
install -D -m 0644 /dev/stdin "$pkg/usr/share/lintian/overrides/gpurun" <<OVERRIDES
gpurun: embedded-library libyaml [usr/bin/gpurun]
gpurun: hardening-no-pie [usr/bin/gpurun]
OVERRIDES
mkdir -p "$pkg/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
# The libraries the binary links and the versions of their symbols it
# uses, as dpkg-shlibdeps reads them (it wants a debian/control to run
# in), against the package architecture's own libraries: this host's for
# its own architecture, the cross root's (which has both) for another.
shlib="target/debian/shlibdeps-$arch"
rm -rf "$shlib"; mkdir -p "$shlib/debian"
printf 'Source: gpurun\n\nPackage: gpurun\nArchitecture: %s\n' "$arch" > "$shlib/debian/control"
cp "$pkg/usr/bin/gpurun" "$shlib/gpurun"
if [ "$arch" = "$(dpkg --print-architecture)" ]; then
  depends=$(cd "$shlib" && dpkg-shlibdeps -O gpurun 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
else
  depends=$(sh scripts/fixtures/cross-root.sh enter sh -c "cd $shlib && dpkg-shlibdeps -O gpurun" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
fi
rm -rf "$shlib"
[ -n "$depends" ] || { echo "package-deb.sh: error: dpkg-shlibdeps found no dependencies of the binary" >&2; exit 1; }
# The libc6 clause is the binary's own glibc floor (2.28 for a release
# build): Debian's symbols files since 2.34 date every libpthread, libdl
# and libutil symbol 2.34, where they moved into libc, which would keep
# the package off older systems the binary runs on.
depends=$(echo "$depends" | sed "s/libc6 (>= [^)]*)/libc6 (>= $(glibc_floor "$pkg/usr/bin/gpurun"))/")
# The project has no public home with an address yet: a package built from
# this script is the builder's, whose local root is its maintainer
# (SECURITY.md says where reports go meanwhile).
description=$(echo "$package_description" | sed 's/^/ /')
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: gpurun
Version: $version
Architecture: $arch
Maintainer: gpurun developers <root@localhost>
Installed-Size: $size
Depends: $depends
Recommends: criu
Suggests: squashfuse, fuse-overlayfs, squashfs-tools
Section: admin
Priority: optional
Description: $package_summary
$description
CONTROL
printf '#!/bin/sh\nset -e\nif [ "$1" = remove ] || [ "$1" = purge ]; then\n%s\nfi\n' \
  "$package_remove_script" > "$pkg/DEBIAN/postrm"
chmod 755 "$pkg/DEBIAN/postrm"
mkdir -p "$out"
deb="$out/gpurun_${version}_$arch.deb"
# shellcheck disable=SC2086
dpkg-deb --root-owner-group $compress --build "$pkg" "$deb" >/dev/null
echo "$deb"
