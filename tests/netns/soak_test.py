#!/usr/bin/python3
"""soak_short: a 36-second tools/soak (issue 11, Soak) — churn, random sizes, every fault phase.

Usage: soak_test.py KNB CRESCENT_STAT
  KNB            the knb binary (its build directory, two levels up, is passed to tools/soak --build)
  CRESCENT_STAT  tools/crescent-stat of the same build (checked to be there)

Runs `tools/soak --minutes 0.6 --fault-every 0.1 --seed 11` (phases of 6 s: none, loss 2 %,
dup 1 %, loss 5 % burst; with seed 11 ~9 clients of 3-6 s each, each phase at least one, the
burst phase starting ~26 s in, ~10 s before the loop ends; a phase ends with its last client,
so it overruns its 6 s by up to a client's length) and checks: exit 0 with "soak: PASS"; soak.csv has a header and >= 30 rows
of integers, every row's errors column 0, some rows with server connections > 0 and
client_runs growing to > 4; all three fault phases listed with nftables counters > 0;
"errors: 0" and the drift line saying ok twice; soak.png is a PNG; the bed's namespaces
are gone afterwards. Exit: 0 pass, 1 fail, 77 skip (not root).
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOAK = os.path.join(HERE, "..", "..", "tools", "soak")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    knb, stat = sys.argv[1:]
    if os.geteuid() != 0:
        print("soak_short: skipped (needs root)")
        return 77
    bdir = os.path.dirname(os.path.dirname(os.path.abspath(knb)))
    check(os.access(stat, os.X_OK) and os.path.samefile(stat, os.path.join(bdir, "tools", "crescent-stat")),
          f"crescent-stat is built in {bdir}")
    with tempfile.TemporaryDirectory(prefix="soak-short-") as out:
        r = subprocess.run(["/usr/bin/python3", SOAK, "--minutes", "0.6", "--fault-every", "0.1", "--seed", "11",
                            "--build", bdir, "--out", out], capture_output=True, text=True, timeout=280)
        text = r.stdout + r.stderr
        print(text[-8000:])
        check(r.returncode == 0 and "soak: PASS" in r.stdout, f"tools/soak exited {r.returncode} with PASS")
        m = re.search(r"soak\d+", re.search(r"bed (soak\d+)", text).group(0))
        bed = m.group(0)
        with open(os.path.join(out, "soak.csv")) as f:
            rows = list(csv.reader(f))
        check(rows[0] == ["time_s", "rss_kib", "zbuf_live", "conns", "client_runs", "errors", "fault", "quiet"],
              "soak.csv has its header")
        data = rows[1:]
        check(len(data) >= 30 and all(int(x[1]) > 0 and int(x[2]) >= 0 for x in data),
              f"soak.csv has {len(data)} one-second rows with RSS and zbuf live")
        check(all(x[5] == "0" for x in data), "the errors column is 0 in every row")
        check(any(int(x[3]) > 0 for x in data) and int(data[-1][4]) > 4,
              f"server connections seen and {data[-1][4]} client runs counted")
        check({x[6] for x in data} >= {"none", "loss2", "dup1", "burst5"}, "every fault phase appears in the CSV")
        for f in ("loss2", "dup1", "burst5"):
            m = re.search(rf"fault {f}\s*:\s*\d+ s, (\d+) client runs, (\d+) packets", r.stdout)
            check(m is not None and int(m.group(1)) > 0 and int(m.group(2)) > 0,
                  f"fault {f}: client runs and nftables counters > 0 ({m.group(0) if m else 'missing'})")
        check(re.search(r"^  errors: 0$", r.stdout, re.M) is not None, "the summary counts 0 errors")
        m = re.search(r"responses verified byte by byte (\d+)", r.stdout)
        check(m is not None and int(m.group(1)) > 0, "responses were verified byte by byte")
        check(re.search(r"drift .*bound < 5 %: ok.*bound \+-\d+: ok", r.stdout) is not None,
              "the drift is within both bounds")
        with open(os.path.join(out, "soak.png"), "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "soak.png is a PNG")
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    check(bed not in ns, f"the bed {bed} was torn down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
