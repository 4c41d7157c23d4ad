#!/usr/bin/env python3
"""Stress: N containers, P at a time, mixing run, create+start+delete,
run -d + exec + kill, and create+start+kill, for each runtime given; then
checks that nothing is left (state dirs, cgroups, mounts, zombies) and
prints containers per second next to each other.

stress.py TOTAL PARALLEL BUNDLE NAME=COMMAND...   (COMMAND gets --root)
"""
import concurrent.futures
import os
import shlex
import subprocess
import sys
import tempfile
import time

DEVNULL = subprocess.DEVNULL
# runc 1.1 fails `kill --all` on a container without cgroups (rootless on a
# host without delegation: "lstat : no such file or directory"), so the
# rootless run sends plain kills to both runtimes.
KILL_ALL = os.environ.get("STRESS_KILL_ALL", "1") == "1"


def sh(cmd, check=True):
    # A file, not a pipe: a detached container keeps its stdio open, and a
    # pipe would not reach EOF until it exits.
    with tempfile.TemporaryFile() as err:
        r = subprocess.run(cmd, stdin=DEVNULL, stdout=DEVNULL, stderr=err, timeout=60)
        if check and r.returncode != 0:
            err.seek(0)
            text = err.read().decode(errors="replace").strip()
            raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {text}")
    return r.returncode


def status(rt, cid):
    # state forks nothing, so a pipe is safe here.
    r = subprocess.run(rt + ["state", cid], stdin=DEVNULL, stdout=subprocess.PIPE, stderr=DEVNULL, timeout=60)
    if r.returncode != 0:
        return None
    import json
    return json.loads(r.stdout).get("status")


def wait_stopped(rt, cid):
    for _ in range(500):
        if status(rt, cid) in ("stopped", None):
            return
        time.sleep(0.01)
    raise RuntimeError(f"{cid} did not stop")


def one(rt, bundle, cid, op):
    if op == 0:  # run in the foreground
        sh(rt + ["run", "--bundle", bundle["true"], cid])
    elif op == 1:  # create, start, delete
        sh(rt + ["create", "--bundle", bundle["true"], cid])
        sh(rt + ["start", cid])
        wait_stopped(rt, cid)
        sh(rt + ["delete", cid])
    elif op == 2:  # run -d, exec, kill
        sh(rt + ["run", "--detach", "--bundle", bundle["sleep"], cid])
        sh(rt + ["exec", cid, "true"])
        sh(rt + ["kill", cid, "KILL"])
        wait_stopped(rt, cid)
        sh(rt + ["delete", cid])
    else:  # create, start, kill (--all where there are cgroups), delete --force
        sh(rt + ["create", "--bundle", bundle["sleep"], cid])
        sh(rt + ["start", cid])
        sh(rt + ["kill"] + (["--all"] if KILL_ALL else []) + [cid, "KILL"])
        sh(rt + ["delete", "--force", cid])


def zombies_of(parent):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z" and int(fields[1]) == parent:
            found.append(int(pid))
    return found


def main():
    total, parallel, bundle_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    bundle = {"true": os.path.join(bundle_dir, "true"), "sleep": os.path.join(bundle_dir, "sleep")}
    results = {}
    failed = False
    for spec in sys.argv[4:]:
        name, command = spec.split("=", 1)
        rt = shlex.split(command)
        root = rt[rt.index("--root") + 1]
        prefix = f"stress-{name}-{os.getpid()}"
        start = time.monotonic()
        errors = []
        with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(one, rt, bundle, f"{prefix}-{i}", i % 4) for i in range(total)]
            for f in futures:
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 - report every failure
                    errors.append(str(e))
        elapsed = time.monotonic() - start
        results[name] = total / elapsed
        left_state = [e for e in os.listdir(root) if e.startswith(prefix)] if os.path.isdir(root) else []
        left_cgroups = []
        for base, dirs, _ in os.walk("/sys/fs/cgroup"):
            left_cgroups += [os.path.join(base, d) for d in dirs if d.startswith(prefix)]
            if base.count("/") > 6:
                dirs[:] = []
        left_mounts = [l for l in open("/proc/self/mountinfo") if prefix in l]
        zombies = zombies_of(os.getpid())
        print(f"{name}: {total} containers, {parallel} at a time, in {elapsed:.1f} s: "
              f"{results[name]:.1f} containers/s; {len(errors)} errors; left: "
              f"{len(left_state)} state dirs, {len(left_cgroups)} cgroups, {len(left_mounts)} mounts, "
              f"{len(zombies)} zombies")
        for e in errors[:5]:
            print(f"  error: {e}")
        if errors or left_state or left_cgroups or left_mounts or zombies:
            failed = True
    names = list(results)
    if len(names) > 1:
        base = results[names[-1]]
        for n in names:
            print(f"  {n:8s} {results[n]:6.1f} containers/s  {results[n] / base:5.2f}x {names[-1]}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
