#!/bin/sh
# Builds target/rpm/gpurun-<version>-1.<arch>.rpm (x86_64 or aarch64), for
# RHEL 8 and 9 and their rebuilds: the same files as the .deb
# (scripts/lib/package-files.sh: the glibc 2.28 release binary, man
# pages, completions, the CDI refresh units), the licence where RPM
# distributions keep it, and the Requires line rpmbuild computes from the
# binary's own ELF dependencies (never written by hand).
# Usage: sh scripts/package-rpm.sh [--arch x86_64|aarch64]   (prints the .rpm's path)
#   GPURUN_PACKAGE_BINARY=PATH packages that binary instead of a release build.
set -eu
cd "$(dirname "$0")/.."
arch=$(uname -m)
[ "${1:-}" = --arch ] && arch=${2:?--arch needs x86_64 or aarch64}
case "$arch" in
  x86_64) deb_arch=amd64 ;;
  aarch64) deb_arch=arm64 ;;
  *) echo "package-rpm.sh: error: no package for $arch: use --arch x86_64 or aarch64" >&2; exit 2 ;;
esac
. scripts/lib/package-files.sh
sh scripts/install-deps.sh --build >&2
command -v rpmbuild >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rpm >/dev/null
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
binary=$(release_binary "$deb_arch")
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
stage=$top/stage
mkdir -p "$stage"
stage_package_files "$stage" "$binary" /usr/share/zsh/site-functions
install -D -m 0644 LICENSE "$stage/usr/share/licenses/gpurun/LICENSE"
files=$(cd "$stage" && find . -type f | sed 's/^\.//' | sort)
mkdir -p "$top/SPECS"
cat > "$top/SPECS/gpurun.spec" <<SPEC
Name: gpurun
Version: $version
Release: 1
Summary: $package_summary
License: Apache-2.0
Group: System Environment/Base
# As the .deb: the project has no public address yet (SECURITY.md).
Packager: gpurun developers <root@localhost>
# The binary is built and stripped beforehand (scripts/release-build.sh):
# no debug package, no build-id links, none of the host's strip passes.
%global debug_package %{nil}
%global _build_id_links none
%global __os_install_post %{nil}
Recommends: criu
Suggests: squashfuse
Suggests: fuse-overlayfs
Suggests: squashfs-tools

%description
$package_description

%install
cp -a $stage/. %{buildroot}/

%postun
if [ "\$1" -eq 0 ]; then
$package_remove_script
fi

%changelog
* $(LC_ALL=C date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" '+%a %b %d %Y') gpurun developers <root@localhost> - $version-1
- See /usr/share/doc/gpurun/CHANGELOG.md.

%files
%license /usr/share/licenses/gpurun/LICENSE
$(echo "$files" | grep -v '^/usr/share/licenses/')
SPEC
rpmbuild --quiet -bb --target "$arch" --define "_topdir $top" "$top/SPECS/gpurun.spec" >&2
mkdir -p target/rpm
rpm=target/rpm/gpurun-$version-1.$arch.rpm
cp "$top/RPMS/$arch/gpurun-$version-1.$arch.rpm" "$rpm"
echo "$rpm"
