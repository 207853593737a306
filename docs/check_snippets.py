#!/usr/bin/env python3
"""check_snippets — the guides' code excerpts against the files they quote.

  docs/check_snippets.py [DOCS_DIR]          (default: this script's directory)

In every *.md file of DOCS_DIR, a fenced code block right after a line

    <!-- snippet: examples/inline_server.cpp -->

(a path relative to DOCS_DIR) must appear in that file as consecutive lines,
verbatim except for trailing blanks ("..." alone on a line stands for lines
left out). The examples are compiled by the build (docs/meson.build), so a
guide that quotes them cannot drift from code that compiles. Exit status 0
iff every marked block is found, 1 otherwise (one line per problem).
"""
import glob
import os
import re
import sys

MARK = re.compile(r"^<!--\s*snippet:\s*(\S+)\s*-->\s*$")


def blocks(md_lines):
    """(line number, path, [code lines]) for every marked block."""
    out = []
    i = 0
    while i < len(md_lines):
        m = MARK.match(md_lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(md_lines) and not md_lines[j].strip():
            j += 1
        if j >= len(md_lines) or not md_lines[j].startswith("```"):
            out.append((i + 1, m.group(1), None))
            i = j
            continue
        k = j + 1
        while k < len(md_lines) and not md_lines[k].startswith("```"):
            k += 1
        out.append((i + 1, m.group(1), md_lines[j + 1:k]))
        i = k + 1
    return out


def found(code, src):
    """Each "..."-separated piece of `code` appears, in order, as consecutive lines of `src`."""
    pieces, cur = [], []
    for line in code:
        if line.strip() == "...":
            if cur:
                pieces.append(cur)
            cur = []
        else:
            cur.append(line.rstrip())
    if cur:
        pieces.append(cur)
    pos = 0
    for p in pieces:
        for start in range(pos, len(src) - len(p) + 1):
            if src[start:start + len(p)] == p:
                pos = start + len(p)
                break
        else:
            return p[0]
    return None


def main():
    docs = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    problems, n = [], 0
    for md in sorted(glob.glob(os.path.join(docs, "*.md"))):
        with open(md, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for no, path, code in blocks(lines):
            n += 1
            where = f"{os.path.relpath(md)}:{no}"
            if code is None:
                problems.append(f"{where}: snippet marker for {path} is not followed by a code block")
                continue
            full = os.path.join(docs, path)
            if not os.path.exists(full):
                problems.append(f"{where}: {path} does not exist")
                continue
            with open(full, encoding="utf-8") as f:
                src = [l.rstrip() for l in f.read().split("\n")]
            miss = found(code, src)
            if miss is not None:
                problems.append(f"{where}: the excerpt of {path} is not in the file (from: {miss.strip()!r})")
    for p in problems:
        print(p)
    print(f"check_snippets: {n} excerpts, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
