#!/bin/sh
# CRI-O's way, with no CRI-O (it is not in Debian): `gpurun setup crio`'s
# drop-in read back as crio.conf(5) shapes it (tomllib), idempotent and
# undone; then gpurun driven through Debian's conmon as CRI-O drives it
# (`-r gpurun --runtime-arg --root=...`, exit files, k8s-file logs):
# create, start, the container's log, a GPU the config asks for, an exec
# through `conmon --exec` with its exit status, kill, the exit file,
# delete, and nothing left in the state root or the cgroups.
# Usage: integration/crio.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start crio.sh "${1:-}"
trap 'rm -rf "$work"' EXIT INT TERM
make_fixtures
export GPURUN_CONFIG="$work/gpurun.toml"

# --- the drop-in ---
dropin="$work/crio.conf.d/99-gpurun.conf"
out=$("$gpurun" setup crio --config "$dropin" --binary "$gpurun" 2>&1)
check_contains "setup crio writes the drop-in" "registered runtime \"gpurun\"" "$out"
shape=$(python3 - "$dropin" "$gpurun" <<'PY'
import sys, tomllib
doc = tomllib.load(open(sys.argv[1], "rb"))
rt = doc["crio"]["runtime"]
ours = rt["runtimes"]["gpurun"]
ok = (ours["runtime_path"] == sys.argv[2] and ours["runtime_type"] == "oci"
      and ours["runtime_root"] == "/run/gpurun" and isinstance(rt["cdi_spec_dirs"], list)
      and "default_runtime" not in rt and ours.get("monitor_path", "/usr/bin/conmon").endswith("conmon"))
print("ok" if ok else doc)
PY
)
check "the drop-in has crio.conf(5)'s keys and types" ok "$shape"
check_contains "setup crio a second time changes nothing" "nothing to change" \
  "$("$gpurun" setup crio --config "$dropin" --binary "$gpurun" 2>&1)"
"$gpurun" setup crio --config "$dropin" --binary "$gpurun" --undo >/dev/null 2>&1
check "setup crio --undo removes the drop-in it made" absent "$([ -e "$dropin" ] && echo present || echo absent)"

# --- conmon driving gpurun ---
root="$work/state"
bundle="$work/bundle"
sh scripts/fixtures/busybox-bundle.sh "$bundle" "$gpurun" >/dev/null
jq '.process.terminal = false
    | .process.env += ["NVIDIA_VISIBLE_DEVICES=0"]
    | .process.args = ["sh", "-c", "[ -c /dev/nvidia0 ] && echo gpu0; echo hello; sleep 60"]' \
  "$bundle/config.json" > "$work/c" && mv "$work/c" "$bundle/config.json"
jq '.process | .args = ["sh", "-c", "echo exec-out; exit 7"]' "$bundle/config.json" > "$work/exec.json"
mkdir -p "$work/exits" "$work/exec-exits" "$work/sock" "$work/persist"
cgroups_before=$(find /sys/fs/cgroup -type d -name 'cm-*' 2>/dev/null | sort)
id=cm-$$
conmon_run() { # conmon's own options...
  conmon --api-version 1 -c "$id" -n "$id" -r "$gpurun" --runtime-arg "--root=$root" \
    --socket-dir-path "$work/sock" "$@" 2>>"$work/conmon.err"
}
conmon_run -b "$bundle" -u "$id" -p "$bundle/pidfile" -P "$work/conmon.pid" \
  -l "k8s-file:$work/ctr.log" --exit-dir "$work/exits" --persist-dir "$work/persist"
check "conmon starts gpurun create" 0 "$?"
# CRI-O waits for conmon's word that the runtime's create has exited (its
# sync pipe); here, for the pid file the create writes last.
pidfile_written() { [ -s "$bundle/pidfile" ]; }
wait_for pidfile_written
check "the container is created" created "$("$gpurun" --root "$root" state "$id" 2>/dev/null | jq -r .status)"
"$gpurun" --root "$root" start "$id"
check "start" 0 "$?"
logged() { grep -q ' stdout F hello$' "$work/ctr.log"; }
wait_for logged
check "the container's output is in conmon's k8s-file log" "gpu0 hello" \
  "$(sed -n 's/.* stdout F //p' "$work/ctr.log" | tr '\n' ' ' | sed 's/ $//')"
conmon_run -e --exec-process-spec "$work/exec.json" -u "exec-$$" -p "$work/exec.pid" \
  -l "k8s-file:$work/exec.log" --exit-dir "$work/exec-exits"
exec_done() { [ -s "$work/exec-exits/$id" ]; }
wait_for exec_done
check "conmon --exec: the process's exit status" 7 "$(cat "$work/exec-exits/$id" 2>/dev/null)"
check "conmon --exec: its output" exec-out "$(sed -n 's/.* stdout F //p' "$work/exec.log")"
"$gpurun" --root "$root" kill "$id" KILL
exited() { [ -s "$work/exits/$id" ]; }
wait_for exited
check "kill: conmon's exit file holds 137" 137 "$(cat "$work/exits/$id" 2>/dev/null)"
check "the container is stopped" stopped "$("$gpurun" --root "$root" state "$id" 2>/dev/null | jq -r .status)"
"$gpurun" --root "$root" delete "$id"
check "delete" 0 "$?"
check "nothing left in the state root" "" "$(state_left "$root")"
check "no cgroup left" "$cgroups_before" "$(find /sys/fs/cgroup -type d -name 'cm-*' 2>/dev/null | sort)"

summary crio
