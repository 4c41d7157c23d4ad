#!/bin/sh
# Boots one of Debian's kernels in a VM and runs a command there as root;
# exits with the command's status. The host shapes GPU machines have and
# this one does not: another kernel, pure cgroup v2 with every controller
# enabled for children, no systemd.
#
#   sh scripts/vm.sh [--systemd] [--systemd-root bookworm|unstable] [--mem MB] [--timeout S] KERNEL [--] COMMAND [ARGS...]
#   sh scripts/vm.sh --arch arm64 --root DIR [--mem MB] [--timeout S] KERNEL [--] COMMAND [ARGS...]
#
# --systemd: systemd is PID 1 (unified cgroups), with containerd, dockerd
# and Podman from Debian on a small root image of its own (mmdebstrap,
# built once into the cache; each boot's writes are discarded); this
# machine's root is at /host, and the checkout, the fake-host cache and
# the kernel's modules are bound to their own paths. The command runs from
# a unit once the system is up. --systemd-root unstable: the same from
# Debian unstable (today's containerd 2, Docker 28, Podman 5 with Quadlet,
# runc 1.3, crun; no Slurm), from the system's own mirror.
#
# --arch arm64: an aarch64 guest (qemu-system-aarch64, the virt machine)
# whose root is DIR, an arm64 userland with busybox-static (an mmdebstrap
# root), read-only under a tmpfs overlay as this machine's / is for x86;
# this machine's / is at /host, and the checkout and the fake-host cache
# are at their own paths, writable through overlays. KERNEL is then 6.1
# (bookworm's arm64, 4K pages), 16k (unstable's arm64-16k, 16K pages) or
# a package name; the kernel packages come from the system's own mirror
# through a private sources list.
#
# KERNEL: 6.1 (bookworm's), 6.12 (bookworm's 6.12 series), or a
# linux-image-* package name. The guest's root is this machine's own /,
# read-only over 9p under a tmpfs overlay (so it sees this checkout, its
# build and the caches of earlier runs, and changes nothing here), with
# fresh /tmp, /run and /dev; the kernel's own modules are at
# /lib/modules/$(uname -r). The command runs in the current directory with
# PATH, HOME, RUST_BACKTRACE and every GPURUN_* variable passed on; its
# output is the guest console's. No network.
#
# The kernel package is downloaded (never installed) into
# /var/cache/gpurun-vm with an initramfs of busybox and the modules the
# 9p root needs; qemu-system-x86 is installed if missing. Software
# emulation (TCG): nested KVM does not boot stock kernels on these VMs.
set -eu
# A root tree to remove, perhaps one an interrupted mmdebstrap left with
# the host's proc, sys or dev still mounted in it: those mounts come off
# first, and rm stays on the tree's own filesystem, so it never reaches a
# host file through them.
remove_tree() { # DIR
  [ -e "$1" ] || return 0
  awk -v t="$1/" 'index($2, t) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$1"
}
mem=6144
limit=2400
systemd="" suite=bookworm arch=amd64 root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --systemd) systemd=1; shift ;;
    --systemd-root) systemd=1 suite=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) break ;;
  esac
done
case "$suite" in bookworm | unstable) ;; *) echo "vm.sh: --systemd-root is bookworm or unstable, not $suite" >&2; exit 2 ;; esac
case "$arch" in
  amd64) [ -z "$root" ] || { echo "vm.sh: --root is for --arch arm64 (an x86 guest's root is this machine's /)" >&2; exit 2; } ;;
  arm64)
    [ -z "$systemd" ] || { echo "vm.sh: --systemd is for x86 guests only" >&2; exit 2; }
    [ -x "${root:-/nonexistent}/bin/busybox" ] ||
      { echo "vm.sh: --arch arm64 needs --root DIR, an arm64 root with busybox-static (DIR/bin/busybox)" >&2; exit 2; }
    root=$(cd "$root" && pwd) ;;
  *) echo "vm.sh: --arch is amd64 or arm64, not $arch" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "usage: vm.sh [--systemd] [--systemd-root bookworm|unstable] [--mem MB] [--timeout S] KERNEL [--] COMMAND [ARGS...]" >&2; exit 2; }
