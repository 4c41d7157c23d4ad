#!/bin/sh
# The one command that sets everything up and runs the demo: installs the
# packages, builds gpurun, builds a busybox bundle and runs a container.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
cargo build --locked --release -p gpurun
gpurun="$PWD/target/release/gpurun"
work="${TMPDIR:-/tmp}/gpurun-demo"
rm -rf "$work"
sh scripts/busybox-bundle.sh "$work/bundle" "$gpurun" >/dev/null
jq '.process.args = ["sh", "-c", "echo hello from a gpurun container: $(uname -n), pid $$, uid $(id -u)"]' \
  "$work/bundle/config.json" > "$work/config.json" && mv "$work/config.json" "$work/bundle/config.json"
"$gpurun" --root "$work/state" run --bundle "$work/bundle" demo
echo "exit code: $?"
