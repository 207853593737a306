#!/usr/bin/env python3
"""The hot code of a callgrind profile: which 64-byte instruction-cache lines a
repeated operation executes every time, and how full those lines are.

  tools/code_footprint.py [--max-kib N] CALLGRIND_OUT CALLS [TOP]

CALLGRIND_OUT is a profile taken with --dump-instr=yes --compress-pos=no
--compress-strings=no (tools/code-footprint takes it); CALLS is how many times
the operation ran while callgrind counted. A line is hot when one of its
instructions ran at least CALLS / 2 times: code that every operation (or every
other) fetches. The hot lines' total is the operation's instruction footprint:
when it is larger than the L1 instruction cache (32 KiB on the Intel Xeon and
AMD EPYC machines this project runs on), every operation fetches most of its
code from L2 again. Prints the footprint, how many of each line's instructions
ran, and the TOP functions (default 15) by hot lines, each with how many of
its hot lines' instructions ran on average (low: cold code shares the lines).
--max-kib N makes it a check: exit 1 when the hot code is larger than N KiB.

Counts alone cannot tell a line every call runs once from a loop in a rare
call that runs many times: a timer's loop over a table (the RPC server's
metrics publication every 100 ms) can show up with a few lines.
"""
import collections
import re
import sys


def parse(path):
    """-> {(object, address): executions}, {(object, address): function}"""
    count = collections.Counter()
    owner = {}
    obj, fn, addr = "?", "?", 0
    skip = False  # the position line after calls= carries the call's inclusive cost
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            if raw.startswith("ob="):
                obj = raw[3:].strip()
                continue
            if raw.startswith("fn="):
                fn = raw[3:].strip()
                continue
            if raw.startswith("calls="):
                skip = True
                continue
            t = raw.split()
            if not t or not (t[0].startswith("0x") or t[0][0] in "+-*"):
                continue
            a = t[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] == "+":
                addr += int(a[1:])
            elif a[0] == "-":
                addr -= int(a[1:])
            if skip:
                skip = False
                continue
            if len(t) < 3:  # "addr line Ir"
                continue
            key = (obj, addr)
            count[key] += int(t[2])
            owner[key] = fn
    return count, owner


def main():
    args = sys.argv[1:]
    max_kib = None
    if args[:1] == ["--max-kib"]:
        try:
            max_kib = float(args[1])
        except (IndexError, ValueError):
            sys.exit(f"code_footprint: --max-kib needs a number of KiB, not {' '.join(args[1:2])!r}")
        if max_kib <= 0:
            sys.exit(f"code_footprint: --max-kib needs a positive number of KiB, not {args[1]!r}")
        args = args[2:]
    if len(args) not in (2, 3):
        sys.exit("usage: " + __doc__.strip().splitlines()[2].strip())
    path = args[0]
    try:
        calls = int(args[1])
        top = int(args[2]) if len(args) == 3 else 15
    except ValueError:
        sys.exit(f"code_footprint: CALLS and TOP are whole numbers, not {' '.join(args[1:])!r}")
    if calls <= 0 or top <= 0:
        sys.exit("code_footprint: CALLS must be positive (and TOP)")
    count, owner = parse(path)
    if not count:
        sys.exit(f"code_footprint: no instruction positions in {path} (taken without --dump-instr=yes?)")
    lines = collections.defaultdict(list)  # (object, line) -> [executions of each instruction]
    for (obj, addr), n in count.items():
        lines[(obj, addr >> 6)].append(((obj, addr), n))
    hot = {k: v for k, v in lines.items() if max(n for _, n in v) * 2 >= calls}
    if not hot:
        sys.exit("code_footprint: no line ran once per two calls; CALLS too large?")
    used = [sum(1 for _, n in v if n * 2 >= calls) for v in hot.values()]
    kib = len(hot) * 64 / 1024
    print(f"hot code (lines run at least every other call): {len(hot)} lines of 64 B = {kib:.1f} KiB")
    print(f"instructions run per hot line: {sum(used) / len(used):.1f} on average "
          f"({sum(1 for u in used if u <= 4)} lines with 4 or fewer)")
    by_fn = collections.Counter()
    run_fn = collections.Counter()
    by_obj = collections.Counter()
    for ((obj, _), v), u in zip(hot.items(), used):
        # A line shared by two functions counts for the one whose instruction comes first.
        f = re.sub(r"\((?!anonymous namespace\)).*$", "", owner[min(v)[0]])
        by_fn[f] += 1
        run_fn[f] += u
        by_obj[obj.rsplit("/", 1)[-1]] += 1
    print("by object: " + ", ".join(f"{o} {n}" for o, n in by_obj.most_common(6)))
    print(f"top {top} functions by hot lines (instructions run per line):")
    for f, n in by_fn.most_common(top):
        print(f"  {n:4d}  ({run_fn[f] / n:4.1f})  {f[:100]}")
    if max_kib is not None:
        if kib > max_kib:
            print(f"code_footprint: the hot code is {kib:.1f} KiB, over the budget of {max_kib:g} KiB", file=sys.stderr)
            sys.exit(1)
        print(f"within the budget of {max_kib:g} KiB")


if __name__ == "__main__":
    main()
