#!/usr/bin/env python3
# tools/sim-seeds against a stand-in sim_tcp_test that fails on one shift: the
# campaign runs every shift once with CRESCENT_SIM_SEED_SHIFT set and the test
# spec passed through, reports the failing shift with the command that repeats
# it, keeps its log, exits 1; all shifts passing exits 0; bad arguments exit 2
# with a message naming them.
#   sim_seeds_test.py TOOLS/sim-seeds
import os
import subprocess
import sys
import tempfile

TOOL = os.path.abspath(sys.argv[1])

FAKE = """#!/bin/sh
echo "$CRESCENT_SIM_SEED_SHIFT $1" >> "$(dirname "$0")/calls"
if [ "$CRESCENT_SIM_SEED_SHIFT" = "{bad}" ]; then
  echo "sim_tcp_test.cpp:180: FAILED: CHECK( a->received == n )"
  exit 1
fi
echo "All tests passed (10 assertions in 21 test cases)"
"""

failures = 0


def check(cond, what, out=""):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}\n{out}")
    else:
        print(f"ok: {what}")


with tempfile.TemporaryDirectory() as d:
    build = os.path.join(d, "build")
    os.makedirs(os.path.join(build, "tests", "sim"))
    fake = os.path.join(build, "tests", "sim", "sim_tcp_test")
    calls = os.path.join(build, "tests", "sim", "calls")

    def make(bad):
        with open(fake, "w") as f:
            f.write(FAKE.replace("{bad}", str(bad)))
        os.chmod(fake, 0o755)
        if os.path.exists(calls):
            os.unlink(calls)

    make(7)
    r = subprocess.run([TOOL, "--from", "5", "--jobs", "2", build, "4"], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    check(r.returncode == 1, "a failing shift: exit 1", r.stdout)
    check("shifts 5..8 (21 cases each" in r.stdout and "3 passed, 1 failed" in r.stdout,
          "the summary names the range, the cases and the tally", r.stdout)
    check("FAIL shift 7" in r.stdout and "CRESCENT_SIM_SEED_SHIFT=7" in r.stdout,
          "the failing shift and the command that repeats it", r.stdout)
    check("FAILED: CHECK( a->received == n )" in r.stdout, "the failed check is quoted", r.stdout)
    check(os.path.exists(os.path.join(d, "sim-seeds-7.log")), "the failing shift's log is kept")
    got = sorted(open(calls).read().split("\n")[:-1])
    check(got == [f"{k} [bulk],[setup],[many],[echo]" for k in (5, 6, 7, 8)],
          "each shift ran once, with the default test spec", got)

    make(99)
    r = subprocess.run([TOOL, "--tags", "[large]", build, "3"], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    check(r.returncode == 0 and "3 passed, 0 failed" in r.stdout, "all shifts pass: exit 0", r.stdout)
    got = sorted(open(calls).read().split("\n")[:-1])
    check(got == ["1 [large]", "2 [large]", "3 [large]"], "--tags is passed through; shifts start at 1", got)

    for args, words in [(["--jobs", "0", build], "--jobs"), (["--from", "x", build], "--from"),
                        ([build, "-3"], "COUNT"), (["--tags", "", build], "--tags"),
                        (["--bogus", build], "unknown option --bogus"),
                        ([os.path.join(d, "nope"), "1"], "not built")]:
        r = subprocess.run([TOOL, *args], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
        check(r.returncode in (1, 2) and words in r.stdout, f"refused, naming {words}", r.stdout)

print(f"{failures} failed")
sys.exit(1 if failures else 0)
