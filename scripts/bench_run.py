"""Interleaved timing of `RUNTIME run --bundle B ID` for several runtimes.

Usage: bench_run.py ROUNDS BUNDLE NAME=COMMAND... [--env K=V ...]
Prints each runtime's median, p90 and peak RSS, and each ratio to the last
runtime named (the peer)."""

import os
import resource
import shlex
import statistics
import subprocess
import sys
import time


def main():
    rounds = int(sys.argv[1])
    bundle = sys.argv[2]
    runtimes = [arg.split("=", 1) for arg in sys.argv[3:]]
    times = {name: [] for name, _ in runtimes}
    rss = {name: 0 for name, _ in runtimes}
    for i in range(rounds + 3):
        for name, command in runtimes:
            argv = shlex.split(command) + ["run", "--bundle", bundle, f"bench-{name}-{i}"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
            elapsed = time.perf_counter() - start
            if result.returncode != 0:
                sys.exit(f"{name} run {i} failed ({result.returncode}): {result.stderr.decode()}")
            if i >= 3:  # warm-up rounds are not counted
                times[name].append(elapsed * 1000)
            rss[name] = max(rss[name], resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            del before
    peer = runtimes[-1][0]
    peer_median = statistics.median(times[peer])
    print(f"{'runtime':<24} {'median ms':>10} {'p90 ms':>8} {'ratio':>7}")
    for name, _ in runtimes:
        median = statistics.median(times[name])
        p90 = sorted(times[name])[int(len(times[name]) * 0.9) - 1]
        print(f"{name:<24} {median:>10.2f} {p90:>8.2f} {median / peer_median:>6.2f}x")
    print(f"({rounds} interleaved rounds; ratio is to {peer})")


if __name__ == "__main__":
    main()
