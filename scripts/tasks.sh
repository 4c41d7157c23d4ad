#!/bin/sh
# The tasks a contributor runs, by name (`sh scripts/tasks.sh --list`).
# Each is one line of what scripts/test.sh runs in full.
#   sh scripts/tasks.sh TASK [ARG]
set -eu
cd "$(dirname "$0")/.."
gpurun=$PWD/target/debug/gpurun

list() {
  cat <<'EOF'
quick              fmt, clippy, the unit tests and the fuzz corpora (no root needed)
tests [PROGRAM]    cargo test, every program or one (tests/PROGRAM.rs), as root
engine NAME        one integration suite: containerd docker podman compose lxc slurm registry systemd current-engines
guest KERNEL       the test programs tests/matrix.txt names for KERNEL (6.1, 6.12), in a VM
fuzz [SECONDS]     every fuzz target (nightly toolchain; scripts/ci/fuzz.sh)
package            build the .deb and check it (lintian, a clean Debian 12 root)
release [ARCH...]  the glibc 2.28 release builds and their .deb and .rpm (amd64 arm64), checked
arm                the GPU library's unit tests and the arm64 binary's GPU flow under qemu-user
bench              the interleaved benchmarks: run, the engine path, against today's runc
all                everything CI runs (scripts/test.sh)
EOF
}

build() { cargo build --locked -p gpurun -p fake-nvml -p cri-client; }

case "${1:---list}" in
  --list | list) list ;;
  quick)
    cargo fmt --all --check
    cargo clippy --locked --workspace --all-targets -- -D warnings
    cargo test --locked --workspace --lib --bins
    cargo test --locked -p gpurun-gpu
    ;;
  tests)
    build
    if [ -n "${2:-}" ]; then cargo test --locked --test "$2"; else cargo test --locked --workspace; fi
    ;;
  engine)
    [ -n "${2:-}" ] || { echo "tasks.sh: engine NAME (one of: $(ls integration/*.sh | xargs -n1 basename | sed 's/\.sh$//' | tr '\n' ' '))" >&2; exit 2; }
    build
    sh "integration/$2.sh" "$gpurun"
    ;;
  guest)
    [ -n "${2:-}" ] || { echo "tasks.sh: guest KERNEL (6.1 or 6.12)" >&2; exit 2; }
    sh scripts/ci/host-matrix.sh "$2"
    ;;
  fuzz) sh scripts/ci/fuzz.sh "${2:-60}" ;;
  package)
    build
    sh scripts/ci/check-deb.sh "$gpurun"
    ;;
  release)
    shift
    sh scripts/ci/check-release.sh "$@"
    ;;
  arm)
    build
    sh scripts/ci/test-aarch64.sh
    ;;
  bench)
    sh scripts/bench/run.sh
    sh scripts/bench/current.sh
    sh scripts/bench/current.sh --engine
    ;;
  all) sh scripts/test.sh ;;
  *)
    echo "tasks.sh: no task \"$1\"; the tasks:" >&2
    list >&2
    exit 2
    ;;
esac
