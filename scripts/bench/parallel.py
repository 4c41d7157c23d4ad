"""N concurrent `RUNTIME run --bundle B ID` for several runtimes, interleaved.

Usage: parallel.py [--as USER] ROUNDS BUNDLE "N1 N2 ..." NAME=COMMAND...
For each N, each round starts N runs of each runtime at once (one runtime
at a time, the runtimes' order rotating from round to round) and times
them until the last one ends. Prints, per N and runtime: throughput
(starts per second: N over the time from the first spawn to the last
exit, median of the rounds), p50 and p99 of the time each start took (all
rounds together), CPU per start (user + system of each runtime and every
process it waited for, from wait4's rusage), and the throughput as a
multiple of the last runtime named (the peer). `--as USER` drops to USER
(its groups, HOME and XDG_RUNTIME_DIR) before anything runs."""

import os
import resource  # noqa: F401  (os.wait4 imports it lazily; after the drop to --as USER it may not load)
import shlex
import statistics
import sys
import tempfile
import time

from interleave import become


def burst(command, bundle, n, tag, err_dir):
    """Starts n runs at once; returns (wall seconds, [seconds each], [cpu each], failures)."""
    started = {}
    for i in range(n):
        argv = command + ["run", "--bundle", bundle, f"{tag}-{i}"]
        err = os.path.join(err_dir, f"{tag}-{i}.err")
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        ]
        started[os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)] = (time.perf_counter(), err)
    first = min(t for t, _ in started.values())
    took, cpu, failures = [], [], []
    last = first
    while started:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in started:
            continue
        end = time.perf_counter()
        begun, err = started.pop(pid)
        last = max(last, end)
        took.append(end - begun)
        cpu.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            with open(err) as f:
                failures.append(f.read().strip()[:200])
    return last - first, took, cpu, failures


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    args = sys.argv[1:]
    if args[:1] == ["--as"]:
        become(args[1])
        args = args[2:]
    rounds, bundle, sizes = int(args[0]), args[1], [int(n) for n in args[2].split()]
    runtimes = [(spec.split("=", 1)[0], shlex.split(spec.split("=", 1)[1])) for spec in args[3:]]
    err_dir = tempfile.mkdtemp(prefix="bench-parallel-")
    peer = runtimes[-1][0]
    print(f"{'N':>3}  {'runtime':<8} {'starts/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/start':>13} {'vs ' + peer:>9}")
    for n in sizes:
        results = {name: {"tput": [], "took": [], "cpu": []} for name, _ in runtimes}
        for r in range(rounds):
            order = runtimes[r % len(runtimes):] + runtimes[: r % len(runtimes)]
            for name, command in order:
                wall, took, cpu, failures = burst(command, bundle, n, f"{name}-{n}-{r}", err_dir)
                if failures:
                    sys.exit(f"{name}: {len(failures)} of {n} runs failed, e.g.: {failures[0]}")
                results[name]["tput"].append(n / wall)
                results[name]["took"].extend(took)
                results[name]["cpu"].extend(cpu)
        peer_tput = statistics.median(results[peer]["tput"])
        for name, _ in runtimes:
            res = results[name]
            tput = statistics.median(res["tput"])
            print(
                f"{n:>3}  {name:<8} {tput:>9.1f} {percentile(res['took'], 50) * 1000:>8.0f} "
                f"{percentile(res['took'], 99) * 1000:>8.0f} {statistics.median(res['cpu']) * 1000:>13.1f} "
                f"{tput / peer_tput:>8.2f}x"
            )
    for f in os.listdir(err_dir):
        os.unlink(os.path.join(err_dir, f))
    os.rmdir(err_dir)


if __name__ == "__main__":
    main()
