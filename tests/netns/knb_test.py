#!/usr/bin/env python3
"""knb end to end over the veth bed (issue 10): every stack and mode, both protocols, the
failures a user meets, and the sweep the main job runs.

Usage: knb_test.py KNB KERNEL_ECHO CRESCENT_ECHO CASE
  KNB            the knb binary
  KERNEL_ECHO    examples/kernel-echo (an RFC 862 server knb did not write)
  CRESCENT_ECHO  examples/crescent-echo (the same over crescent)
  CASE           crescent | kernel | echo | failures | sweep | kernel_client | repeat | loss | badargs

Every case but badargs builds its own bed with `tools/knb-bed up veth` under
KNB_BED_NAME=kn<pid> (server in NAME-a 10.77.0.1, client in NAME-b 10.77.0.2) and always
tears it down (no namespace or hugepage file left: checked). Runs are 1 s after 0.5 s of
warm-up, server on CPU 0 and client on the last CPU. A run is sane when its JSON document
says ok, requests > 0, errors == 0 and every completed response was verified — never a
timing threshold. Exit: 0 pass, 1 fail, 77 skip (not root).

  crescent  knb server/client --stack crescent (AF_XDP + steering) in modes inline, batch
            and copy over rpc (64 B iodepth 4; 4 KiB iodepth 16 in inline), and an open-loop
            run (--rate 20000): RPC/s within 25% of the rate asked, latency counted from the
            intended send time; the server's CPU time and retransmissions were reported.
  kernel    --stack kernel with --kernel-wait busy and block (64 B and 64 KiB).
  echo      --proto echo: knb client (crescent, then kernel) against kernel-echo and
            crescent-echo, servers knb did not write; knb server --proto echo too.
  failures  one line and exit 1 for: no server (unreachable), an RPC client against an
            echo server, a server speaking another knb protocol version (a fake in
            Python), a server killed mid-run (partial results still written: ok false,
            requests > 0, the error named); a server stopped (SIGSTOP) in the warm-up:
            'no response arrived in the measured window' and the connection's TCP state
            (its requests in flight, retransmitted).
  sweep     knb sweep over the bed (64 B, iodepth 1 and 4, crescent inline against kernel
            busy and block) with the main job's coexistence probe (a kernel HTTP server on
            the server's interface and address answers during the crescent run): one
            document with 6 runs, the side-by-side table, the probe answered.
  kernel_client  knb sweep --kernel-client (64 B and 4 KiB, iodepth 1): a busy kernel client
            against the crescent server, and against the busy kernel server on port 7301
            while a napping crescent server holds the steering program; the document's
            "kernel_client" array (not "runs", which the plots draw), labels
            kernel>crescent/inline and kernel>kernel/busy+xdp, every run sane, and the
            table row per point with both ratios.
  repeat    knb sweep --repeat 2 (64 B, iodepth 1, crescent inline against kernel busy): the
            grid twice, each run's document saying its round (two of each variant, one per
            round), the raw limit once per round, and tables of medians with the range
            of the rounds' own ratios, fractions and ceilings (raw over the kernel).
  loss      knb sweep --loss 2 --kernel-rto-min 5 (4 KiB, iodepth 1, crescent inline against
            kernel busy): each run's document says how it lost frames — crescent through
            --impair at 1-sqrt(1-2%) on each of the two crossings, and retransmitted; the
            kernel through the bed's nftables rules, which counted its frames and dropped
            0.5-6 % of them, and it retransmitted too. During the kernel run the route
            carried rto_min 5 ms; after the sweep no loss table and no rto_min are left.
            tools/knb-bed refuses kernel-loss on memif and a percentage above 50.
  badargs   bad options: one line naming the problem, exit 2 (no root needed).
"""
import glob
import json
import os
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import Fail, check  # noqa: E402

KNB_BED = os.path.join(nslib.HERE, "..", "..", "tools", "knb-bed")
KNB = KECHO = CECHO = None
NAME = f"kn{os.getpid() % 100000}"
ENV = dict(os.environ, KNB_BED_NAME=NAME)
CPU_C = str((os.cpu_count() or 1) - 1)
SERVER_IP = "10.77.0.1"


