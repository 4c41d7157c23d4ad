#!/usr/bin/env python3
"""The patch queue of a vendored crate: its GPURUN-PATCH.md and its series.

  python3 scripts/ci/check-fork.py crates/vendor/CRATE

Fails (exit 1, one line per problem) unless:
- the entries are numbered 1, 2, 3..., each heading ends in "(for upstream)"
  or "(gpurun only)", and each has a "Files:" and a "Forwarded:" line
  (DEP-3's: "no" or where it was sent, an https:// address, for upstream;
  "not-needed" for gpurun only);
- patches/ holds one NNNN-*.patch per entry, in the same order, whose
  Subject is the entry's title, whose Forwarded: trailer is the entry's,
  and which changes exactly the files its entry's Files: line names;
- every test an entry's "Test:" names exists: `tests/FILE.rs::NAME` (a
  function NAME in FILE), `integration/FILE.sh`, a bare `NAME` (in the
  file named before it, or among the crate's own unit tests), or a path
  in the crate.
scripts/ci/check-fork.sh runs it, and checks that the series applied to
the release is the vendored tree.
"""
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]
problems = []


def fail(text):
    problems.append(text)


def entries(queue):
    """(number, title, tag, files, forwarded, body) for each `## N.` entry."""
    text = queue.read_text()
    found = re.finditer(r"(?ms)^## (\d+)\. (.*?)\n(.*?)(?=^## |\Z)", text)
    for m in found:
        number, heading, body = int(m[1]), m[2].strip(), m[3]
        tag = re.search(r"\((for upstream|gpurun only)\)$", heading)
        title = heading[: tag.start()].strip() if tag else heading
        files = re.search(r"(?m)^Files: (.*)$", body)
        forwarded = re.search(r"(?m)^Forwarded: (.*)$", body)
        yield (number, title, tag[1] if tag else None,
               re.findall(r"`([^`]+)`", files[1]) if files else None,
               forwarded[1].strip() if forwarded else None, body)


def check_entry(queue, number, expected, tag, files, forwarded):
    where = f"{queue}: patch {number}"
    if number != expected:
        fail(f"{queue}: patch {number} where patch {expected} was expected")
    if tag is None:
        fail(f"{where} says neither (for upstream) nor (gpurun only)")
    if not files:
        fail(f"{where} has no Files: line")
    if forwarded is None:
        fail(f"{where} has no Forwarded: line (no, https://..., or not-needed)")
    elif tag == "for upstream" and not (forwarded == "no" or forwarded.startswith("https://")):
        fail(f"{where} (for upstream) says Forwarded: {forwarded} (no or https://...)")
    elif tag == "gpurun only" and forwarded != "not-needed":
        fail(f"{where} (gpurun only) says Forwarded: {forwarded} (not-needed)")


def check_patch(queue, patch, number, title, files, forwarded):
    text = patch.read_text()
    where = f"{patch.relative_to(TOP)}"
    subject = re.search(r"(?m)^Subject: \[PATCH(?: \d+/\d+)?\] (.*(?:\n .*)*)$", text)
    subject = re.sub(r"\n ", " ", subject[1]) if subject else None
    if subject != title:
        fail(f"{where}: Subject is {subject!r}, but {queue.name}'s patch {number} is {title!r}")
    trailer = re.search(r"(?m)^Forwarded: (.*)$", text.split("\n---\n")[0])
    if forwarded is not None and (trailer[1].strip() if trailer else None) != forwarded:
        fail(f"{where}: its Forwarded: trailer differs from {queue.name}'s ({forwarded})")
    changed = re.findall(r"(?m)^diff --git a/(\S+) b/", text)
    if not changed:
        fail(f"{where} changes no file")
    if files is not None and sorted(changed) != sorted(files):
        fail(f"{where} changes {', '.join(sorted(changed))}; "
             f"{queue.name}'s patch {number} names {', '.join(sorted(files))}")


def check_tests(queue, crate_dir, number, body):
    """Every test a `Test:` paragraph names exists."""
    for paragraph in re.findall(r"Test:(.*?)(?:\n\n|\Z)", body, re.S):
        current = None
        for name in re.findall(r"`([^`]+)`", paragraph):
            path, _, function = name.partition("::")
            if re.match(r"^(tests|integration)/", path):
                current = TOP / path
                if not current.exists():
                    fail(f"{queue}: patch {number}'s Test: names {path}, which does not exist")
                elif function and not has_fn(current, function):
                    fail(f"{queue}: patch {number}'s Test: names {name}, which {path} lacks")
            elif path.startswith("src/"):
                if not (crate_dir / path).exists():
                    fail(f"{queue}: patch {number}'s Test: names {path}, not in the crate")
            elif re.fullmatch(r"\w+_\w+", name):
                places = [current] if current else []
                places.append(crate_dir / "src")
                if not any(has_fn(place, name) for place in places):
                    fail(f"{queue}: patch {number}'s Test: names {name}, which no test defines")


def has_fn(place, name):
    files = [place] if place.is_file() else sorted(place.rglob("*.rs"))
    pattern = re.compile(rf"\bfn {re.escape(name)}\b")
    return any(pattern.search(f.read_text(errors="replace")) for f in files)


def main():
    crate_dir = pathlib.Path(sys.argv[1]).resolve()
    queue = crate_dir / "GPURUN-PATCH.md"
    patches = sorted((crate_dir / "patches").glob("*.patch"))
    listed = list(entries(queue))
    for expected, (number, title, tag, files, forwarded, body) in enumerate(listed, 1):
        check_entry(queue.relative_to(TOP), number, expected, tag, files, forwarded)
        check_tests(queue.relative_to(TOP), crate_dir, number, body)
        named = [p for p in patches if p.name.startswith(f"{number:04d}-")]
        if len(named) != 1:
            fail(f"{queue.relative_to(TOP)}: patch {number} has {len(named)} files "
                 f"patches/{number:04d}-*.patch (one expected)")
            continue
        check_patch(queue, named[0], number, title, files, forwarded)
    for patch in patches:
        if not re.match(r"^\d{4}-", patch.name) or int(patch.name[:4]) > len(listed):
            fail(f"{patch.relative_to(TOP)} is no entry of {queue.name}")
    for line in problems:
        print(f"check-fork: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
