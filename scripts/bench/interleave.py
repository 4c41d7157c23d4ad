"""Interleaved timing of `RUNTIME run --bundle B ID` for several runtimes.

Usage: interleave.py [--as USER] ROUNDS BUNDLE NAME=COMMAND...
With BUNDLE "-", each COMMAND already holds `run --bundle DIR`, and only the
container id is appended. Prints each runtime's median and p90 wall time,
its median CPU time per start (user + system of the runtime and every
process it waited for, from wait4's rusage), each ratio to the last runtime
named (the peer), and each one's peak RSS. `--as USER` drops to USER (its
groups, HOME and XDG_RUNTIME_DIR) before anything runs: the rootless case,
with no wrapper process in the timing.

Peak RSS is measured in separate runs under GNU time (`/usr/bin/time -f
%M`): a process that Python forks or vforks inherits Python's own resident
set as its high-water mark until it execs, so timing Python's children
cannot tell it (every runtime would read as Python's ~14 MB). time's own
child starts from time's small image; its peak covers the runtime and the
processes it waited for, the container's among them."""

import os
import resource  # noqa: F401  (os.wait4 imports it lazily; after the drop to --as USER it may not load)
import shlex
import shutil
import statistics
import sys
import tempfile
import time


RSS_ROUNDS = 5


def run_once(argv, err_path):
    """Runs argv with stdin and stdout on /dev/null and stderr to a file;
    returns (exit code, seconds)."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    return os.waitstatus_to_exitcode(status), elapsed, usage.ru_utime + usage.ru_stime


def rotated(runtimes, i):
    """The runtimes in round i's order: each round starts one runtime later,
    so that no runtime always follows the same one (and pays for what that
    one left running), as parallel.py orders its rounds."""
    return runtimes[i % len(runtimes):] + runtimes[: i % len(runtimes)]


def become(user):
    """Drops root for USER, as a login would: its groups, ids and HOME."""
    import pwd

    entry = pwd.getpwnam(user)
    os.initgroups(user, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    os.environ["HOME"] = entry.pw_dir
    os.environ["USER"] = user
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="bench-xdg-")


def peak_rss_kib(argv, err_path):
    """The peak RSS of argv (and what it waited for), from GNU time."""
    out_path = err_path + ".rss"
    gnu_time = shutil.which("time") or "/usr/bin/time"
    code, _, _ = run_once([gnu_time, "-f", "%M", "-o", out_path] + argv, err_path)
    if code != 0:
        with open(err_path) as f:
            sys.exit(f"{argv[0]} failed under GNU time ({code}): {f.read()}")
    with open(out_path) as f:
        kib = int(f.read().split()[-1])
    os.unlink(out_path)
    return kib


def main():
    args = sys.argv[1:]
    if args[0] == "--as":
        become(args[1])
        args = args[2:]
    rounds = int(args[0])
    bundle = args[1]
    runtimes = [arg.split("=", 1) for arg in args[2:]]
    times = {name: [] for name, _ in runtimes}
    cpu = {name: [] for name, _ in runtimes}
    rss = {name: 0 for name, _ in runtimes}
    err_path = tempfile.mktemp(prefix="bench-run-err-")
    try:
        for i in range(rounds + 3):
            for name, command in rotated(runtimes, i):
                argv = shlex.split(command)
                if bundle != "-":
                    argv += ["run", "--bundle", bundle]
                argv.append(f"bench-{name.replace('+', '-')}-{i}")
                code, elapsed, cpu_s = run_once(argv, err_path)
                if code != 0:
                    with open(err_path) as f:
                        sys.exit(f"{name} run {i} failed ({code}): {f.read()}")
                if i >= 3:  # warm-up rounds are not counted
                    times[name].append(elapsed * 1000)
                    cpu[name].append(cpu_s * 1000)
        for i in range(RSS_ROUNDS):
            for name, command in runtimes:
                argv = shlex.split(command)
                if bundle != "-":
                    argv += ["run", "--bundle", bundle]
                argv.append(f"rss-{name.replace('+', '-')}-{i}")
                rss[name] = max(rss[name], peak_rss_kib(argv, err_path))
    finally:
        if os.path.exists(err_path):
            os.unlink(err_path)
    peer = runtimes[-1][0]
    peer_median = statistics.median(times[peer])
    peer_cpu = statistics.median(cpu[peer])
    print(
        f"{'runtime':<24} {'median ms':>10} {'p90 ms':>8} {'ratio':>7}"
        f" {'CPU ms':>8} {'ratio':>7} {'peak RSS':>10}"
    )
    for name, _ in runtimes:
        median = statistics.median(times[name])
        p90 = sorted(times[name])[int(len(times[name]) * 0.9) - 1]
        cpu_ms = statistics.median(cpu[name])
        print(
            f"{name:<24} {median:>10.2f} {p90:>8.2f} {median / peer_median:>6.2f}x"
            f" {cpu_ms:>8.2f} {cpu_ms / peer_cpu:>6.2f}x {rss[name] / 1024:>7.1f} MB"
        )
    print(
        f"({rounds} interleaved rounds; ratios are to {peer}; CPU: user + system per start;"
        " peak RSS: the runtime and what it waited for)"
    )


if __name__ == "__main__":
    main()
