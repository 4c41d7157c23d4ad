#!/bin/sh
# Builds target/debian/gpurun_<version>_amd64.deb: the release binary in
# /usr/bin (root-owned, 0755), gpurun(8) and one page per command, bash,
# zsh and fish completions (all generated from the binary's own command
# definitions, so they cannot drift), an example config, README, LICENSE
# and CHANGELOG. Every file is dpkg's, and the postrm removes gpurun's
# driver cache from /run/gpurun: `apt-get remove gpurun` leaves nothing.
# Usage: scripts/package-deb.sh   (prints the .deb's path)
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh --build >&2
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cargo build --locked --release -p gpurun >&2
out=target/debian
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
chmod 755 "$pkg"
install -D -m 0755 target/release/gpurun "$pkg/usr/bin/gpurun"
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
install -D -m 0644 LICENSE "$doc/copyright"
install -D -m 0644 examples/config.toml "$doc/examples/config.toml"
mkdir -p "$pkg/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: gpurun
Version: $version
Architecture: amd64
Maintainer: gpurun developers <gpurun@localhost>
Installed-Size: $size
Depends: libc6 (>= 2.34), libseccomp2 (>= 2.5)
Recommends: criu
Section: admin
Priority: optional
Homepage: https://github.com/gpurun/gpurun
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
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