def bed(*args):
    r = subprocess.run([KNB_BED] + list(args), capture_output=True, text=True, timeout=90, env=ENV)
    if r.returncode != 0:
        raise Fail(f"knb-bed {' '.join(args)} -> {r.returncode}: {r.stderr.strip()[-1500:]}")
    return r


class Bed:
    def __init__(self):
        self.a, self.b = NAME + "-a", NAME + "-b"
        self.procs = []
        self.files = []

    def __enter__(self):
        bed("up", "veth")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.end()
        subprocess.run([KNB_BED, "down", "veth"], timeout=90, env=ENV)
        for f in self.files:
            try:
                os.unlink(f)
            except OSError:
                pass
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        huge = [f for f in os.listdir("/dev/hugepages") if f.startswith(NAME)] if os.path.isdir("/dev/hugepages") else []
        # A crescent server killed outright (the failures case) cannot remove its registry entry.
        reg = glob.glob(f"/run/crescent/*/{NAME}-v[ab]")
        if not exc[0]:
            check(NAME not in left and not huge and not reg,
                  f"the bed left no namespace, no hugepage file and no registry entry {reg or ''}")
        return False

    def server(self, args, name="knb server"):
        p = nslib.Proc(self.a, args, name)
        self.procs.append(p)
        if not p.wait_for(r"knb server: ready|serving|listening", timeout=40):
            raise Fail(f"{name} did not come up:\n{p.output()[-3000:]}")
        return p

    def client(self, args, timeout=60):
        doc = f"/tmp/{NAME}-{len(self.files)}.json"
        self.files.append(doc)
        try:
            os.unlink(doc)
        except OSError:
            pass
        r = nslib.sh(KNB, "client", "--server", SERVER_IP, "--json", doc, "--cpus", CPU_C, *args,
                     ns=self.b, check_rc=False, timeout=timeout)
        out = r.stdout + r.stderr
        d = None
        if os.path.exists(doc):
            with open(doc) as f:
                d = json.load(f)
        return r.returncode, out, d


def crescent_dev(side):
    return ["--iface", f"{NAME}-v{side}", "--file-prefix", f"{NAME}-{side}"]


def sane(rc, out, d, what):
    check(rc == 0 and d is not None, f"{what}: exit 0 and a JSON document" + ("" if rc == 0 else f"\n{out[-2500:]}"))
    r = d["result"]
    check(r["ok"] and r["requests"] > 0 and r["errors"] == 0 and r["verified"] == r["completed"] > 0,
          f"{what}: {r['rps']:.0f} RPC/s, {r['requests']} responses in the window, all {r['verified']} verified, "
          f"no error (p50 {r['latency_us']['p50']:.1f} us, p99 {r['latency_us']['p99']:.1f} us)")
    return d


RUN = ["--duration", "1", "--warmup", "0.5"]