kernel=$1
shift
[ "$1" = "--" ] && shift
[ "$(id -u)" = 0 ] || { echo "vm.sh: run as root (it downloads kernels and boots qemu)" >&2; exit 2; }

cache=${GPURUN_VM_CACHE:-/var/cache/gpurun-vm}
mkdir -p "$cache"

qemu=qemu-system-x86_64 qemu_package=qemu-system-x86
[ "$arch" = amd64 ] || qemu=qemu-system-aarch64 qemu_package=qemu-system-arm
if ! command -v "$qemu" >/dev/null || ! command -v cpio >/dev/null \
  || ! command -v depmod >/dev/null || ! command -v busybox >/dev/null; then
  # This image ships backports' qemu-utils 10.0, which bookworm's
  # qemu-system-x86 conflicts with: take the qemu-utils of the same version.
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  version=$(apt-cache policy "$qemu_package" | awk '/Candidate:/ {print $2}')
  apt-get install -y -qq --allow-downgrades "$qemu_package" "qemu-utils=$version" \
    cpio kmod xz-utils busybox-static >/dev/null
fi

# apt for the guest's kernel: the system's own for x86; for arm64, a
# private sources list (bookworm and unstable, arm64 only) on the system's
# mirror, its lists kept in the cache.
apt_opts=""
if [ "$arch" = arm64 ]; then
  apt_dir="$cache/apt-arm64"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  mirror=$(sh "$(dirname "$0")/fixtures/debian-mirror.sh")
  for s in bookworm unstable; do
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main"
  done > "$apt_dir/sources.list"
  apt_opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache -o APT::Architecture=arm64
    -o APT::Architectures=arm64 -o Acquire::Check-Valid-Until=false"
fi
case "$arch:$kernel" in
  amd64:6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
  amd64:6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
  arm64:6.1) pattern='^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' ;;
  # Unstable's kernel comes as an image and a modules package.
  arm64:16k) pattern='^linux-binary-[0-9.]+\+deb[0-9]+-arm64-16k$' ;;
  *:linux-image-* | arm64:linux-binary-*) pattern="^$(echo "$kernel" | sed 's/[.+]/\\&/g')\$" ;;
  *) echo "vm.sh: unknown kernel '$kernel' for $arch: use 6.1, 6.12 (amd64), 16k (arm64) or a package name" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
package=$(apt-cache $apt_opts search --names-only "$pattern" | awk '{print $1}' | sort -V | tail -1)
if [ -z "$package" ]; then
  # shellcheck disable=SC2086
  apt-get $apt_opts update -qq
  # shellcheck disable=SC2086
  package=$(apt-cache $apt_opts search --names-only "$pattern" | awk '{print $1}' | sort -V | tail -1)
fi
[ -n "$package" ] || { echo "vm.sh: no Debian package matches $pattern" >&2; exit 2; }
packages=$package
case "$package" in linux-binary-*) packages="$package linux-modules-${package#linux-binary-}" ;; esac

