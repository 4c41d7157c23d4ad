#!/bin/sh
# Builds target/debian/gpurun_<version>_amd64.deb: the release binary in
# /usr/bin (root-owned, 0755), gpurun(8) and one page per command, bash,
# zsh and fish completions (all generated from the binary's own command
# definitions, so they cannot drift), an example config, README, LICENSE
# and CHANGELOG. Every file is dpkg's, and the postrm removes gpurun's
# driver cache from /run/gpurun: `apt-get remove gpurun` leaves nothing.
# The Depends line is computed from the binary (dpkg-shlibdeps), never
# written by hand.
# Usage: scripts/package-deb.sh   (prints the .deb's path)
#   GPURUN_DEB_BINARY=PATH packages that binary (stripped) instead of a
#   release build, with fast compression: for the package checks
#   (scripts/ci/check-deb.sh), which need no release build.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh --build >&2
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
binary=${GPURUN_DEB_BINARY:-}
compress="-Zxz"
if [ -z "$binary" ]; then
  cargo build --locked --release -p gpurun >&2
  binary=target/release/gpurun
else
  compress="-Zgzip -z1"
fi
out=target/debian
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
chmod 755 "$pkg"
install -D -m 0755 "$binary" "$pkg/usr/bin/gpurun"
strip --strip-unneeded "$pkg/usr/bin/gpurun"
"$pkg/usr/bin/gpurun" generate-docs "$pkg/gen"
mkdir -p "$pkg/usr/share/man/man8"
for page in "$pkg"/gen/man/*.8; do
  gzip -9n -c "$page" > "$pkg/usr/share/man/man8/$(basename "$page").gz"
done
install -D -m 0644 "$pkg/gen/completions/gpurun.bash" "$pkg/usr/share/bash-completion/completions/gpurun"
install -D -m 0644 "$pkg/gen/completions/_gpurun" "$pkg/usr/share/zsh/vendor-completions/_gpurun"
install -D -m 0644 "$pkg/gen/completions/gpurun.fish" "$pkg/usr/share/fish/vendor_completions.d/gpurun.fish"
rm -rf "$pkg/gen"
doc="$pkg/usr/share/doc/gpurun"
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 CHANGELOG.md "$doc/CHANGELOG.md"
install -D -m 0644 examples/config.toml "$doc/examples/config.toml"
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
# The CDI spec kept current, as the toolkit's nvidia-cdi-refresh does:
# written at boot (/var/run is a tmpfs) and again when a driver install
# runs depmod. `systemctl enable --now gpurun-cdi-refresh.service
# gpurun-cdi-refresh.path` turns it on; after a MIG change, `systemctl
# start gpurun-cdi-refresh.service` (or `gpurun gpu cdi --check`).
units="$pkg/usr/lib/systemd/system"
install -D -m 0644 /dev/stdin "$units/gpurun-cdi-refresh.service" <<UNIT
[Unit]
Description=Write gpurun's CDI spec for this host's NVIDIA GPUs and driver
Documentation=man:gpurun-gpu(8)
ConditionPathExists=/proc/driver/nvidia/version
After=systemd-modules-load.service nvidia-persistenced.service

[Service]
Type=oneshot
ExecStart=/usr/bin/gpurun gpu cdi -o /var/run/cdi/nvidia.yaml

[Install]
WantedBy=multi-user.target
UNIT
install -D -m 0644 /dev/stdin "$units/gpurun-cdi-refresh.path" <<UNIT
[Unit]
Description=Rewrite gpurun's CDI spec when the NVIDIA driver changes

[Path]
PathChanged=/lib/modules/%v/modules.dep
Unit=gpurun-cdi-refresh.service

[Install]
WantedBy=paths.target
UNIT
# The Rust binary is static in its Rust crates, one of which (unsafe-libyaml,
# for CDI's YAML specs) is libyaml translated to Rust: not a copy to share.
install -D -m 0644 /dev/stdin "$pkg/usr/share/lintian/overrides/gpurun" <<OVERRIDES
gpurun: embedded-library libyaml [usr/bin/gpurun]
gpurun: hardening-no-pie [usr/bin/gpurun]
OVERRIDES
mkdir -p "$pkg/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
# The libraries the binary links and the versions of their symbols it
# uses, as dpkg-shlibdeps reads them (it wants a debian/control to run in).
shlib=$(mktemp -d)
mkdir -p "$shlib/debian"
printf 'Source: gpurun\n\nPackage: gpurun\nArchitecture: amd64\n' > "$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps -O "$pkg/usr/bin/gpurun" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlib"
[ -n "$depends" ] || { echo "package-deb.sh: error: dpkg-shlibdeps found no dependencies of the binary" >&2; exit 1; }
# Packed relative relocations (.cargo/config.toml) need glibc 2.36's
# loader, a version the binary names without a symbol, which
# dpkg-shlibdeps does not count.
if readelf -V "$pkg/usr/bin/gpurun" | grep -q GLIBC_ABI_DT_RELR; then
  libc=$(echo "$depends" | sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p')
  if [ -z "$libc" ] || dpkg --compare-versions "$libc" lt 2.36; then
    depends=$(echo "$depends" | sed 's/libc6 (>= [^)]*)/libc6 (>= 2.36)/')
  fi
fi
# The project has no public home with an address yet: a package built from
# this script is the builder's, whose local root is its maintainer
# (SECURITY.md says where reports go meanwhile).
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: gpurun
Version: $version
Architecture: amd64
Maintainer: gpurun developers <root@localhost>
Installed-Size: $size
Depends: $depends
Recommends: criu
Section: admin
Priority: optional
Description: OCI container runtime with native NVIDIA GPU support
 A runc-compatible runtime (containerd, Docker, Podman,
 Slurm, LXC) that injects NVIDIA GPUs itself: no hook process and no NVIDIA
 Container Toolkit on the host, rootless and in user namespaces, with
 NVIDIA's CDI hooks carried out natively.
CONTROL
# gpurun's driver cache in the default state root is its own; the
# containers' state there is not, and stays while they run.
cat > "$pkg/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  rm -rf /run/gpurun/@driver-cache
  rmdir /run/gpurun 2>/dev/null || true
fi
POSTRM
chmod 755 "$pkg/DEBIAN/postrm"
mkdir -p "$out"
deb="$out/gpurun_${version}_amd64.deb"
# shellcheck disable=SC2086
dpkg-deb --root-owner-group $compress --build "$pkg" "$deb" >/dev/null
echo "$deb"