def case_crescent():
    with Bed() as b:
        for mode in ("inline", "batch", "copy"):
            srv = b.server([KNB, "server", "--stack", "crescent", "--mode", mode, "--cpus", "0", "--stats"]
                           + crescent_dev("a"), f"knb server ({mode})")
            cl = ["--stack", "crescent", "--mode", mode] + crescent_dev("b") + RUN
            d = sane(*b.client(cl + ["--iodepth", "4"]), f"crescent {mode} 64 B iodepth 4")
            check(d["server"]["stack"] == "crescent" and d["server"]["mode"] == mode,
                  f"the server said it runs crescent in {mode} mode (knb.info)")
            check(d["result"]["cpu_s"]["server"] is not None and d["result"]["retrans"]["server"] is not None
                  and d["result"]["drops"]["server"] is not None,
                  "the server's CPU time, retransmissions and drops came back (knb.stats)")
            rto, rx = d["result"]["retrans_timeout"], d["result"]["retrans"]
            check(rto["server"] is not None and rto["client"] is not None
                  and rto["server"] <= rx["server"] and rto["client"] <= rx["client"],
                  f"both sides' retransmissions after an RTO came back, a part of all: {rto} of {rx}")
            # Busy time is wall time (TSC) in iterations that found work, so it
            # is a part of the window's wall time per RPC, not of the CPU time:
            # a thread preempted inside a busy iteration (a loaded machine, CPU
            # steal) counts the gap as busy but not as CPU.
            busy, wall = d["result"]["busy_us_per_rpc"], 1e6 / d["result"]["rps"]
            check(busy["server"] is not None and 0 < busy["server"] <= wall * 1.05
                  and 0 < busy["client"] <= wall * 1.05,
                  f"the engines' busy time per RPC is a part of the wall time per RPC: server {busy['server']} "
                  f"and client {busy['client']} of {wall:.3f} us")
            # Sampled phase times (EngineStats::phase_ns) of both sides' engines.
            for side, p in d["result"]["phase_ns"].items():
                check(p is not None and p["samples"] > 0 and p["poll"] > 0 and p["parse"] > 0 and p["tcp"] > 0
                      and p["app"] > 0 and p["flush"] > 0 and all(p[k] >= 0 for k in ("timers", "output", "rest")),
                      f"the {side}'s engine timed some of its RX iterations phase by phase: {p}")
            if mode == "inline":
                sane(*b.client(cl + ["--iodepth", "16", "--msg-size", "4096"]), "crescent inline 4 KiB iodepth 16")
                sane(*b.client(cl + ["--resp-size", "20000", "--msg-size", "100"]),
                     "crescent inline 100 B requests, 20000 B pre-filled responses")
                d = sane(*b.client(cl + ["--rate", "20000", "--iodepth", "8"]), "crescent open loop at 20000/s")
                check(d["config"]["loop"] == "open" and 15000 <= d["result"]["rps"] <= 25000,
                      f"the open loop sent at the rate asked ({d['result']['rps']:.0f}/s for 20000/s)")
            rc = srv.stop()
            check(rc == 0, f"the {mode} server exited 0 on SIGTERM")
            check(re.search(r"^server 0: accepted=\d+ requests=[1-9]", srv.output(), re.M) is not None,
                  f"the {mode} server counted the requests (--stats)")


def case_kernel():
    with Bed() as b:
        for wait in ("busy", "block"):
            srv = b.server([KNB, "server", "--stack", "kernel", "--kernel-wait", wait, "--cpus", "0"],
                           f"knb server (kernel {wait})")
            cl = ["--stack", "kernel", "--kernel-wait", wait] + RUN
            d = sane(*b.client(cl + ["--iodepth", "4"]), f"kernel {wait} 64 B iodepth 4")
            check(d["server"]["stack"] == "kernel" and d["server"]["kernel_wait"] == wait,
                  f"the server said it runs kernel TCP, {wait} (knb.info)")
            check(d["result"]["phase_ns"] == {"client": None, "server": None},
                  f"kernel TCP has no engine phases to report: {d['result']['phase_ns']}")
            check(d["result"]["retrans_timeout"] == {"client": None, "server": None},
                  f"nor its RTOs apart (tcp_info counts all retransmissions as one): {d['result']['retrans_timeout']}")
            sane(*b.client(cl + ["--msg-size", "65536", "--iodepth", "2"]), f"kernel {wait} 64 KiB iodepth 2")
            check(srv.stop() == 0, f"the kernel {wait} server exited 0 on SIGTERM")


def case_echo():
    with Bed() as b:
        # kernel-echo: a blocking kernel server (one thread per connection) knb did not write.
        srv = b.server([KECHO, "--port", "7", "--addr", SERVER_IP], "kernel-echo")
        for stack in ("kernel", "crescent"):
            dev = crescent_dev("b") if stack == "crescent" else []
            d = sane(*b.client(["--stack", stack, "--proto", "echo", "--port", "7", "--msg-size", "1000",
                                "--iodepth", "4"] + dev + RUN), f"{stack} knb client against kernel-echo")
            check(d["server"] is None, "an echo server is not asked for knb.info (server: null)")
        srv.stop()
        srv = b.server([CECHO, "--port", "7"] + crescent_dev("a"), "crescent-echo")
        sane(*b.client(["--stack", "kernel", "--proto", "echo", "--port", "7", "--msg-size", "3000", "--iodepth", "8"]
                       + RUN), "kernel knb client against crescent-echo")
        srv.stop()
        srv = b.server([KNB, "server", "--stack", "crescent", "--proto", "echo", "--cpus", "0"] + crescent_dev("a"),
                       "knb server --proto echo")
        sane(*b.client(["--stack", "crescent", "--proto", "echo", "--msg-size", "64", "--iodepth", "16"]
                       + crescent_dev("b") + RUN), "crescent knb client against knb's crescent echo server")
        srv.stop()


