#!/bin/sh
# The test command: installs what the tests need, builds, checks style and
# lints, and runs every test. CI (.ci/run) runs exactly this.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
cargo build --locked -p gpurun -p fake-nvml -p cri-client
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The vendored libcontainer and libcgroups: the 0.7.0 releases plus only
# the numbered patches their GPURUN-PATCH.md list.
sh scripts/check-fork.sh
# No module circle in any crate; the binary's layers point one way.
python3 scripts/check-layers.py
cargo test --locked --workspace
# The vendored libcgroups' own unit tests (those that need no D-Bus session).
cargo test --locked --manifest-path crates/vendor/libcgroups/Cargo.toml --features cgroupsv2_devices \
  --lib -q -- --skip dbus_native::dbus::tests --skip systemd::manager::tests::test_task_addition \
  --skip systemd::manager::tests::test_error_thrown_if_process_never_added_to_cgroup
# Every fuzz target for a short fixed time (longer by hand: sh scripts/fuzz.sh 600).
sh scripts/fuzz.sh 20
# End-to-end suites against real engines and schedulers (systemd.sh in a
# VM with systemd as PID 1); each prints "N passed, M failed" and fails the
# run if any check failed.
for suite in integration/*.sh; do
  sh "$suite" "$PWD/target/debug/gpurun"
done
# The host matrix: the kernel- and cgroup-dependent suites again in VMs on
# the kernels GPU hosts run, with pure cgroup v2 (docs/testing.md: what runs
# where), each suite on one of them so the run stays well inside CI's time
# (all of them pass on both: GPURUN_MATRIX_SUITES=... host-matrix.sh K):
# the lifecycle, rootless, security and checkpoint ones on 6.1, the GPU
# mount, cgroup v2, CDI and user-namespace ones on 6.12.
GPURUN_MATRIX_SUITES="lifecycle rootless security checkpoint" sh scripts/host-matrix.sh 6.1
GPURUN_MATRIX_SUITES="layouts image cgroup_v2 cdi userns" sh scripts/host-matrix.sh 6.12
# The systemd driver's device rules (from a shell and under Docker) and
# docker update again in a systemd guest on 6.12 (the loop above ran every
# case, CDI's included, on 6.1).
GPURUN_SYSTEMD_CASES="shell docker" sh integration/systemd.sh "$PWD/target/debug/gpurun" 6.12
# Slurm's srun --container on a systemd host with the cgroup/v2 plugin
# (integration/slurm.sh ran above on this cgroup v1 host).
sh integration/slurm.sh "$PWD/target/debug/gpurun" 6.12
