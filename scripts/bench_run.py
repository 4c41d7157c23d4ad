"""Interleaved timing of `RUNTIME run --bundle B ID` for several runtimes.

Usage: bench_run.py ROUNDS BUNDLE NAME=COMMAND...
With BUNDLE "-", each COMMAND already holds `run --bundle DIR`, and only the
container id is appended. Prints each runtime's median and p90, each ratio to
the last runtime named (the peer), and each one's peak RSS."""

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
            argv = shlex.split(command)
            if bundle != "-":
                argv += ["run", "--bundle", bundle]
            argv.append(f"bench-{name.replace('+', '-')}-{i}")
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
            elapsed = time.perf_counter() - start
            if result.returncode != 0:
                sys.exit(f"{name} run {i} failed ({result.returncode}): {result.stderr.decode()}")
            if i >= 3:  # warm-up rounds are not counted
                times[name].append(elapsed * 1000)
            # ru_maxrss of children: the largest child so far, in KiB.
            after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            if after > before:
                rss[name] = max(rss[name], after)
    peer = runtimes[-1][0]
    peer_median = statistics.median(times[peer])
    print(f"{'runtime':<24} {'median ms':>10} {'p90 ms':>8} {'ratio':>7} {'peak RSS':>10}")
    for name, _ in runtimes:
        median = statistics.median(times[name])
        p90 = sorted(times[name])[int(len(times[name]) * 0.9) - 1]
        peak = f"{rss[name] / 1024:.1f} MB" if rss[name] else "(n/a)"
        print(f"{name:<24} {median:>10.2f} {p90:>8.2f} {median / peer_median:>6.2f}x {peak:>10}")
    print(f"({rounds} interleaved rounds; ratio is to {peer})")


if __name__ == "__main__":
    main()
