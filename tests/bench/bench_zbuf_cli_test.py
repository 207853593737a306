#!/usr/bin/env python3
"""bench_zbuf's command line (see tests/bench/meson.build): --processes and bad arguments."""
import re
import subprocess
import sys

BENCH = sys.argv[1]
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += not ok


def run(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=100)


for args, name in [(["--bogus"], "unknown argument '--bogus'"), (["--rounds"], "--rounds needs a value"),
                   (["--rounds", "0"], "--rounds '0': want a whole number in [1, 1000]"),
                   (["--ops", "5x"], "--ops '5x': want a whole number"),
                   (["--processes", "-3"], "--processes '-3': want a whole number")]:
    r = run(*args)
    check(r.returncode == 2 and name in r.stderr and "usage: bench_zbuf" in r.stderr,
          f"{' '.join(args)}: exit 2, '{name}' ({r.returncode}: {r.stderr.strip()[:120]})")

r = run("--processes", "3", "--rounds", "1", "--ops", "20000")
out = r.stdout
rows = re.findall(r"^  (\d+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)$", out, re.M)
check(r.returncode == 0 and [x[0] for x in rows] == ["1", "2", "3"],
      f"--processes 3: a row per process ({r.returncode}: {r.stderr.strip()[:200]})")
# Each row's ratio is its own zbuf / mempool figure; the summary's median is the middle ratio.
check(all(abs(float(z) / float(m) - float(q)) < 0.02 for _, z, m, q, _, _ in rows), "each row's ratio is zbuf / mempool")
med = re.search(r"ratio zbuf / rte_mempool, median +([\d.]+) +\(processes ([\d.]+)-([\d.]+); target <= 1.00: (met|MISSED)\)",
                out)
ratios = sorted(float(x[3]) for x in rows)
check(med is not None and len(ratios) == 3 and abs(float(med.group(1)) - ratios[1]) < 0.011
      and abs(float(med.group(2)) - ratios[0]) < 0.011 and abs(float(med.group(3)) - ratios[2]) < 0.011
      and (med.group(4) == "met") == (float(med.group(1)) <= 1.0),
      "the summary: the median ratio, the processes' range, the target judged on the median")
if failed:
    print(out, r.stderr)
print(f"{failed} failed")
sys.exit(1 if failed else 0)