def fake_server(ns, port, stop):
    """A kernel TCP server in `ns` that answers every crescent-RPC request with knb.info of version 99."""
    code = r"""
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", %d)); s.listen(4); print("listening", flush=True)
while True:
    c, _ = s.accept(); buf = b""
    while True:
        d = c.recv(65536)
        if not d: break
        buf += d
        while len(buf) >= 32:
            magic, ver, kind, flags, method, status, call, ml, dl = struct.unpack("<4sBBHIIQII", buf[:32])
            if len(buf) < 32 + ml + dl: break
            buf = buf[32 + ml + dl:]
            meta = b"knb=99;stack=crescent;mode=inline;threads=1;wait=busy;proto=rpc"
            c.sendall(struct.pack("<4sBBHIIQII", magic, ver, 1, 0, method, 0, call, len(meta), 0) + meta)
    c.close()
""" % port
    return nslib.Proc(ns, ["/usr/bin/python3", "-c", code], "fake knb server")


def case_failures():
    with Bed() as b:
        # Nobody listening.
        rc, out, d = b.client(["--stack", "kernel"] + RUN)
        check(rc == 1 and "cannot reach the knb server at 10.77.0.1:7300" in out,
              "no server: exit 1, 'cannot reach the knb server at 10.77.0.1:7300'")
        check(d is not None and d["result"]["ok"] is False and d["result"]["error"],
              "no server: the document is still written, ok false, the error named")
        rc, out, _ = b.client(["--stack", "crescent"] + crescent_dev("b") + RUN)
        check(rc == 1 and "cannot reach the knb server" in out, "no server over crescent: exit 1, one line")
        # An RPC client against an echo server.
        srv = b.server([KECHO, "--port", "7300", "--addr", SERVER_IP], "kernel-echo")
        rc, out, _ = b.client(["--stack", "kernel"] + RUN)
        check(rc == 1 and "does not speak knb's RPC" in out, "rpc client vs echo server: exit 1, 'does not speak knb's RPC'")
        srv.stop()
        # Another protocol version.
        fake = fake_server(b.a, 7300, None)
        b.procs.append(fake)
        check(fake.wait_for("listening", 20), "the fake server listens")
        rc, out, _ = b.client(["--stack", "kernel"] + RUN)
        check(rc == 1 and "protocol version mismatch" in out and "knb protocol 99, this client 1" in out,
              "version mismatch: exit 1, 'protocol version mismatch ... knb protocol 99, this client 1'")
        fake.end()
        # A server that dies mid-run: SIGKILL 2 s into a 4 s window.
        for stack in ("kernel", "crescent"):
            dev_a = crescent_dev("a") if stack == "crescent" else []
            srv = b.server([KNB, "server", "--stack", stack, "--cpus", "0"] + dev_a, f"knb server ({stack})")
            killer = threading.Timer(2.5, lambda: srv.p.send_signal(signal.SIGKILL))
            killer.start()
            dev_b = crescent_dev("b") if stack == "crescent" else []
            rc, out, d = b.client(["--stack", stack, "--duration", "4", "--warmup", "0.5", "--iodepth", "4"] + dev_b)
            killer.join()
            srv.end()
            check(rc == 1 and ("went away mid-run" in out or "closed" in out or "failed" in out),
                  f"{stack}: server killed mid-run: exit 1, named: {out.strip().splitlines()[-1] if out.strip() else ''}")
            r = d["result"] if d else {}
            check(d is not None and r["ok"] is False and r["requests"] > 0 and 0 < r["seconds"] < 4,
                  f"{stack}: partial results written: {r.get('requests')} responses over {r.get('seconds', 0):.2f} s")
            if stack == "crescent":
                nslib.clean_hugefiles(f"{NAME}-a")
        # A server that stops answering (SIGSTOP during the warm-up): exit 1, "no response
        # arrived in the measured window", and where the connection stood — the kernel
        # client's requests unacknowledged and retransmitted (crescent's engine is stopped).
        srv = b.server([KNB, "server", "--stack", "crescent", "--cpus", "0"] + crescent_dev("a"), "knb server (stopped)")
        stopped = threading.Event()

        def stop_when_running():
            # Once the run's connection carried 1 MiB (the warm-up began; knb.info's probe is
            # ~100 B) — not after a fixed delay, which a loaded machine's start-up outlasts.
            end = time.time() + 20
            while time.time() < end and not stopped.is_set():
                r = nslib.sh("ss", "-Htin", "dst", SERVER_IP, ns=b.b, check_rc=False, timeout=10)
                if sum(int(x) for x in re.findall(r"bytes_sent:(\d+)", r.stdout)) > 1 << 20:
                    srv.p.send_signal(signal.SIGSTOP)
                    stopped.set()
                    return
                time.sleep(0.02)

        stopper = threading.Thread(target=stop_when_running)
        stopper.start()
        try:
            rc, out, d = b.client(["--stack", "kernel", "--duration", "1", "--warmup", "1", "--iodepth", "4",
                                   "--msg-size", "65536"])
        finally:
            stopped.set()
            stopper.join()
            srv.p.send_signal(signal.SIGCONT)
            srv.end()
            nslib.clean_hugefiles(f"{NAME}-a")
        conn = re.search(r"^knb client: engine 0: conn 0: ESTABLISHED bytes in \d+ out \d+ in flight (\d+) .*"
                         r"retrans (\d+) ", out, re.M)
        check(rc == 1 and "no response arrived in the measured window" in out,
              "a stopped server: exit 1, 'no response arrived in the measured window'"
              + ("" if rc == 1 and "no response arrived" in out else f" (rc {rc}):\n{out[-1500:]}"))
        check(conn is not None and int(conn.group(1)) > 0 and int(conn.group(2)) > 0,
              "... and the connection's state: its requests in flight and retransmitted"
              + (f" ({conn.group(0)})" if conn else f":\n{out[-1500:]}"))


