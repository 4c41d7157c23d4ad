#!/bin/sh
# Builds a minimal glibc rootfs at DIR from the host's own glibc, busybox
# and ldconfig: enough to run nvidia-smi and ldconfig -p, laid out like
# Debian (merged /usr, libraries in /usr/lib/x86_64-linux-gnu), with its
# own /etc/ld.so.cache. With `rhel`, laid out as RHEL and UBI images are:
# the libraries in /usr/lib64, no /usr/lib/x86_64-linux-gnu.
# Usage: scripts/glibc-rootfs.sh DIR [debian|rhel]
set -eu
dir=${1:?usage: glibc-rootfs.sh DIR [debian|rhel]}
case ${2:-debian} in
  debian) multiarch=/usr/lib/x86_64-linux-gnu ;;
  rhel) multiarch=/usr/lib64 ;;
  *) echo "glibc-rootfs.sh: layout is debian or rhel" >&2; exit 2 ;;
esac
mkdir -p "$dir$multiarch" "$dir/usr/lib" "$dir/usr/bin" "$dir/usr/sbin" "$dir/usr/lib64" "$dir/etc" \
  "$dir/proc" "$dir/dev" "$dir/sys" "$dir/tmp" "$dir/root" "$dir/run"
for link in bin:usr/bin sbin:usr/sbin lib:usr/lib lib64:usr/lib64; do
  [ -e "$dir/${link%%:*}" ] || ln -s "${link#*:}" "$dir/${link%%:*}"
done
for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$dir$multiarch/$lib"
done
[ -e "$dir/usr/lib64/ld-linux-x86-64.so.2" ] ||
  ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$dir/usr/lib64/ld-linux-x86-64.so.2"
cp /bin/busybox "$dir/usr/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$dir/usr/bin/$applet" ] || ln -s busybox "$dir/usr/bin/$applet"
done
cp -L /sbin/ldconfig "$dir/usr/sbin/ldconfig"
echo 'root:x:0:0:root:/root:/bin/sh' > "$dir/etc/passwd"
echo 'root:x:0:' > "$dir/etc/group"
echo "$multiarch" > "$dir/etc/ld.so.conf"
ldconfig -r "$dir"