dir="$cache/$package"
if [ ! -f "$dir/ready-3" ]; then
  rm -rf "$dir"
  mkdir -p "$dir/deb" "$dir/root"
  # shellcheck disable=SC2086
  (cd "$dir/deb" && apt-get $apt_opts -o APT::Sandbox::User=root download $packages >/dev/null)
  for deb in "$dir"/deb/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
  # Unstable's packages keep modules (and the image) in /usr/lib/modules.
  [ -d "$dir/root/lib/modules" ] || ln -s usr/lib "$dir/root/lib"
  release=$(ls "$dir/root/lib/modules")
  # The guest's modprobe reads modules.dep (the package's postinst makes it).
  depmod -b "$dir/root" "$release"
  # An initramfs: busybox, and the modules the 9p root and its overlay need,
  # in load order; uncompressed, since busybox's insmod reads only plain .ko.
  initramfs="$dir/initramfs"
  mkdir -p "$initramfs/bin" "$initramfs/modules" "$initramfs/proc" "$initramfs/sys" \
    "$initramfs/dev" "$initramfs/lower" "$initramfs/rw" "$initramfs/newroot"
  if [ "$arch" = amd64 ]; then cp "$(command -v busybox)" "$initramfs/bin/busybox"; else cp "$root/bin/busybox" "$initramfs/bin/busybox"; fi
  : > "$initramfs/modules/order"
  # What the 9p root, its overlay and the systemd guest's ext4 disk need,
  # with their dependencies in load order, as this kernel's modprobe sees
  # them.
  for m in virtio_pci 9pnet_virtio 9p overlay virtio_blk ext4; do
    # (A module built in, or absent here, is not listed: the mount says so.)
    modprobe -d "$dir/root" -S "$release" --show-depends "$m" 2>/dev/null || true
  done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
    m=$(basename "$ko"); m=${m%.xz}; m=${m%.ko}
    case "$ko" in
      *.xz) xz -dc "$ko" > "$initramfs/modules/$m.ko" ;;
      *) cp "$ko" "$initramfs/modules/$m.ko" ;;
    esac
    echo "$m" >> "$initramfs/modules/order"
  done
  cat > "$initramfs/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "vm init: insmod $m failed"; done
if grep -q gpurun.systemd /proc/cmdline; then
  # systemd as PID 1 on the root image's disk (its writes are discarded by
  # qemu), this machine's root read-only at /host.
  mount -t ext4 /dev/vda /newroot
  mkdir -p /newroot/host /newroot/vmshare
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot/host
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmshare /newroot/vmshare
  umount /proc /sys /dev
  exec switch_root /newroot /lib/systemd/systemd
fi
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work root /newroot
mkdir -p /newroot/vmshare
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmshare /newroot/vmshare
if grep -q gpurun.hostfs /proc/cmdline; then
  # A guest whose root is not this machine's: this machine's root at /host.
  mkdir -p /newroot/host
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostfs /newroot/host
fi
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh /vmshare/stage2
echo "vm init: switch_root failed"
echo o > /proc/sysrq-trigger
INIT
  chmod +x "$initramfs/init"
  (cd "$initramfs" && find . | cpio -o -H newc --quiet | gzip -1) > "$dir/initrd.gz"
  rm -rf "$initramfs"
  echo "$release" > "$dir/release"
  touch "$dir/ready-3"
fi
release=$(cat "$dir/release")

# The systemd guest's root image: Debian's systemd, containerd, Docker,
# Podman, runc and Slurm (mmdebstrap), a unit that runs /vmshare/stage2 once the
# system is up, nothing else started that the tests do not need. Built once.
systemd_image() {
  common=systemd,systemd-sysv,dbus,apparmor,dbus-user-session,udev,kmod,iproute2,runc,containerd,docker.io,podman,uidmap,procps,util-linux,busybox-static,ca-certificates,jq,python3
  if [ "$suite" = bookworm ]; then
    image="$cache/systemd-root-7.img" packages="$common,slurmd,slurmctld,slurm-client,munge,libpmix-dev,fuse3,squashfuse,fuse-overlayfs,squashfs-tools" mirror="" opts=""
  else
    image="$cache/systemd-unstable-2.img" packages="$common,docker-cli,crun,conmon,netavark,catatonit,passwd,time"
    mirror=$(sh "$(dirname "$0")/fixtures/debian-mirror.sh")
    # Unstable's Release file can be past its Valid-Until on a late mirror.
    opts='Acquire::Check-Valid-Until "false"'
  fi
  if [ ! -f "$image" ]; then
    command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap >/dev/null
    tree="$cache/systemd-root.tmp"
    remove_tree "$tree"
    # shellcheck disable=SC2086
    mmdebstrap --quiet --variant=minbase ${opts:+--aptopt="$opts"} --include="$packages" \
      "$suite" "$tree" $mirror >&2
    cat > "$tree/etc/systemd/system/gpurun-vm.service" <<'UNIT'
[Unit]
Description=The command vm.sh was given
Wants=containerd.service docker.service
After=containerd.service docker.service systemd-user-sessions.service
[Service]
Type=oneshot
ExecStart=/bin/sh /vmshare/stage2
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
[Install]
WantedBy=multi-user.target
UNIT
    ln -s /etc/systemd/system/gpurun-vm.service "$tree/etc/systemd/system/multi-user.target.wants/"
    for unit in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
      e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service; do
      ln -sf /dev/null "$tree/etc/systemd/system/$unit"
    done
    mkdir -p "$tree/etc/docker"
    echo '{"exec-opts": ["native.cgroupdriver=systemd"], "bridge": "none", "iptables": false, "ip-masq": false}' \
      > "$tree/etc/docker/daemon.json"
    echo gpurun-vm > "$tree/etc/hostname"
    : > "$tree/etc/fstab"
    mke2fs -q -t ext4 -d "$tree" -L gpurun-root "$image.tmp" 3G >&2
    # An image whose package list changed replaces its earlier version.
    [ "$suite" = bookworm ] || rm -f "$cache/systemd-$suite-"*.img
    mv "$image.tmp" "$image"
    remove_tree "$tree"
  fi
  echo "$image"
}

