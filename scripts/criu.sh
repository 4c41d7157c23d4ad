#!/bin/sh
# Prints the path of a CRIU that works on this kernel, for checkpoint and
# restore (gpurun --criu PATH). Debian 12's criu 3.17 fails `criu check` on
# recent kernels (it cannot parse their vDSO), so unless the system's criu
# passes, CRIU 4.1 and the libraries it needs come from Debian 13 (trixie),
# downloaded with a private sources list (never installed into the system),
# unpacked under the cache and run through their own dynamic loader.
# With --gpu the system's criu counts only if it is CRIU 4 or later, as
# GPU containers need.
# Usage: scripts/criu.sh [--gpu]   (as root; prints the criu path)
set -eu
cache=${GPURUN_CRIU_CACHE:-/var/cache/gpurun-criu}
major() { "$1" --version 2>/dev/null | sed -n 's/^Version: \([0-9]*\)\..*/\1/p'; }
if command -v criu >/dev/null 2>&1 && criu check >/dev/null 2>&1 &&
  { [ "${1:-}" != --gpu ] || [ "$(major criu)" -ge 4 ] 2>/dev/null; }; then
  command -v criu
  exit 0
fi
wrapper="$cache/criu"
if [ -x "$wrapper" ] && "$wrapper" check >/dev/null 2>&1; then
  echo "$wrapper"
  exit 0
fi
packages="criu libcompel1 libc6 libgcc-s1 gcc-14-base libbsd0 libmd0 libgnutls30t64 \
  libgmp10 libhogweed6t64 libnettle8t64 libidn2-0 libunistring5 libp11-kit0 libffi8 \
  libtasn1-6 libnet1 libnftables1 libnftnl11 libmnl0 libjansson4 libxtables12 \
  libnl-3-200 libprotobuf-c1 libuuid1"
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$cache/debs"
# The system's own mirror (a proxy or a local mirror serves), suite trixie.
mirror=$(sh "$(dirname "$0")/debian-mirror.sh")
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
  > "$apt_dir/sources.list"
apt_opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir -o Dir::State::status=/dev/null \
  -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get -qq $apt_opts update >/dev/null
# shellcheck disable=SC2086
(cd "$cache/debs" && apt-get -qq $apt_opts download $packages >/dev/null)
rm -rf "$cache/root"
for deb in "$cache/debs/"*.deb; do dpkg-deb -x "$deb" "$cache/root"; done
lib="$cache/root/usr/lib/x86_64-linux-gnu"
cat > "$wrapper" <<EOF
#!/bin/sh
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$cache/root/usr/sbin/criu" "\$@"
EOF
chmod 755 "$wrapper"
"$wrapper" check >/dev/null 2>&1 || {
  echo "criu.sh: CRIU 4.1 does not pass 'criu check' on this kernel either:" >&2
  "$wrapper" check >&2 || true
  exit 1
}
echo "$wrapper"