def run_sweep(tag, args, keep_log=None):
    """knb sweep --bed veth ARGS (1 s after 0.3 s, server on CPU 0), printed; exit 0 checked.
    Returns (the process, the sweep's document, the text of the first --out log whose name
    starts with keep_log or "")."""
    doc = f"/tmp/{NAME}-{tag}.json"
    out_dir = f"/tmp/{NAME}-{tag}"
    try:
        r = subprocess.run([KNB, "sweep", "--bed", "veth"] + args +
                           ["--duration", "1", "--warmup", "0.3", "--server-cpus", "0", "--client-cpus", CPU_C,
                            "--json", doc, "--out", out_dir],
                           capture_output=True, text=True, timeout=300, env=ENV)
        names = sorted(os.listdir(out_dir)) if keep_log and os.path.isdir(out_dir) else []
        log = next((open(os.path.join(out_dir, f)).read() for f in names if f.startswith(keep_log)), "")
        print(r.stdout)
        print(r.stderr[-3000:])
        check(r.returncode == 0, f"knb sweep {' '.join(args)} exited 0 (rc {r.returncode})")
        with open(doc) as f:
            return r, json.load(f), log
    finally:
        subprocess.run(["rm", "-rf", out_dir, doc])


def case_sweep():
    with Bed() as b:
        http = nslib.Proc(b.a, ["/usr/bin/python3", "-m", "http.server", "8080", "--bind", SERVER_IP,
                                "--directory", "/tmp"], "http.server")
        b.procs.append(http)
        probe = (f"ip netns exec {NAME}-b curl -sS -m 5 -o /dev/null -w 'HTTP %{{http_code}}' "
                 f"http://{SERVER_IP}:8080/")
        r, d, _ = run_sweep("sweep", ["--sizes", "64", "--iodepths", "1,4", "--modes", "inline", "--kernel-waits",
                                      "busy,block", "--probe", probe])
        check(d["kind"] == "sweep" and len(d["runs"]) == 6 and not d["failed"],
              f"one sweep document with 6 runs, none failed ({len(d['runs'])} runs)")
        variants = sorted({x["config"]["label"] for x in d["runs"]})
        check(variants == ["crescent/inline", "kernel/block", "kernel/busy"], f"the variants: {variants}")
        for x in d["runs"]:
            check(x["result"]["ok"] and x["result"]["requests"] > 0 and x["result"]["errors"] == 0,
                  f"{x['config']['label']} 64 B iodepth {x['config']['iodepth']}: {x['result']['rps']:.0f} RPC/s, no error")
        check(len(d["probes"]) == 1 and d["probes"][0]["exit"] == 0 and "HTTP 200" in d["probes"][0]["output"],
              f"the kernel HTTP server on the same address answered during the crescent run: {d['probes']}")
        table = [l for l in r.stdout.splitlines() if re.match(r"^(64)\s+[14]\s+1\s+\|", l)]
        check(len(table) == 4, "the side-by-side table: 2 points x 2 kernel variants, with ratios")
        check(all(re.search(r"\d+\.\d\dx\s+\d+\.\d\dx$", l) for l in table), "every table row carries both ratios")


