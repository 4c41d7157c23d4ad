# Sourced by package-deb.sh and package-rpm.sh: the files every package
# carries, staged under a directory as they are installed.
#
# stage_package_files DIR BINARY ZSH_DIR: DIR/usr/bin/gpurun (BINARY,
# stripped, 0755), gpurun(8) and one page per command, bash, zsh (into
# ZSH_DIR, the distribution's place) and fish completions, README,
# CHANGELOG, the example config, and the CDI refresh units. The pages and
# completions are generated from the binary's own command definitions, so
# they cannot drift; a binary of another architecture has the same ones,
# so this host's own build writes them (gpurun generate-docs).
stage_package_files() {
  dir=$1; binary=$2; zsh_dir=$3
  install -D -m 0755 "$binary" "$dir/usr/bin/gpurun"
  case "$(file -b "$binary")" in
    *aarch64*) strip_tool=aarch64-linux-gnu-strip ;;
    *) strip_tool=strip ;;
  esac
  "$strip_tool" --strip-unneeded "$dir/usr/bin/gpurun"
  # The SPANK plugin, built beside the binary (gpurun-spank), for Slurm's
  # plugstack.conf (gpurun setup slurm --spank /usr/lib/gpurun/spank_gpurun.so).
  plugin=$(dirname "$binary")/libspank_gpurun.so
  [ -f "$plugin" ] || { echo "package: no $plugin beside the binary: build gpurun-spank too" >&2; return 1; }
  install -D -m 0644 "$plugin" "$dir/usr/lib/gpurun/spank_gpurun.so"
  "$strip_tool" --strip-unneeded "$dir/usr/lib/gpurun/spank_gpurun.so"
  docs_binary=$binary
  "$docs_binary" --version >/dev/null 2>&1 || docs_binary=${GPURUN_DOCS_BINARY:-target/debug/gpurun}
  [ -x "$docs_binary" ] || cargo build --locked -p gpurun >&2
  "$docs_binary" generate-docs "$dir/gen"
  mkdir -p "$dir/usr/share/man/man8"
  for page in "$dir"/gen/man/*.8; do
    gzip -9n -c "$page" > "$dir/usr/share/man/man8/$(basename "$page").gz"
  done
  install -D -m 0644 "$dir/gen/completions/gpurun.bash" "$dir/usr/share/bash-completion/completions/gpurun"
  install -D -m 0644 "$dir/gen/completions/_gpurun" "$dir$zsh_dir/_gpurun"
  install -D -m 0644 "$dir/gen/completions/gpurun.fish" "$dir/usr/share/fish/vendor_completions.d/gpurun.fish"
  rm -rf "$dir/gen"
  doc="$dir/usr/share/doc/gpurun"
  install -D -m 0644 README.md "$doc/README.md"
  install -D -m 0644 CHANGELOG.md "$doc/CHANGELOG.md"
  install -D -m 0644 examples/config.toml "$doc/examples/config.toml"
  # The user's manual, at the paths README.md and the errors name
  # (docs/config.md); the contributors' pages (docs/dev/) stay in the source.
  install -D -m 0644 SECURITY.md "$doc/SECURITY.md"
  for page in docs/*.md; do
    install -D -m 0644 "$page" "$doc/$page"
  done
  stage_cdi_refresh_units "$dir/usr/lib/systemd/system"
}

# The CDI spec kept current, as the toolkit's nvidia-cdi-refresh does:
# written at boot (/var/run is a tmpfs) and again when a driver install
# runs depmod. `systemctl enable --now gpurun-cdi-refresh.service
# gpurun-cdi-refresh.path` turns it on; after a MIG change, `systemctl
# start gpurun-cdi-refresh.service` (or `gpurun gpu cdi --check`).
stage_cdi_refresh_units() {
  install -D -m 0644 /dev/stdin "$1/gpurun-cdi-refresh.service" <<UNIT
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
  install -D -m 0644 /dev/stdin "$1/gpurun-cdi-refresh.path" <<UNIT
[Unit]
Description=Rewrite gpurun's CDI spec when the NVIDIA driver changes

[Path]
PathChanged=/lib/modules/%v/modules.dep
Unit=gpurun-cdi-refresh.service

[Install]
WantedBy=paths.target
UNIT
}

# What removing the package runs: gpurun's driver cache in the default
# state root is its own; the containers' state there is not, and stays
# while they run.
package_remove_script='rm -rf /run/gpurun/@driver-cache
rmdir /run/gpurun 2>/dev/null || true'

package_summary="OCI container runtime with native NVIDIA GPU support"
package_description="A runc-compatible runtime (containerd, Docker, Podman,
Slurm, LXC) that injects NVIDIA GPUs itself: no hook process and no NVIDIA
Container Toolkit on the host, rootless and in user namespaces, with
NVIDIA's CDI hooks carried out natively."

# glibc_floor BINARY: the oldest glibc BINARY starts on: the newest
# GLIBC_ version its symbols name, and 2.36 for packed relative
# relocations (GLIBC_ABI_DT_RELR, a version without a symbol). (The
# package checks compute theirs on their own.)
glibc_floor() {
  versions=$(readelf -V "$1")
  newest=$(echo "$versions" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  if echo "$versions" | grep -q GLIBC_ABI_DT_RELR && dpkg --compare-versions "$newest" lt 2.36; then
    newest=2.36
  fi
  echo "$newest"
}

# release_binary ARCH: the binary a package of ARCH carries:
# GPURUN_PACKAGE_BINARY where set (the package checks' debug build), else
# the glibc 2.28 release build (scripts/release-build.sh).
release_binary() {
  if [ -n "${GPURUN_PACKAGE_BINARY:-}" ]; then
    echo "$GPURUN_PACKAGE_BINARY"
  else
    sh scripts/release-build.sh --arch "$1"
  fi
}
