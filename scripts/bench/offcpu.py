"""Where a start waits: reads `perf sched timehist -g --state` on stdin and
prints the time, per start, when none of the start's processes is on a
CPU (the gaps between their runs), each gap charged to the process that
last went off a CPU before it, with its state and kernel stack: a process
asleep in `synchronize_rcu` with nothing else of the start running is
what a faster CPU cannot shorten.

Usage: perf sched timehist -g --max-stack 12 --state -i DATA |
       offcpu.py STARTS PATTERN
PATTERN: a regular expression for the processes of the starts (their
comm), the shell loop that made them among them. Gaps over 50 ms (between
loops) are left out."""

import collections
import re
import sys


def runs(lines, pattern):
    """(start, end, what went off the CPU at the end) for each run of a
    matching process: timehist prints a line as a process leaves a CPU."""
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 7 or not re.match(r"\d+\.\d+$", fields[0]):
            continue
        task = fields[2]
        if not re.search(pattern, task):
            continue
        try:
            end, ran = float(fields[0]), float(fields[5]) / 1000
        except ValueError:
            continue
        stack = " <- ".join(fields[7].strip().split(" <- ")[:6]) if len(fields) > 7 else ""
        name = re.sub(r"\[\d+\]", "", task)
        yield end - ran, end, f"{name} {fields[6]} {stack}"


def main():
    starts, pattern = int(sys.argv[1]), sys.argv[2]
    waited = collections.defaultdict(float)
    count = collections.Counter()
    last_end, last_what, total = None, None, 0.0
    for start, end, what in sorted(runs(sys.stdin, pattern)):
        if last_end is not None and 0 < start - last_end < 0.05:
            gap = (start - last_end) * 1000
            waited[last_what] += gap
            count[last_what] += 1
            total += gap
        if last_end is None or end > last_end:
            last_end, last_what = end, what
    print(f"no process of the start on a CPU: {total / starts:.3f} ms per start")
    for what, ms in sorted(waited.items(), key=lambda kv: -kv[1])[:12]:
        print(f"{ms / starts:8.3f} ms  x{count[what] / starts:4.1f}  {what[:220]}")


main()