# Stage 2's lines for a guest whose root is not this machine's (systemd's
# image, an arm64 root): the checkout and the caches at their own paths,
# from this machine's / at /host, writable through a tmpfs overlay (what the
# guest writes there is discarded).
checkout_overlays() {
  cat <<'STAGE2'
mount -t tmpfs -o mode=0700 vm-overlays /run/vm-overlays 2>/dev/null \
  || { mkdir -p /run/vm-overlays && mount -t tmpfs -o mode=0700 vm-overlays /run/vm-overlays; }
n=0
for path in "$top" /var/cache/gpurun-fake-host /var/cache/gpurun-vm /var/cache/gpurun-criu; do
  [ -d "/host$path" ] || continue
  n=$((n + 1))
  mkdir -p "$path" "/run/vm-overlays/$n/upper" "/run/vm-overlays/$n/work"
  mount -t overlay -o "lowerdir=/host$path,upperdir=/run/vm-overlays/$n/upper,workdir=/run/vm-overlays/$n/work" \
    vm-overlay "$path"
done
STAGE2
}

share=$(mktemp -d /tmp/gpurun-vm.XXXXXX)
trap 'rm -rf "$share"' EXIT
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
top=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
{
  echo '#!/bin/sh'
  # (A root without merged /usr keeps mount in /bin.)
  echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  if [ "$arch" = amd64 ]; then
    echo "modules=$(quote "$dir/root/lib/modules/$release")"
  else
    echo "modules=$(quote "/host$dir/root/lib/modules/$release")"
  fi
  echo "top=$(quote "$top")"
  if [ -n "$systemd" ]; then
    checkout_overlays
    cat <<'STAGE2'
# The kernel's modules.
mkdir -p "/lib/modules/$(uname -r)"
mount --bind "/host$modules" "/lib/modules/$(uname -r)"
hostname gpurun-vm
# No network: the name must resolve without DNS, and getaddrinfo's
# AI_ADDRCONFIG wants one address besides loopback's (munge, Slurm).
grep -q gpurun-vm /etc/hosts || echo "127.0.1.1 gpurun-vm" >> /etc/hosts
{ ip link add vm0 type dummy && ip addr add 10.0.2.15/24 dev vm0 && ip link set vm0 up; } 2>/dev/null || true
STAGE2
  else
    cat <<'STAGE2'
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts /dev/pts
ln -sf pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t mqueue mqueue /dev/mqueue
# The fake GPU hosts the tests copy here take ~250 MB each.
mount -t tmpfs -o mode=1777,size=4g tmp /tmp
mount -t tmpfs -o mode=0755 run /run
mkdir -p /run/lock /run/user
# Pure cgroup v2, every controller enabled for children (a v1 mount made
# now would take controllers away from it).
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
  echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control || echo "vm: controller $c not enabled"
done
# A child with every controller for the guest's life: the static keys
# behind them (cpuset's above all) stay on instead of being patched into
# the kernel's text at each container's first and last cgroup: under
# multi-threaded TCG, text patching has oopsed guests (invalid opcode in a
# jump just patched).
mkdir -p /sys/fs/cgroup/vm-keys
mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
mkdir -p "/lib/modules/$(uname -r)"
mount --bind "$modules" "/lib/modules/$(uname -r)"
ip link set lo up 2>/dev/null || true
hostname gpurun-vm
# No network: the name must resolve without DNS, and getaddrinfo's
# AI_ADDRCONFIG wants one address besides loopback's (munge, Slurm).
grep -q gpurun-vm /etc/hosts || echo "127.0.1.1 gpurun-vm" >> /etc/hosts
{ ip link add vm0 type dummy && ip addr add 10.0.2.15/24 dev vm0 && ip link set vm0 up; } 2>/dev/null || true
echo 1 > /proc/sys/kernel/printk_ratelimit 2>/dev/null || true
STAGE2
  fi
  [ "$arch" = amd64 ] || checkout_overlays
  # (An arm64 guest's root has none of this machine's own programs.)
  path=PATH
  [ "$arch" = amd64 ] || path=""
  for var in $path HOME RUST_BACKTRACE $(env | sed -n 's/^\(GPURUN_[A-Za-z0-9_]*\)=.*/\1/p'); do
    eval "value=\${$var-}"
    [ -n "$value" ] && echo "export $var=$(quote "$value")"
  done
  echo "cd $(quote "$PWD")"
  printf 'echo "vm: $(uname -r), PID 1 $(cat /proc/1/comm), cgroup v2 controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"\n'
  printf '('
  for arg in "$@"; do printf ' %s' "$(quote "$arg")"; done
  printf ' ) </dev/null\n'
  cat <<'STAGE2'
echo $? > /vmshare/rc
sync
# Power off is asynchronous: PID 1 must not exit before it lands.
echo o > /proc/sysrq-trigger
sleep 60
STAGE2
} > "$share/stage2"

