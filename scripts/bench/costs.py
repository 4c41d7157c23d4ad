"""Two costs behind gpurun's start time, each as a median of ROUNDS runs.

sealed   the protected re-exec every create and exec makes (and a root
         `run` that cannot use the exec stub): `exec` of a missing container
         (which re-execs before it finds none) minus `state` of one (which
         does not re-exec).
inventory
         step 1 of `--debug run` (GPU request resolved: the driver's files
         found, the plan made), with a cold driver cache (a new state root
         each run) and with the cache kept.

Usage: costs.py ROUNDS GPURUN [GPU-BUNDLE -- ROOT-FLAGS...]"""

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def median_ms(argv, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def step_one_ms(argv):
    out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    found = re.search(r"step 1/9 .*\(([0-9.]+) ms\)", out.stderr)
    if out.returncode != 0 or not found:
        sys.exit(f"{' '.join(argv)} failed: {out.stderr}")
    return float(found.group(1))


def main():
    rounds = int(sys.argv[1])
    gpurun = sys.argv[2]
    state = tempfile.mkdtemp(prefix="bench-costs-", dir="/run")
    try:
        exec_ms = median_ms([gpurun, "--root", state, "exec", "no-such-container", "true"], rounds)
        state_ms = median_ms([gpurun, "--root", state, "state", "no-such-container"], rounds)
        print(f"sealed re-exec: exec {exec_ms:.2f} ms - state {state_ms:.2f} ms = {exec_ms - state_ms:.2f} ms")
        if len(sys.argv) > 4:
            bundle, flags = sys.argv[3], sys.argv[5:]
            cold, warm = [], []
            for i in range(rounds):
                fresh = tempfile.mkdtemp(prefix="bench-cold-", dir="/run")
                cold.append(step_one_ms([gpurun, *flags, "--root", fresh, "--debug", "run", "--bundle", bundle, f"c{i}"]))
                shutil.rmtree(fresh, ignore_errors=True)
                warm.append(step_one_ms([gpurun, *flags, "--root", state, "--debug", "run", "--bundle", bundle, f"w{i}"]))
            print(
                f"GPU request resolved (step 1): cold driver cache {statistics.median(cold):.2f} ms, "
                f"cached {statistics.median(warm):.2f} ms"
            )
    finally:
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