def case_kernel_client():
    with Bed():
        r, d, holder = run_sweep("kc", ["--kernel-client", "--sizes", "64,4096", "--iodepths", "1", "--modes", "inline",
                                        "--kernel-waits", "busy"], keep_log="server-xdp-holder")
        labels = sorted({x["config"]["label"] for x in d["runs"]})
        check(labels == ["crescent/inline", "kernel/busy"] and len(d["runs"]) == 4 and not d["failed"],
              f"'runs' holds the crescent and kernel/busy runs only, none failed: {labels}, {len(d['runs'])} runs")
        kc = d.get("kernel_client", [])
        served = sorted((k["served_by"], k["run"]["config"]["msg_size"]) for k in kc)
        check(served == [("crescent/inline", 64), ("crescent/inline", 4096), ("kernel/busy+xdp", 64),
                         ("kernel/busy+xdp", 4096)], f"'kernel_client': each size served by crescent and by the "
              f"kernel behind the steering program: {served}")
        for k in kc:
            c, res = k["run"]["config"], k["run"]["result"]
            check(c["stack"] == "kernel" and c["kernel_wait"] == "busy" and c["label"] == "kernel>" + k["served_by"],
                  f"{k['served_by']}: the client is the busy kernel one, labelled {c['label']}")
            check(res["ok"] and res["requests"] > 0 and res["errors"] == 0,
                  f"kernel client served by {k['served_by']}, {c['msg_size']} B: {res['rps']:.0f} RPC/s, no error")
            check((c.get("port") == 7301) == (k["served_by"] == "kernel/busy+xdp"),
                  f"{k['served_by']}: port {c.get('port')} (7301 only for the kernel server beside crescent)")
        check("knb server: ready: rpc over crescent" in holder,
              "the steering holder (a crescent knb server) was up during the kernel/busy+xdp runs")
        table = [l for l in r.stdout.splitlines() if re.match(r"^(64|4096)\s+1\s+1\s+\|.*\|.*\|.*\|", l)]
        kc_rows = [l for l in table if l.count("|") == 4]
        check(len(kc_rows) == 2 and all(re.search(r"\d+\.\d\dx\s+\d+\.\d\dx$", l) for l in kc_rows),
              f"the kernel-client table: a row per size with both ratios ({len(kc_rows)} rows)")