# MTTCG: two guest CPUs on two threads. The console is the guest's serial
# port on our stdout; the command's status comes back through the share.
console=ttyS0
[ "$arch" = amd64 ] || console=ttyAMA0
cmdline="console=$console quiet loglevel=4 panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"
disk=""
if [ -n "$systemd" ]; then
  image=$(systemd_image)
  cmdline="$cmdline gpurun.systemd systemd.show_status=0"
  disk="-drive file=$image,format=raw,if=virtio,snapshot=on"
fi
# The machine, and the guest's root (this machine's / for x86).
kernel_image="$dir/root/boot/vmlinuz-$release"
[ -f "$kernel_image" ] || kernel_image="$dir/root/lib/modules/$release/vmlinuz"
machine="-cpu max" guest_root=/
if [ "$arch" = arm64 ]; then
  # pauth-impdef: TCG's pointer authentication without the costly QARMA.
  machine="-M virt -cpu max,pauth-impdef=on" guest_root=$root
  cmdline="$cmdline gpurun.hostfs"
  disk="-virtfs local,path=/,mount_tag=hostfs,security_model=none,readonly=on,multidevs=remap"
fi
status=0
# shellcheck disable=SC2086
timeout --foreground -k 10 "$limit" "$qemu" $machine \
  -accel tcg,thread=multi -smp 2 -m "$mem" -nographic -no-reboot \
  -kernel "$kernel_image" -initrd "$dir/initrd.gz" \
  -append "$cmdline" $disk \
  -virtfs local,path="$guest_root",mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$share",mount_tag=vmshare,security_model=none,multidevs=remap \
  -nic none -serial mon:stdio </dev/null || status=$?
if [ -f "$share/rc" ]; then
  exit "$(cat "$share/rc")"
fi
echo "vm.sh: the guest ended without the command's status (qemu exit $status; timeout ${limit}s)" >&2
exit 125
