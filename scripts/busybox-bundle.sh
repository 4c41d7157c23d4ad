#!/bin/sh
# Builds an OCI bundle at DIR whose rootfs is Debian's busybox-static, with
# a config.json from `gpurun spec` (or `gpurun spec --rootless` with -r).
# Usage: scripts/busybox-bundle.sh [-r] DIR [GPURUN]
set -eu
rootless=""
if [ "${1:-}" = "-r" ]; then rootless="--rootless"; shift; fi
dir=${1:?usage: busybox-bundle.sh [-r] DIR [GPURUN]}
gpurun=${2:-gpurun}
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "busybox-bundle.sh: $busybox missing: apt-get install -y busybox-static" >&2; exit 1; }
mkdir -p "$dir/rootfs/bin" "$dir/rootfs/proc" "$dir/rootfs/dev" "$dir/rootfs/sys" \
         "$dir/rootfs/tmp" "$dir/rootfs/etc" "$dir/rootfs/root"
cp "$busybox" "$dir/rootfs/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$dir/rootfs/bin/$applet" ] || ln -s busybox "$dir/rootfs/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' > "$dir/rootfs/etc/passwd"
echo 'root:x:0:' > "$dir/rootfs/etc/group"
rm -f "$dir/config.json"
(cd "$dir" && "$gpurun" spec $rootless)
# A container that needs no terminal: engines and tests give it pipes.
sed -i 's/"terminal": true/"terminal": false/' "$dir/config.json"
