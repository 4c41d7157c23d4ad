# Sourced by the bench scripts (from the repository root): installs what
# they need, picks the gpurun binary (GPURUN_BIN, else a release build),
# makes the test user and two `true` bundles on disk, $work/bundle for root
# and $work/rootless (the user's own rootfs copy and a config that maps the
# user to the container's root, as `spec --rootless` writes for it), and
# state directories under $state, a tmpfs of its own: runtimes keep state in
# /run (/run/gpurun, /run/runc), a tmpfs on the hosts users run, though not
# on every machine this runs on (on a disk, file creation costs each
# runtime in proportion to the files it makes); $state/rootless is the
# user's.
. scripts/bench/lib.sh
bench_setup
user=gpurun-test
sh scripts/fixtures/test-user.sh "$user"
bench_dirs
args='["true"]'
bench_bundle "$work/bundle" "$g"
sh scripts/fixtures/busybox-bundle.sh "$work/rootless" "$g" >/dev/null
rm "$work/rootless/config.json"
chown -R "$user:" "$work/rootless"
mkdir "$state/rootless"
chown "$user:" "$state/rootless"
(cd "$work/rootless" && setpriv --reuid="$user" --regid="$user" --init-groups "$g" spec --rootless)
bundle_args "$work/rootless" "$args"
# crun refuses cgroup v1 hybrid hosts: a probe says whether it runs here.
crun_runs() {
  command -v crun >/dev/null && crun --root "$state/crun" run --bundle "$work/bundle" probe >/dev/null 2>&1
}
