#!/usr/bin/env python3
"""The manual names only what exists, and states one value per fact.

Fails when README.md, CONTRIBUTING.md, SECURITY.md, a page in docs/ or a
vendored crate's GPURUN-PATCH.md
names a file of this repository that does not exist (scripts/..., tests/...,
docs/..., examples/..., integration/..., crates/..., .ci/...) or links to
one (a relative Markdown link, from the page's folder), or a test
(`tests/FILE.rs::NAME`, `FILE.rs::NAME`) that its file does not define; or
when a page gives a value other than the one the project has settled for a
fact it names (the CDI spec's path), or a value other than the code's
for a fact the code settles (the Rust and glibc floors, the minimum
kernel, exec's exit status). CHANGELOG.md is history, and left out.
    python3 scripts/ci/check-docs.py
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md"]
PAGES += sorted((ROOT / "docs").rglob("*.md"))
# The forks' patch queues: each patch's Test: names a test that exists.
PAGES += sorted((ROOT / "crates/vendor").glob("*/GPURUN-PATCH.md"))
TOP = ("scripts/", "tests/", "docs/", "examples/", "integration/", "crates/", ".ci/")
# A repository path: a top folder, then path characters; placeholders in
# capitals (DIR, FILE) and globs are not paths to check.
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(re.escape(t) for t in TOP) + r")[\w./-]*)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
TEST = re.compile(r"(?<![\w/])((?:tests/)?[\w/]+\.rs)::(\w+)")
# One value per fact: a pattern that names the fact wrongly, and the fix.
FACTS = [
    (re.compile(r"/(?:etc|var/run)/cdi/nvidia\.json"),
     "the CDI spec gpurun's unit writes is /var/run/cdi/nvidia.yaml"),
]


def source_value(path, pattern):
    """The value a fact has in the code (group 1 of `pattern` in `path`)."""
    match = re.search(pattern, (ROOT / path).read_text())
    if not match:
        sys.exit(f"check-docs: {path} no longer says {pattern!r}: update check-docs.py")
    return match.group(1)


# Facts the code settles, each as (how a page states it, the code's value,
# where the code says it): a page that states another value is wrong.
SETTLED = [
    (re.compile(r"Rust (\d+\.\d+)\+"),
     source_value("Cargo.toml", r'rust-version = "([\d.]+)"'), "Cargo.toml's rust-version"),
    (re.compile(r"glibc (\d+\.\d+) and newer"),
     source_value("scripts/release-build.sh", r"\nglibc=([\d.]+)"), "scripts/release-build.sh's glibc"),
    (re.compile(r"[Mm]inimum kernel:? (\d+\.\d+)|on Linux (\d+\.\d+) or later"),
     ".".join(re.search(r"release_at_least\(release, \((\d+), (\d+)\)\)",
                        (ROOT / "crates/gpurun/src/runtime/spec/validate.rs").read_text()).groups()),
     "the kernel check in crates/gpurun/src/runtime/spec/validate.rs"),
    (re.compile(r"exec`?'s own errors (?:are )?(\d+)"),
     source_value("crates/gpurun/src/commands/generate_docs/pages.rs", r"exec's own errors are (\d+)"),
     "exec's exit status in the man pages (generate_docs/pages.rs)"),
]


def path_exists(name):
    name = name.rstrip(".,:;)")
    if any(c in name for c in "*<>{}") or re.search(r"[A-Z]{3,}", name.split("/")[-1]):
        return True
    return (ROOT / name).exists()


def test_exists(file, name):
    candidates = [ROOT / file] if file.startswith("tests/") else list((ROOT / "tests").rglob(file))
    for path in candidates:
        if path.is_file() and re.search(r"\bfn " + re.escape(name) + r"\b", path.read_text()):
            return True
        # A test folder's main.rs names its modules' tests too.
        if path.is_file() and path.name == "main.rs":
            for module in path.parent.rglob("*.rs"):
                if re.search(r"\bfn " + re.escape(name) + r"\b", module.read_text()):
                    return True
    return False


def main():
    problems = []
    settled_seen = set()
    for page in PAGES:
        rel = page.relative_to(ROOT)
        for number, line in enumerate(page.read_text().splitlines(), 1):
            # A patch's Files: line names paths in its crate, which
            # check-fork.py holds to the patch's own files.
            crate_paths = page.name == "GPURUN-PATCH.md" and line.startswith("Files: ")
            for match in PATH.finditer("" if crate_paths else line):
                if not path_exists(match.group(1)):
                    problems.append(f"{rel}:{number}: names {match.group(1)}, which does not exist")
            for match in LINK.finditer(line):
                target = match.group(1)
                if "://" not in target and not target.startswith("mailto:") \
                        and not (page.parent / target).exists():
                    problems.append(f"{rel}:{number}: links to {target}, which does not exist")
            for match in TEST.finditer(line):
                if not test_exists(match.group(1), match.group(2)):
                    problems.append(f"{rel}:{number}: names the test {match.group(0)}, which its file does not define")
            for pattern, fix in FACTS:
                if pattern.search(line):
                    problems.append(f"{rel}:{number}: {pattern.search(line).group(0)}: {fix}")
            for pattern, value, where in SETTLED:
                for match in pattern.finditer(line):
                    stated = next(g for g in match.groups() if g)
                    if stated != value:
                        problems.append(f"{rel}:{number}: {match.group(0)}: {where} says {value}")
                    else:
                        settled_seen.add(where)
    # Each settled fact is stated somewhere, or its pattern is stale.
    for _, value, where in SETTLED:
        if where not in settled_seen:
            problems.append(f"no page states {where} ({value}) as the pattern reads it: update check-docs.py")
    for problem in problems:
        print(f"check-docs: {problem}", file=sys.stderr)
    print(f"check-docs: {len(PAGES)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
