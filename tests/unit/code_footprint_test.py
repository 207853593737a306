#!/usr/bin/env python3
# tools/code_footprint.py on a synthetic callgrind profile whose hot lines are
# known: which lines count as hot (an instruction run at least every other
# call), the same address in two objects kept apart, a call's inclusive cost
# not taken for an instruction's, and bad input refused with a message.
#   code_footprint_test.py TOOLS/code_footprint.py
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
CALLS = 100

PROFILE = """\
# callgrind format
version: 1
creator: synthetic
positions: instr line
events: Ir
ob=/bin/app
fl=app.cpp
fn=hot_a()
{hot_a}
fn=hot_b(int)
0x1040 1 100
0x1044 1 100
0x1048 2 1
0x104c 2 1
0x1050 2 1
0x1054 2 1
0x1058 2 1
calls=100 0x2000 9
0x3000 3 1000000
fn=cold()
0x2000 9 10
0x2004 9 10
ob=/lib/libfoo.so
fl=foo.c
fn=(anonymous namespace)::lib_fn(char const*)
0x1000 5 60
0x1004 5 60
"""


def run(args):
    return subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True)


failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "cg.out")
    hot_a = "\n".join(f"0x{0x1000 + 4 * i:x} 1 {CALLS}" for i in range(10))
    with open(path, "w") as f:
        f.write(PROFILE.format(hot_a=hot_a))
    r = run([path, str(CALLS)])
    print(r.stdout, r.stderr, sep="")
    check(r.returncode == 0, "exit 0")
    # hot_a's line (10 instructions), hot_b's (2 of 7 run every call), libfoo's line at
    # the same address as hot_a's but in another object (2); not cold() (10 of 100
    # calls), not the call's position at 0x3000 (its cost is the callee's).
    check("3 lines of 64 B = 0.2 KiB" in r.stdout, "three hot lines")
    check("4.7 on average (2 lines with 4 or fewer)" in r.stdout, "instructions per hot line")
    check("by object: app 2, libfoo.so 1" in r.stdout, "lines per object")
    check("hot_a" in r.stdout and "hot_b" in r.stdout, "functions listed")
    check("(anonymous namespace)::lib_fn" in r.stdout, "an anonymous namespace kept in the name")
    check("cold" not in r.stdout.split("top", 1)[1], "cold() not among the hot functions")

    # --max-kib: a check. 0.2 KiB of hot code is within 0.2, over 0.1.
    r = run(["--max-kib", "0.2", path, str(CALLS)])
    check(r.returncode == 0 and "within the budget of 0.2 KiB" in r.stdout, "within a budget")
    r = run(["--max-kib", "0.1", path, str(CALLS)])
    check(r.returncode == 1 and "over the budget of 0.1 KiB" in r.stderr, "over a budget: exit 1")
    r = run(["--max-kib", "lots", path, str(CALLS)])
    check(r.returncode != 0 and "--max-kib needs a number" in r.stderr, "a budget that is not a number refused")
    r = run(["--max-kib", "-3", path, str(CALLS)])
    check(r.returncode != 0 and "positive number" in r.stderr, "a negative budget refused")

    # More calls than any line ran: nothing is hot, said so.
    r = run([path, "1000"])
    check(r.returncode != 0 and "no line ran once per two calls" in r.stderr, "CALLS too large refused")
    # A profile without instruction positions (taken without --dump-instr=yes).
    bare = os.path.join(d, "bare.out")
    with open(bare, "w") as f:
        f.write("version: 1\npositions: line\nevents: Ir\nfn=f\n12 100\n")
    r = run([bare, str(CALLS)])
    check(r.returncode != 0 and "no instruction positions" in r.stderr, "a profile without positions refused")
    r = run([path, "0"])
    check(r.returncode != 0 and "CALLS must be positive" in r.stderr, "CALLS 0 refused")
    r = run([path, "many"])
    check(r.returncode != 0 and "whole numbers" in r.stderr, "CALLS not a number refused")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