def case_repeat():
    with Bed():
        r, d, _ = run_sweep("repeat", ["--stacks", "crescent,kernel", "--kernel-waits", "busy", "--sizes", "64",
                                       "--iodepths", "1", "--repeat", "2", "--raw"])
        check(d.get("repeat") == 2 and not d["failed"], f"the document says repeat 2, none failed ({d.get('repeat')})")
        rounds = sorted((x["config"]["label"], x.get("round")) for x in d["runs"])
        check(rounds == [("crescent/inline", 1), ("crescent/inline", 2), ("kernel/busy", 1), ("kernel/busy", 2)],
              f"each variant ran once per round, and its document says which: {rounds}")
        raw_rounds = sorted(x.get("round") for x in d["raw"])
        check(raw_rounds == [1, 2] and all(x["ok"] for x in d["raw"]), f"the raw limit once per round: {raw_rounds}")
        check("# round 1 of 2" in r.stdout and "# round 2 of 2" in r.stdout, "the run rows are headed by their round")
        cmp_rows = [l for l in r.stdout.splitlines() if re.match(r"^64\s+1\s+1\s+\|\s+\d+\s+\d+\.\d\s+\d+\.\d\s+\|", l)]
        check(len(cmp_rows) == 1 and re.search(r"\d+\.\d\dx\s+\d+\.\d\dx \| \d+\.\d\d-\d+\.\d\dx in 2$",
                                                cmp_rows[0]),
              f"one comparison row: the medians' ratios and the two rounds' range: {cmp_rows}")
        med = sorted(x["result"]["rps"] for x in d["runs"] if x["config"]["label"] == "crescent/inline")
        shown = float(cmp_rows[0].split("|")[1].split()[0]) if cmp_rows else -1
        check(abs(shown - sum(med) / 2) <= 1, f"the crescent figure is the median of its rounds: {shown} of {med}")
        raw_rows = [l for l in r.stdout.splitlines() if re.match(r"^64\s+1\s+1\s+\|\s+crescent/inline\s+\d", l)]
        check(len(raw_rows) == 1 and re.search(r"\| +\d\.\d{3} \| \d\.\d\d-\d\.\d\d in 2$", raw_rows[0]),
              f"one raw row: the fraction of medians and the rounds' range: {raw_rows}")
        ceil_rows = [l for l in r.stdout.splitlines() if re.match(r"^64\s+1\s+1\s+\|\s+166\s+\d+ \| kernel/busy\s+\d+ \|", l)]
        check(len(ceil_rows) == 1 and re.search(r"\|\s+\d+\.\d\dx \| \d+\.\d\d-\d+\.\d\dx in 2$", ceil_rows[0]),
              f"one ceiling row (raw round trips/s over the busy kernel's RPC/s), with the rounds' range: {ceil_rows}")


def case_loss():
    with Bed() as b:
        probe = (f"ip -n {NAME}-a route show 10.77.0.0/24; ip netns exec {NAME}-a nft list tables")
        r, d, _ = run_sweep("loss", ["--stacks", "crescent,kernel", "--kernel-waits", "busy", "--sizes", "4096",
                                     "--iodepths", "1", "--loss", "2", "--kernel-rto-min", "5"])
        check(d.get("loss_pct") == 2 and d.get("kernel_rto_min_ms") == 5 and not d["failed"],
              f"the document says loss_pct 2 and kernel_rto_min_ms 5, none failed ({d.get('loss_pct')}, "
              f"{d.get('kernel_rto_min_ms')})")
        runs = {x["config"]["label"]: x for x in d["runs"]}
        check(sorted(runs) == ["crescent/inline", "kernel/busy"], f"one run per variant: {sorted(runs)}")
        for label, x in runs.items():
            res = x["result"]
            check(res["ok"] and res["requests"] > 0 and res["errors"] == 0,
                  f"{label} at 2 % loss: {res['rps']:.0f} RPC/s, every response verified")
            rt = res["retrans"]["client"] + (res["retrans"].get("server") or 0)
            check(rt > 0, f"{label} retransmitted what it lost ({rt} retransmissions)")
        c = runs["crescent/inline"].get("loss", {})
        check(c.get("pct") == 2 and c.get("impair", "").startswith("loss=1.005"),
              f"crescent's document names its impairment, 1 - sqrt(0.98) per crossing: {c}")
        k = runs["kernel/busy"].get("loss", {})
        share = k.get("dropped", 0) / max(k.get("frames", 0), 1)
        check(k.get("pct") == 2 and k.get("frames", 0) > 100 and 0.005 <= share <= 0.06,
              f"the kernel's document counts the frames netfilter saw and dropped: {k} ({100 * share:.2f} %)")
        check(re.search(r"netfilter dropped \d+ of \d+ TCP frames", r.stderr) is not None,
              "the sweep said what netfilter dropped in the kernel run")
        check("# --loss 2:" in r.stdout and "rto_min 5 ms" in r.stdout, "the header names the loss and the kernel's rto_min")
        after = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=20).stdout
        check("rto_min" not in after and "knb_loss" not in after,
              f"the bed is back as it was: no rto_min on the route, no loss table ({after.strip()!r})")
        for args, want in [(["kernel-loss", "memif", "1"], "knb-bed: kernel-loss: the memif bed has no kernel TCP"),
                           (["kernel-loss", "veth", "51"], "knb-bed: kernel-loss: '51' is not a percentage (0..50)")]:
            rr = subprocess.run([KNB_BED] + args, capture_output=True, text=True, timeout=30, env=ENV)
            check(rr.returncode == 2 and rr.stderr.strip() == want, f"knb-bed {' '.join(args)} -> exit 2, '{want}' "
                  f"(got {rr.returncode}: {rr.stderr.strip()!r})")


