#!/usr/bin/env python3
"""crescent-stat against a running crescent process (issue 12, observability items 1-2).

Usage: stat_test.py KNB CRESCENT_STAT CASE
  KNB            the knb binary
  CRESCENT_STAT  tools/crescent-stat
  CASE           load | errors

  load    over knb's veth bed (tools/knb-bed, as in knb_test.py): knb server --stack crescent,
          a knb client under load for 5 s, meanwhile `crescent-stat PID` twice (rx/tx counters
          present and increasing between the reads, zbuf and timer counters present),
          `crescent-stat top -n 2 PID` (two refreshes, engine 0 with rx packets per second > 0),
          `crescent-stat ss PID` and `ss PID state=established port=7300` (the client's
          connection ESTABLISHED from 10.77.0.2 with its port, cwnd > 0, srtt > 0, the
          listener on 7300 listed without filters); after the server exits its control
          socket file is gone (and it was in /run/crescent: the runtime's log line names it).
  errors  one line and exit 1: no such process, a process without a control socket, a name
          nothing matches (no root needed).
Exit: 0 pass, 1 fail, 77 skip (not root).
"""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import check  # noqa: E402
import knb_test  # noqa: E402  (the bed: tools/knb-bed up veth, its names and addresses)

KNB = STAT = None


def stat(*args, rc=0, timeout=30):
    return nslib.stat(STAT, *args, rc=rc, timeout=timeout)


def counters(pid):
    return nslib.counters(STAT, pid, strict=True, timeout=30)


