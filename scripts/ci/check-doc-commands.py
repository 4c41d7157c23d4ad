#!/usr/bin/env python3
"""The manual's gpurun command lines name only commands and flags that exist.

Every `gpurun ...` in a code span or code block of README.md, SECURITY.md,
CONTRIBUTING.md or docs/ is read as the binary would read it: global flags
(with their values), then the command (and a subcommand of `gpu` or
`setup`), then its flags. A command or a long flag that the binary's own
`--help` does not list is a problem. The binary is the one the test command
built (check-docs.py runs before the build; this after it).
    python3 scripts/ci/check-doc-commands.py target/debug/gpurun
"""
import functools
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md"]
PAGES += sorted((ROOT / "docs").rglob("*.md"))
# The end of a command line: a code span's close, a pipe, a list or a comment.
END = re.compile(r"`|\||;|&&|\|\||\s#|\)\s*$")
OPTION = re.compile(r"^\s+(?:-\w, )?(--[\w-]+)(?:[ =]<[^>]+>|\s+\[<[^>]+>)?", re.M)
COMMAND = re.compile(r"^  ([a-z][\w-]*)\s", re.M)


@functools.lru_cache(maxsize=None)
def is_hidden_command(binary, word):
    """A command the list leaves out (generate-docs) still has its help."""
    return subprocess.run([binary, word, "--help"], capture_output=True).returncode == 0


@functools.lru_cache(maxsize=None)
def help_of(binary, words):
    """The options (name -> takes a value) and subcommands of `gpurun WORDS`."""
    out = subprocess.run([binary, *words, "--help"], capture_output=True, text=True).stdout
    options = {m.group(1): "<" in m.group(0) for m in OPTION.finditer(out)}
    commands = set()
    if "\nCommands:\n" in out:
        block = out.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
        commands = {m.group(1) for m in COMMAND.finditer(block + "\n")}
    return options, commands


def code_of(page):
    """(line number, code) for each code span and code-block line; a span
    may go on to the next line of its paragraph."""
    fenced, in_span = False, False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not line.strip():
            in_span = False
        if fenced or (line.startswith("    ") and not in_span and not line.lstrip()[:1] in "-*"
                      and "`" not in line):
            yield number, line
            continue
        parts = line.split("`")
        for index, part in enumerate(parts):
            # In prose, a span is a command only from its start (a span
            # that quotes an error message names gpurun in passing).
            start = re.match(r"(?:sudo |\$ |\w+=\S+ )*gpurun(?: |$)", part)
            if in_span and start:
                yield number, part
            if index < len(parts) - 1:
                in_span = not in_span


def words_after_gpurun(code):
    """Each gpurun invocation's words, up to where its command line ends."""
    # Not `--runtime gpurun` or `runtime=gpurun`: an engine's flag's value.
    for match in re.finditer(r"(?<![\w/.=-])(?<!--runtime )gpurun((?: +[^\s`]+)*)", code):
        rest = match.group(1)
        cut = END.search(rest)
        yield (rest[: cut.start()] if cut else rest).split()


def check(binary, words):
    """The first problem of one invocation, or None."""
    global_options, commands = help_of(binary, ())
    path, options = (), dict(global_options)
    expect_value = False
    for word in words:
        if expect_value or word.startswith("$") or word[:1] in "\"'<[{":
            expect_value = False
            continue
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            if name == "--":
                return None
            if name not in options:
                return f"gpurun {' '.join(path)} has no flag {name}"
            expect_value = options[name] and "=" not in word
            continue
        if word.startswith("-"):
            continue
        if not commands:
            continue
        if word not in commands and not (not path and is_hidden_command(binary, word)):
            # Words in capitals or with punctuation are placeholders or prose.
            if re.fullmatch(r"[a-z][a-z-]*", word) and not path:
                return f"gpurun has no command {word}"
            return None
        path += (word,)
        own, commands = help_of(binary, path)
        options = {**global_options, **own}
    return None


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/gpurun")
    problems, lines = [], 0
    for page in PAGES:
        rel = page.relative_to(ROOT)
        for number, code in code_of(page):
            for words in words_after_gpurun(code):
                lines += 1
                problem = check(binary, tuple(words))
                if problem:
                    problems.append(f"{rel}:{number}: {problem}")
    for problem in problems:
        print(f"check-doc-commands: {problem}", file=sys.stderr)
    print(f"check-doc-commands: {lines} gpurun command lines, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
