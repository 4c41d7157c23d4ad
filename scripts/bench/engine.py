"""Interleaved timing of the engine path: what containerd's shim and
Podman's conmon call for one container, step by step.

Usage: engine.py ROUNDS BUNDLE NAME=COMMAND...
Each round, for each runtime in turn: `create --bundle BUNDLE --pid-file F
ID`, `start ID`, `state ID`, `kill ID KILL`, the container's init reaped
(this process is a child subreaper, as the shim is), `delete ID`. The
bundle's process must run until killed. Prints each runtime's median per
step and for the whole path, and each whole-path ratio to the last
runtime named (the peer)."""

import ctypes
import os
import shlex
import statistics
import sys
import tempfile
import time

from interleave import rotated, run_once

STEPS = ["create", "start", "state", "kill+reap", "delete"]
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")


def call(argv, err_path):
    """(exit code, seconds) of argv, as interleave.py runs it."""
    code, seconds, _ = run_once(argv, err_path)
    return code, seconds


def one_path(base, bundle, cid, scratch):
    """The five steps for one container; returns their seconds."""
    pid_file = os.path.join(scratch, "pid")
    err_path = os.path.join(scratch, "err")
    argvs = {
        "create": base + ["create", "--bundle", bundle, "--pid-file", pid_file, cid],
        "start": base + ["start", cid],
        "state": base + ["state", cid],
        "kill": base + ["kill", cid, "KILL"],
        "delete": base + ["delete", cid],
    }
    taken = {}
    for step in STEPS:
        if step == "kill+reap":
            with open(pid_file) as f:
                init = int(f.read())
            code, seconds = call(argvs["kill"], err_path)
            start = time.perf_counter()
            os.waitpid(init, 0)
            seconds += time.perf_counter() - start
        else:
            code, seconds = call(argvs[step], err_path)
        if code != 0:
            with open(err_path) as f:
                sys.exit(f"{' '.join(base)} {step} {cid} failed ({code}): {f.read()}")
        taken[step] = seconds * 1000
    os.unlink(pid_file)
    return taken


def report(rounds, runtimes, times):
    peer = runtimes[-1][0]
    total = {name: [sum(r.values()) for r in times[name]] for name, _ in runtimes}
    peer_median = statistics.median(total[peer])
    header = f"{'runtime':<22}" + "".join(f"{s:>11}" for s in STEPS)
    print(header + f"{'path ms':>10}{'ratio':>8}")
    for name, _ in runtimes:
        steps = "".join(f"{statistics.median(r[s] for r in times[name]):>11.2f}" for s in STEPS)
        median = statistics.median(total[name])
        print(f"{name:<22}{steps}{median:>10.2f}{median / peer_median:>7.2f}x")
    print(f"({rounds} interleaved rounds; medians in ms; ratios are to {peer})")


def main():
    rounds, bundle = int(sys.argv[1]), sys.argv[2]
    runtimes = [arg.split("=", 1) for arg in sys.argv[3:]]
    become_subreaper()
    times = {name: [] for name, _ in runtimes}
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as scratch:
        for i in range(rounds + 3):
            for name, command in rotated(runtimes, i):
                cid = f"engine-{name.replace('+', '-')}-{i}"
                taken = one_path(shlex.split(command), bundle, cid, scratch)
                if i >= 3:  # warm-up rounds are not counted
                    times[name].append(taken)
    report(rounds, runtimes, times)


if __name__ == "__main__":
    main()