def case_load():
    knb_test.KNB = KNB
    with knb_test.Bed() as b:
        srv = b.server([KNB, "server", "--stack", "crescent", "--cpus", "0"] + knb_test.crescent_dev("a"),
                       "knb server")
        pid = srv.p.pid  # ip netns exec execs the server: same pid
        m = re.search(r"control socket (\S+) \(crescent-stat (\d+)\)", srv.output())
        check(m is not None and m.group(2) == str(pid), f"the runtime's log line names the control socket: "
              f"{m.group(1) if m else srv.output()[-1500:]}")
        sock = m.group(1)
        check(sock == f"/run/crescent/{pid}.sock" and os.path.exists(sock), f"{sock} exists (root: /run/crescent)")
        result = {}

        def load():
            result["r"] = b.client(["--stack", "crescent"] + knb_test.crescent_dev("b") +
                                   ["--duration", "5", "--warmup", "0.5", "--iodepth", "4"])

        t = threading.Thread(target=load)
        t.start()
        try:
            time.sleep(1.2)  # the client's EAL start and warm-up
            c1 = counters(pid)
            time.sleep(0.5)
            c2 = counters(pid)
            for k in ("engine.0.rx_packets", "engine.0.tx_packets", "engine.0.rx_bytes", "engine.0.loops",
                      "engine.0.idle_loops", "engine.0.busy_loops", "engine.0.timers_pending",
                      "engine.0.epoll_events", "engine.0.connections", "engine.0.tcp_segs_in", "zbuf.2048.capacity", "zbuf.2048.alloc_failed", "pid", "engines"):
                check(k in c1, f"crescent-stat lists {k} ({c1.get(k)})")
            for k in ("engine.0.rx_packets", "engine.0.tx_packets", "engine.0.tx_bytes", "engine.0.loops",
                      "engine.0.busy_ns", "engine.0.published", "engine.0.phase_samples", "engine.0.phase_poll_ns",
                      "engine.0.phase_tcp_ns", "engine.0.phase_flush_ns"):
                check(c2[k] > c1[k], f"{k} increased between two reads ({c1[k]} -> {c2[k]})")
            check(c2["pid"] == pid and c2["engines"] == 1, "the counters are the server's (pid, one engine)")
            busy, wall = c2["engine.0.busy_ns"] - c1["engine.0.busy_ns"], c2["engine.0.mono_ns"] - c1["engine.0.mono_ns"]
            check(0 < busy <= wall, f"busy_ns grew by a part of the time between the reads ({busy} of {wall} ns)")

            ss = stat("ss", pid).stdout
            check(re.search(r"^LISTEN\s+0\s+\S+\s+\S+\s+10\.77\.0\.1:7300", ss, re.M) is not None,
                  "ss lists the listener on 10.77.0.1:7300")
            est = stat("ss", pid, "state=established", "port=7300").stdout
            lines = est.splitlines()
            conn = [i for i, l in enumerate(lines) if re.match(r"^ESTABLISHED\s+0\s+\d+\s+\d+\s+10\.77\.0\.1:7300\s+"
                                                               r"10\.77\.0\.2:(\d+)", l)]
            check(len(conn) >= 1 and "LISTEN" not in est, f"ss state=established port=7300 lists the client's "
                  f"connection and no listener:\n{est}")
            port = int(re.search(r"10\.77\.0\.2:(\d+)", lines[conn[0]]).group(1))
            detail = lines[conn[0] + 1]
            cwnd = int(re.search(r"cwnd:(\d+)", detail).group(1))
            srtt = float(re.search(r"rtt:([\d.]+)/", detail).group(1))
            check(cwnd > 0 and srtt > 0 and port > 1024,
                  f"the client's connection from port {port}: cwnd {cwnd} > 0, srtt {srtt} ms > 0 ({detail.strip()})")
            top = stat("top", "-n", "2", pid, timeout=20).stdout
            rows = [l.split() for l in top.splitlines() if re.match(r"^0\s", l)]
            check(len(rows) == 2 and all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows),
                  f"top refreshed twice with engine 0's rx/tx packets per second > 0: {[r[1:3] for r in rows]}")
            check(all(0 < float(r[5]) <= 100 for r in rows), f"top's busy% is a share of the core: {[r[5] for r in rows]}")
            # The phase means (poll, rx, output, flush ns) of the iterations timed each second.
            check(all(len(r) == 12 and float(r[8]) > 0 and float(r[9]) > 0 and float(r[11]) > 0 for r in rows),
                  f"top shows where engine 0's busy iterations spent their time: {[r[8:12] for r in rows]}")

            none = stat("ss", pid, "state=syn-sent").stdout
            check(len(none.splitlines()) == 1, "a filter nothing matches lists only the header")
        finally:
            t.join(60)
        rc, out, d = result.get("r", (1, "no result", None))
        knb_test.sane(rc, out, d, "the knb client under observation")
        check(srv.stop() == 0, "the server exited 0 on SIGTERM")
        check(not os.path.exists(sock), f"{sock} is gone after the server exited")
        r = stat(pid, rc=1)
        check("no such process" in r.stderr, f"after exit: {r.stderr.strip()}")


def case_errors():
    r = stat("999999999", rc=1)
    check(r.stderr.strip() == "crescent-stat: no such process: 999999999", f"no such process: {r.stderr.strip()}")
    r = stat(os.getpid(), rc=1)
    check(r.stderr.startswith("crescent-stat: process ") and "has no control socket" in r.stderr and
          r.stderr.count("\n") == 1, f"a process without a socket: {r.stderr.strip()}")
    r = stat("no-such-name-xyz", rc=1)
    check(r.stderr.strip() == "crescent-stat: no process named no-such-name-xyz", f"no match: {r.stderr.strip()}")
    r = stat("top", "-n", rc=1)
    check("-n needs a count" in r.stderr, f"bad -n: {r.stderr.strip()}")


CASES = {"load": case_load, "errors": case_errors}


def main():
    global KNB, STAT
    (KNB, STAT), case = nslib.parse_args(__doc__, CASES, 2)
    return nslib.run(CASES[case], None if case == "errors" else nslib.need_root())


if __name__ == "__main__":
    sys.exit(main())
