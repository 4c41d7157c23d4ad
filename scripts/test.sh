#!/bin/sh
# The test command: installs what the tests need, builds, checks style and
# lints, and runs every test. CI (.ci/run) runs exactly this.
set -eu
cd "$(dirname "$0")/.."
# Each step's end, with the seconds since the start: where the time goes.
started=$(date +%s)
mark() { echo "test.sh: [$(($(date +%s) - started)) s] $*"; }
sh scripts/install-deps.sh
mark "dependencies installed"
# The static checks first, seconds each, so a slip fails at once.
# No module circle in any crate; the binary's layers point one way.
python3 scripts/ci/check-layers.py
# The manual names only files and tests that exist, and one CDI spec path.
python3 scripts/ci/check-docs.py
# No package archive's host written in a script: they take the system's
# apt sources (scripts/fixtures/debian-mirror.sh) and cargo's own registry.
if git grep -nE '(deb|security|ftp[a-z.0-9]*)\.debian\.org|static\.crates\.io|crates\.io/api' -- scripts integration .ci; then
  echo "test.sh: a package host is written in the scripts above: take it from the system's configuration" >&2
  exit 1
fi
cargo fmt --all --check
cargo build --locked -p gpurun -p gpurun-spank -p fake-nvml -p cri-client
# Every `gpurun ...` in the manual names a command and flags the binary has.
python3 scripts/ci/check-doc-commands.py target/debug/gpurun
cargo clippy --locked --workspace --all-targets -- -D warnings
# The vendored libcontainer and libcgroups: the 0.7.0 releases plus their
# patch series, applied and compared with the tree; then linted as the
# workspace is (the workspace leaves crates/vendor out).
sh scripts/ci/check-fork.sh
for crate in libcontainer libcgroups; do
  CARGO_TARGET_DIR="$PWD/target" cargo clippy --locked --manifest-path "crates/vendor/$crate/Cargo.toml" \
    --features cgroupsv2_devices --all-targets -- -D warnings
done
mark "built, fmt, clippy, fork checked"
# The .deb as a user gets it: lintian, then installed in a clean Debian 12
# root (its Depends computed from the binary), --version and features.
sh scripts/ci/check-deb.sh target/debug/gpurun
mark "package checked"
# What users install, on both architectures (docs/install.md): the glibc
# 2.28 builds for amd64 and arm64 (unoptimised: zig links against 2.28's
# symbols alone, so a build links only if every glibc call is 2.28's, and
# a release build only drops code), their .deb and .rpm, installed and run
# in Debian 11 roots (arm64 under qemu-user); then the GPU library's unit
# tests built for aarch64 and run under qemu-user.
GPURUN_RELEASE_PROFILE=link-check sh scripts/ci/check-release.sh amd64 arm64
mark "release builds and packages checked"
sh scripts/ci/test-aarch64.sh
mark "aarch64 unit tests"
# Containers on Arm: lifecycle, cgroups, seccomp, the device cgroup, GPU
# root, in a user namespace and rootless, hostile images, in aarch64 guests
# on Debian 11's arm64 root, with 4K and 16K pages (scripts/ci/guest-aarch64.sh).
sh scripts/ci/guest-aarch64.sh
mark "aarch64 guests"
# (Each fuzz target's kept corpus is replayed here too, on stable:
# crates/gpurun-gpu/tests/fuzz_corpus.rs; fuzzing for new inputs is by hand,
# sh scripts/ci/fuzz.sh SECONDS, with the nightly toolchain.)
cargo test --locked --workspace --no-fail-fast
mark "cargo test"
# The vendored libcgroups' own unit tests (those that need no D-Bus session),
# in the workspace's target directory (most of their dependencies built).
CARGO_TARGET_DIR="$PWD/target" cargo test --locked --manifest-path crates/vendor/libcgroups/Cargo.toml --features cgroupsv2_devices \
  --lib -q -- --skip dbus_native::dbus::tests::test_dbus_ --skip systemd::manager::tests::test_task_addition \
  --skip systemd::manager::tests::test_error_thrown_if_process_never_added_to_cgroup
mark "libcgroups unit tests"
# The vendored libcontainer's unit tests of the rootfs it prepares (mounts,
# /dev, its nodes and links, all resolved inside the root), of the user
# namespace's id maps, the supplementary groups, the hooks and /dev/console.
CARGO_TARGET_DIR="$PWD/target" cargo test --locked --manifest-path crates/vendor/libcontainer/Cargo.toml \
  --features cgroupsv2_devices --lib -q -- rootfs:: user_ns:: supplementary_gids keeps_original_groups hooks:: \
  an_image_console test_mount_console
mark "libcontainer unit tests"
# End-to-end suites against real engines and schedulers (systemd.sh in
# 6.12 VMs with systemd as PID 1, on Debian 12's root, Slurm's srun
# --container with the cgroup/v2 plugin in the same boot, and on unstable's;
# current-engines.sh against
# Debian unstable's Docker 28, containerd 2 and Podman 5 in a root of their
# own); each prints "N passed, M failed" and fails the run if any check
# failed.
for suite in integration/*.sh; do
  sh "$suite" "$PWD/target/debug/gpurun"
  mark "$suite"
done
# The host matrix: the kernel- and cgroup-dependent test programs again in
# VMs on the kernels GPU hosts run, with pure cgroup v2. Which program runs
# on which kernel, whole or in part, is tests/matrix.txt (docs/dev/testing.md:
# what runs where).
sh scripts/ci/host-matrix.sh 6.1
mark "host matrix 6.1"
sh scripts/ci/host-matrix.sh 6.12
mark "host matrix 6.12"
mark "every test passed"
# The whole run against CI's limit (5,400 s): above 3,000 s, a warning.
total=$(($(date +%s) - started))
echo "test.sh: $total s in all, of CI's 5400 s"
[ "$total" -le 3000 ] || echo "test.sh: warning: over 3000 s: CI's margin is going (docs/dev/testing.md has each part's time)"