def case_badargs():
    cases = [
        (["client", "--stack", "kernel"], "knb client: client: --server IP is required"),
        (["client", "--stack", "kernel", "--server", "1.2.3.4", "--iodepth", "x"],
         "knb client: --iodepth: 'x' is not a number in 1..1024"),
        (["server", "--stack", "quic"], "knb server: --stack: 'quic' is not crescent or kernel"),
        (["bench"], "knb bench: the first argument must be server, client, sweep or raw, not 'bench'"),
        (["sweep", "--json", "/tmp/x.json"], "knb sweep: give --bed veth or --bed memif"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--sizes", "64,,4096"],
         "knb sweep: --sizes: '64,,4096' is not a list of sizes in 1..1048576"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--repeat", "0"],
         "knb sweep: --repeat: '0' is not a number of rounds in 1..100"),
        (["sweep", "--bed", "memif", "--json", "/tmp/x", "--kernel-client"],
         "knb sweep: --kernel-client needs --bed veth: kernel TCP has no memif device"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--kernel-client", "--kernel-waits", "block"],
         "knb sweep: --kernel-client puts a kernel client served by crescent beside one served by the busy kernel: "
         "give --stacks crescent,kernel and busy in --kernel-waits"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--loss", "0"],
         "knb sweep: --loss: '0' is not a percentage above 0 and at most 50"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--loss", "1", "--raw"],
         "knb sweep: --loss with --raw: the raw limit is the lossless bed's; measure it without --loss"),
        (["sweep", "--bed", "veth", "--json", "/tmp/x", "--loss", "1", "--client-args", "--impair dup=1"],
         "knb sweep: --loss sets crescent's --impair itself: leave it out of --server-args and --client-args"),
        (["sweep", "--bed", "memif", "--json", "/tmp/x", "--kernel-rto-min", "5"],
         "knb sweep: --kernel-rto-min needs --bed veth: kernel TCP has no memif device"),
        (["client", "--stack", "kernel", "--server", "1.2.3.4", "--cpus", "9999"],
         "knb client: --cpus: '9999' is not a CPU list like 0-3 or 1,3 (CPUs 0..1023, no repeats)"),
    ]
    for args, want in cases:
        r = subprocess.run([KNB] + args, capture_output=True, text=True, timeout=20)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and lines == [want], f"knb {' '.join(args)} -> exit 2, '{want}'"
              + ("" if r.returncode == 2 and lines == [want] else f" (got {r.returncode}: {lines})"))
    r = subprocess.run([KNB, "--help"], capture_output=True, text=True, timeout=20)
    check(r.returncode == 0 and "knb client" in r.stdout and "--kernel-wait" in r.stdout, "knb --help: exit 0, the usage")


CASES = {"crescent": case_crescent, "kernel": case_kernel, "echo": case_echo, "failures": case_failures,
         "sweep": case_sweep, "kernel_client": case_kernel_client, "repeat": case_repeat, "loss": case_loss,
         "badargs": case_badargs}


def main():
    global KNB, KECHO, CECHO
    (KNB, KECHO, CECHO), case = nslib.parse_args(__doc__, CASES, 3)
    return nslib.run(CASES[case], None if case == "badargs" else nslib.need_root())


if __name__ == "__main__":
    sys.exit(main())
