#!/usr/bin/env python3
"""knb's test beds (issue 10): tools/knb-bed, `knb raw`, knb over memif (one and two engines
per side) and `knb sweep --raw`.

Usage: knb_bed_test.py KNB CASE
  KNB        the knb binary
  CASE       bed | memif_raw | veth_raw | memif_rpc | memif_multiengine | memif_sweep_raw

Every case builds its own bed with `tools/knb-bed up` under KNB_BED_NAME=kt<pid> (its own
namespaces, memif socket and DPDK file prefixes) and always runs `tools/knb-bed down`, which
must leave no namespace, socket or hugepage file behind (checked). Every wait is bounded.
On memif every run also checks the goodbye (stack/dev/memif_goodbye.hpp): the side that
closes first has each queue's goodbye answered, and the other side goes quiet on each queue.
Exit: 0 pass, 1 fail, 77 skip (not root).

  bed                `env` describes both beds (parsed as a shell would); `up`/`down` are
                     idempotent; `down` of a bed that is not up succeeds; `up memif` removes
                     a stale socket; bad arguments exit 2 with one line.
  memif_raw          `knb raw ping` started BEFORE `knb raw reflect` (a memif client may start
                     first): 64 B at iodepth 1 and 16, 2 s each, round trips > 0, no error, the
                     JSON object has every field; --size 4198 --split at iodepth 2 runs messages
                     of 3 frames (1514, 1514, 1170 B) answered as a whole (every part verified;
                     the reflector sent 3 frames per round trip); --size 4198 --fit-mtu runs
                     1514 B frames and says so (capped, size_asked), --size 9100 without either
                     is refused (exit 2), and so are both together; --resp-size: a 4198 B
                     message of 3 frames and a single 1000 B frame, each answered by ONE cut
                     frame (166 / 80 B; verified, one frame back per round trip), a
                     --resp-size above --size refused before EAL starts (exit 2); then
                     2 queues on each side with --idle-sleep-us: both queues carry round trips
                     (memif queue i meets queue i), no frame on the wrong queue.
  veth_raw           the 64 B runs, the --split run and the --split --resp-size run over veth +
                     AF_XDP (reflector in NAME-a, pinger in NAME-b); a --resp-size above the
                     message's last frame (1170 B of 4198) refused (exit 2).
  memif_rpc          knb server/client --stack crescent, one engine per side, over memif
                     (client started first): 64 B at iodepth 1 and 16, 2 s each, sane numbers
                     (ok, requests > 0, no error, every response verified, p50 <= p99 <= max,
                     the server's CPU and retransmissions known, no drop on either side).
  memif_multiengine  a 2-engine knb client (--server-threads 1, --stats) started before a
                     2-engine knb server, over a 2-queue memif (client engine i talks to server
                     engine i), 64 B iodepth 16, 2 s: no error; both client channels completed
                     calls; each server engine accepted exactly its own client engine's
                     connections (engine 0: its channel's and the knb.info probe's) and
                     answered at least that engine's calls; no segment dropped for want of a
                     listener or connection (what a packet on the wrong engine would be), no
                     RST; frames sent == frames received on each queue pair.
  memif_sweep_raw    knb sweep --bed memif --raw (64 B and 4 KiB, iodepth 1 and 4, crescent
                     inline): the document's "raw" array has one entry per point, each with its
                     point, the RPC request's frame (166 B; 4198 B as 3 frames of 1514 B), iodepth x
                     conns in flight and a verified ping result; the table's section "crescent
                     against the bed's raw limit" has a fraction per point; --raw without
                     crescent is refused in one line (exit 2); --resp-size 64 with 4 KiB
                     requests: the client's document says 64 B responses, the raw point is 3 frames
                     answered by one 166 B frame (1514x3/166 in the table); --raw with a
                     response larger than a request, and --resp-size with --proto echo, are
                     refused in one line; a reflector that dies (a stand-in
                     that takes SIGSEGV) is said on stderr and started again, and the point
                     after it still gets its raw round trips.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import TIMEOUT, Fail, check  # noqa: E402

KNB_BED = os.path.join(nslib.HERE, "..", "..", "tools", "knb-bed")
KNB = None
NAME = f"kt{os.getpid() % 100000}"
ENV = dict(os.environ, KNB_BED_NAME=NAME, KNB_HUGEPAGES="1024")
CPUS = os.cpu_count() or 1


def bed(*args, check_rc=True):
    r = subprocess.run([KNB_BED] + list(args), capture_output=True, text=True, timeout=60, env=ENV)
    if check_rc and r.returncode != 0:
        raise Fail(f"knb-bed {' '.join(args)} -> {r.returncode}: {r.stderr.strip()[-1500:]}")
    return r


def bed_env(kind):
    """The assignments of `knb-bed env KIND` as a dict (values unquoted as a shell would)."""
    out = bed("env", kind).stdout
    env = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        check(re.fullmatch(r"KNB_[A-Z_]+", k) is not None, f"env line '{line[:60]}' assigns a KNB_ variable")
        words = shlex.split(v)
        env[k] = words[0] if words else ""
    return env


class Proc(nslib.Proc):
    """nslib.Proc, run under a wrapper (`ip netns exec NS`) or none (memif)."""

    def __init__(self, wrap, argv, name):
        self.name = name
        self.lines = []
        self.p = subprocess.Popen(shlex.split(wrap) + [str(a) for a in argv],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.end()
            raise Fail(f"{self.name} did not finish within {timeout}s:\n{self.output()[-3000:]}")
        self.t.join(5)
        return rc


class Bed:
    """`knb-bed up KIND` as a context manager; on the way out, whatever happened: its
    processes stopped, `knb-bed down KIND`, and a check that nothing is left."""

    def __init__(self, kind):
        self.kind = kind
        self.procs = []
        self.files = []

    def __enter__(self):
        bed("up", self.kind)
        self.env = bed_env(self.kind)
        return self

    def start(self, side, argv, name):
        wrap = self.env[f"KNB_{side}_WRAP"]
        p = Proc(wrap, argv, name)
        self.procs.append(p)
        return p

    def __exit__(self, exc_type, *rest):
        for p in self.procs:
            p.end()
        bed("down", self.kind, check_rc=False)
        for f in self.files:
            try:
                os.unlink(f)
            except OSError:
                pass
        if exc_type is None:  # do not hide the first failure behind this one
            leftovers(self.env)
        return False


def leftovers(env):
    prefixes = (env["KNB_SERVER_PREFIX"], env["KNB_CLIENT_PREFIX"])
    huge = [f for f in os.listdir("/dev/hugepages") if f.startswith(prefixes)] \
        if os.path.isdir("/dev/hugepages") else []
    check(not huge, f"no hugepage file of {prefixes} is left ({huge[:3]})")
    check(not any(os.path.exists(f"/var/run/dpdk/{p}") for p in prefixes), "no DPDK runtime directory is left")
    sock = env["KNB_MEMIF_SOCKET"]
    check(not sock or not os.path.exists(sock), f"the memif socket {sock or '-'} is gone")
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=TIMEOUT).stdout
    check(f"{NAME}-a" not in ns and f"{NAME}-b" not in ns, f"namespaces {NAME}-a/b are gone")


def dev_args(b, side):
    return shlex.split(b.env[f"KNB_{side}_DEV_ARGS"])


def raw_dev(b, side):
    """knb raw's device flags for a side: --iface IF (veth) or --eal ARGS (memif)."""
    e = b.env
    if e[f"KNB_{side}_IFACE"]:
        return ["--iface", e[f"KNB_{side}_IFACE"]]
    return ["--eal", e[f"KNB_{side}_EAL"]]


# ---- bed -----------------------------------------------------------------------------

def case_bed():
    for kind, sip, cip in (("veth", "10.77.0.1", "10.77.0.2"), ("memif", "10.88.0.1", "10.88.0.2")):
        e = bed_env(kind)
        check(e["KNB_BED"] == kind and e["KNB_SERVER_IP"] == sip and e["KNB_CLIENT_IP"] == cip,
              f"env {kind}: bed, server and client addresses")
        check(e["KNB_SERVER_PREFIX"] != e["KNB_CLIENT_PREFIX"] and NAME in e["KNB_SERVER_PREFIX"],
              f"env {kind}: distinct file prefixes named after the bed ({e['KNB_SERVER_PREFIX']}, "
              f"{e['KNB_CLIENT_PREFIX']})")
    v, m = bed_env("veth"), bed_env("memif")
    check(v["KNB_SERVER_WRAP"] == f"ip netns exec {NAME}-a" and v["KNB_SERVER_DEV_ARGS"] == f"--iface {NAME}-va",
          "env veth: the server runs in NAME-a on NAME-va")
    check(m["KNB_SERVER_WRAP"] == "" and m["KNB_CLIENT_WRAP"] == "", "env memif: no namespace wrapper")
    sargs = shlex.split(m["KNB_SERVER_DEV_ARGS"])
    check(sargs[0] == "--eal" and "role=server" in sargs[1] and m["KNB_MEMIF_SOCKET"] in sargs[1]
          and "mac=02:6b:6e:62:00:01" in sargs[1] and sargs[2:] == ["--ip", "10.88.0.1/24", "--mac",
                                                                   "02:6b:6e:62:00:01", "--neighbour",
                                                                   "10.88.0.2=02:6b:6e:62:00:02"],
          f"env memif: server device flags split into {sargs}")
    cargs = shlex.split(m["KNB_CLIENT_DEV_ARGS"])
    check("role=client" in cargs[1] and "10.88.0.1=02:6b:6e:62:00:01" in cargs,
          "env memif: client device flags name the server as neighbour")

    # down of beds that are not up: fine, twice.
    for kind in ("veth", "memif"):
        for _ in range(2):
            check(bed("down", kind, check_rc=False).returncode == 0, f"down {kind} with nothing up exits 0")
    # up twice (idempotent), then down.
    for kind in ("veth", "memif"):
        bed("up", kind)
        r = bed("up", kind, check_rc=False)
        check(r.returncode == 0, f"a second up {kind} exits 0")
        if kind == "veth":
            ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=TIMEOUT).stdout
            check(f"{NAME}-a" in ns and f"{NAME}-b" in ns, "up veth made NAME-a and NAME-b")
            a = nslib.sh("ip", "-br", "addr", "show", f"{NAME}-va", ns=f"{NAME}-a").stdout
            check("10.77.0.1/24" in a and "UP" in a, f"{NAME}-va is up with 10.77.0.1/24: {a.strip()}")
        else:
            check(os.path.isdir(os.path.dirname(m["KNB_MEMIF_SOCKET"])), "up memif made the socket directory")
            with open(m["KNB_MEMIF_SOCKET"], "w") as f:  # what a killed memif server leaves
                f.write("stale")
            bed("up", kind)
            check(not os.path.exists(m["KNB_MEMIF_SOCKET"]), "up memif removes a stale socket")
            with open(m["KNB_MEMIF_SOCKET"], "w") as f:
                f.write("stale")
        bed("down", kind)
        leftovers(bed_env(kind))
    # bad arguments: one line, exit 2.
    for args in ([], ["up"], ["up", "wifi"], ["start", "memif"], ["env", "memif", "x"]):
        r = bed(*args, check_rc=False)
        check(r.returncode == 2, f"knb-bed {' '.join(args) or '(nothing)'} exits 2")
    r = subprocess.run([KNB_BED, "env", "memif"], capture_output=True, text=True, timeout=30,
                       env=dict(ENV, KNB_BED_NAME="Bad/Name"))
    check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "KNB_BED_NAME" in r.stderr,
          f"a bad KNB_BED_NAME is refused in one line: {r.stderr.strip()}")


# ---- raw -----------------------------------------------------------------------------

PING_RE = re.compile(r"knb raw ping: .* (\d+) round trips/s \((\d+); per queue ([\d ]+)\).* errors (\d+)")


def raw_run(b, size, iodepth, queues, ping_first, tag, extra=(), frame=None, parts=None, resp=None):
    """One reflect + ping pair, 2 s; returns the JSON object after checking it. `extra`: flags
    for both sides; `frame`: the frame length expected when --fit-mtu lowers `size` or --split
    cuts it into `parts` frames; `resp`: --resp-size (the pinger's only), one frame of that
    length answers each message."""
    js = f"/tmp/{NAME}-raw-{tag}.json"
    b.files.append(js)
    one = queues == 1 and CPUS >= 2  # pin each side to its own CPU
    rcpus = ["--cpus", "0"] if one else []
    pcpus = ["--cpus", "1"] if one else []
    reflect = [KNB, "raw", "reflect"] + raw_dev(b, "SERVER") + [
        "--queues", queues, "--file-prefix", b.env["KNB_SERVER_PREFIX"], "--duration", 25] + rcpus + \
        [a for a in extra if a not in ("--fit-mtu", "--split")]
    ping = [KNB, "raw", "ping"] + raw_dev(b, "CLIENT") + [
        "--queues", queues, "--size", size, "--iodepth", iodepth, "--duration", 2, "--warmup", 0.5,
        "--file-prefix", b.env["KNB_CLIENT_PREFIX"], "--json", js] + pcpus + list(extra) + \
        (["--resp-size", resp] if resp else [])
    if ping_first:
        p = b.start("CLIENT", ping, "knb raw ping")
        time.sleep(1.0)
        r = b.start("SERVER", reflect, "knb raw reflect")
    else:
        r = b.start("SERVER", reflect, "knb raw reflect")
        if not r.wait_for(r"reflecting ethertype", timeout=20):
            raise Fail(f"knb raw reflect did not come up:\n{r.output()[-3000:]}")
        p = b.start("CLIENT", ping, "knb raw ping")
    rc = p.wait(30)
    out = p.output()
    print(f"{tag}: " + "\n".join(l for l in out.splitlines() if l.startswith("knb raw")))
    check(rc == 0, f"{tag}: knb raw ping exited 0 (got {rc}):\n{out[-2000:]}" if rc else f"{tag}: knb raw ping exited 0")
    rrc = r.stop(timeout=15)
    rout = r.output()
    check(rrc == 0, f"{tag}: knb raw reflect exited 0 on SIGTERM (rc {rrc}):\n{rout[-1500:]}")
    if b.kind == "memif":
        check_goodbye(tag, out, rout, queues)
    m = re.search(r"knb raw reflect: (\d+) frames reflected .*per queue: ([\d ]+)\)", rout)
    check(m is not None, f"{tag}: the reflector printed its count")
    reflected = int(m.group(1))
    with open(js) as f:
        j = json.load(f)
    check(all(k in j for k in ("kind", "bed", "size", "iodepth", "queues", "seconds", "round_trips", "rps",
                               "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "lost", "errors")),
          f"{tag}: the JSON object has every field")
    want = frame or size
    check(j["kind"] == "raw" and j["size"] == want and j["iodepth"] == iodepth and j["queues"] == queues,
          f"{tag}: JSON describes the run (kind raw, {want} B, iodepth {iodepth}, {queues} queue(s))")
    capped = frame is not None and parts is None
    check(j["size_asked"] == size and j["capped"] == capped,
          f"{tag}: JSON says {size} B were asked" + (f", capped at {frame} B" if capped else ", not capped"))
    if capped:
        check(f"--size {size} capped at {frame} bytes" in out, f"{tag}: the cap is said on stderr")
    check(j["frames"] == (parts or 1) and j["message"] == (size if parts else want),
          f"{tag}: {j['frames']} frame(s) per round trip, {j['message']} B each way")
    if parts:
        check(f"{size} B messages of {parts} frames ({frame} B, last {size - (parts - 1) * frame} B)" in out,
              f"{tag}: the message's frames are said on the result line")
    check(j["resp_size"] == (resp or 0), f"{tag}: JSON resp_size {j['resp_size']}")
    if resp:
        check(f"answered by one {resp} B frame" in out, f"{tag}: the one-frame answer is said on the result line")
    check(j["round_trips"] > 0 and j["rps"] > 0, f"{tag}: {j['round_trips']} round trips, {j['rps']:.0f}/s")
    check(j["errors"] == 0, f"{tag}: every returned frame verified (errors 0)")
    check(0 < j["p50_us"] <= j["p99_us"] <= j["max_us"], f"{tag}: p50 {j['p50_us']} <= p99 {j['p99_us']} <= max "
          f"{j['max_us']} us")
    back = 1 if resp else (parts or 1)  # frames that answer one message
    check(reflected >= back * j["round_trips"],
          f"{tag}: the reflector sent back {reflected} >= {back} x {j['round_trips']} frames")
    if resp:
        check(" 0 messages whose --resp-size answer did not fit a frame" in rout,
              f"{tag}: every completed message could be answered")
        # One frame per message: no more than were sent, whole messages' worth.
        check(reflected * (parts or 1) <= j["sent"], f"{tag}: one frame back per message ({reflected} for "
              f"{j['sent']} frames sent in messages of {parts or 1})")
    tm = re.search(r"knb raw reflect: --touch: (\d+) frames read in full", rout)
    if "--touch" in extra:
        # Every frame of every answered message was read before the answer went.
        check(tm is not None and int(tm.group(1)) >= (parts or 1) * j["round_trips"],
              f"{tag}: --touch: the reflector read {tm.group(1) if tm else 'no'} frames in full, at least "
              f"{parts or 1} x {j['round_trips']}")
    else:
        check(tm is None, f"{tag}: without --touch the reflector reads no frame in full")
    pm = PING_RE.search(out)
    check(pm is not None, f"{tag}: one result line")
    per_q = [int(x) for x in pm.group(3).split()]
    check(len(per_q) == queues and all(n > 0 for n in per_q), f"{tag}: every queue carried round trips: {per_q}")
    refl_q = [int(x) for x in m.group(2).split()]
    check(len(refl_q) == queues and all(n > 0 for n in refl_q),
          f"{tag}: every reflector queue sent frames back: {refl_q}")
    return j


def case_raw(kind):
    def run():
        with Bed(kind) as b:
            seen = []
            for size, depth, first in ((64, 1, kind == "memif"), (64, 16, False)):
                j = raw_run(b, size, depth, 1, first, f"{kind}-{size}B-qd{depth}")
                seen.append(f"{size} B qd{depth}: {j['rps']:.0f} rps p50 {j['p50_us']} us")
            # A 4 KiB request's three frames, answered as a whole (the multi-frame RPC's limit).
            j = raw_run(b, 4198, 2, 1, False, f"{kind}-split", extra=["--split"], frame=1514, parts=3)
            seen.append(f"4198 B as 3 frames qd2: {j['rps']:.0f} rps p50 {j['p50_us']} us")
            # A one-way stream's limit: the same message answered by one 166 B frame, the reflector
            # reading every frame first (--touch, as a receiver that checksums its data).
            j = raw_run(b, 4198, 2, 1, False, f"{kind}-resp", extra=["--split", "--touch"], frame=1514, parts=3,
                        resp=166)
            seen.append(f"4198 B as 3 frames answered by 166 B qd2: {j['rps']:.0f} rps")
            if kind == "memif":
                j = raw_run(b, 4198, 4, 1, False, f"{kind}-fit-mtu", extra=["--fit-mtu"], frame=1514)
                check(j["mtu"] == 1500, "memif MTU 1500 in the JSON")
                r = subprocess.run([KNB, "raw", "ping", "--eal", b.env["KNB_CLIENT_EAL"], "--size", "9100"],
                                   capture_output=True, text=True, timeout=30)
                check(r.returncode == 2 and "or give --fit-mtu or --split" in r.stderr,
                      f"--size 9100 without --fit-mtu is refused before EAL starts: {r.stderr.strip()}")
                r = subprocess.run([KNB, "raw", "ping", "--eal", b.env["KNB_CLIENT_EAL"], "--size", "9100",
                                    "--fit-mtu", "--split"], capture_output=True, text=True, timeout=30)
                check(r.returncode == 2 and "give one of --fit-mtu" in r.stderr,
                      f"--fit-mtu with --split is refused: {r.stderr.strip()}")
                raw_run(b, 1000, 2, 1, False, f"{kind}-resp-1frame", resp=80)
                r = subprocess.run([KNB, "raw", "ping", "--eal", b.env["KNB_CLIENT_EAL"], "--size", "200",
                                    "--resp-size", "300"], capture_output=True, text=True, timeout=30)
                check(r.returncode == 2 and "--resp-size 300 is larger than --size 200" in r.stderr,
                      f"a --resp-size above the request is refused before EAL starts: {r.stderr.strip()}")
                raw_run(b, 64, 4, 2, False, f"{kind}-2queues", extra=["--idle-sleep-us", 20])
            else:
                # The message's last frame (4198 B = 1514 + 1514 + 1170) bounds the answer.
                p = b.start("CLIENT", [KNB, "raw", "ping"] + raw_dev(b, "CLIENT") + [
                    "--file-prefix", b.env["KNB_CLIENT_PREFIX"], "--size", 4198, "--split", "--resp-size", 1300],
                    "knb raw ping")
                rc = p.wait(30)
                check(rc == 2 and "--resp-size 1300 is larger than the message's smallest frame (1170 B)" in p.output(),
                      f"a --resp-size the message's last frame cannot carry is refused (rc {rc}): "
                      f"{p.output().strip()[-300:]}")
            print(f"{kind} raw: " + "; ".join(seen))
    return run


# ---- knb over memif --------------------------------------------------------------------

ENGINE_RE = re.compile(r"^engine (\d+):(.*)$", re.M)
BAD_COUNTERS = ("tcp_drop_no_listener", "tcp_rst_sent", "tcp_drop_wrong_dst", "tx_overflow", "rx_no_memory")


def stats_of(line):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def knb_pair(b, tag, threads, client_args, server_args=(), cpus=None):
    """A knb client started first, then its server (memif: the client waits for the server's
    socket); the client's run ends, the server gets SIGTERM. Returns (document, client output,
    server output) after checking both exited 0 and the document is sane."""
    e = b.env
    js = f"/tmp/{NAME}-{tag}.json"
    b.files.append(js)
    ccpu, scpu = cpus or ([], [])
    client = b.start("CLIENT", [KNB, "client", "--stack", "crescent", "--threads", threads] + dev_args(b, "CLIENT") + [
        "--file-prefix", e["KNB_CLIENT_PREFIX"], "--server", e["KNB_SERVER_IP"], "--duration", 2, "--warmup", 0.5,
        "--json", js, "--progress", "off", "--label", tag] + ccpu + list(client_args), f"knb client ({tag})")
    time.sleep(1.0)
    server = b.start("SERVER", [KNB, "server", "--stack", "crescent", "--threads", threads] + dev_args(b, "SERVER") + [
        "--file-prefix", e["KNB_SERVER_PREFIX"]] + scpu + list(server_args), f"knb server ({tag})")
    crc = client.wait(60)
    cout = client.output()
    print(f"{tag} client:\n" + "\n".join(l for l in cout.splitlines() if not l.startswith("[")))
    check(crc == 0, f"{tag}: the knb client exited 0 (rc {crc}):\n{cout[-2500:]}" if crc else
          f"{tag}: the knb client exited 0")
    src = server.stop(timeout=20)
    sout = server.output()
    print(f"{tag} server:\n" + "\n".join(l for l in sout.splitlines() if not l.startswith("[")))
    check(src == 0, f"{tag}: the knb server exited 0 on SIGTERM (rc {src})")
    check(f"knb server: ready: rpc over crescent on {e['KNB_SERVER_IP']} port 7300, {threads} thread" in sout,
          f"{tag}: the server said ready with {threads} thread(s)")
    with open(js) as f:
        j = json.load(f)
    r = j["result"]
    check(r["ok"] is True and r["error"] == "" and r["errors"] == 0, f"{tag}: ok, no error")
    check(r["requests"] > 0 and r["rps"] > 0, f"{tag}: {r['requests']} responses in the window, {r['rps']:.0f} RPC/s")
    check(r["verified"] == r["completed"] >= r["requests"], f"{tag}: every response verified ({r['verified']} of "
          f"{r['completed']})")
    lat = r["latency_us"]
    check(0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"], f"{tag}: latency min {lat['min']} <= p50 "
          f"{lat['p50']} <= p99 {lat['p99']} <= max {lat['max']} us")
    check(r["cpu_s"]["server"] is not None and r["cpu_s"]["server"] > 0 and r["cpu_s"]["client"] > 0,
          f"{tag}: both sides' CPU time known ({r['cpu_s']['client']:.2f} s client, {r['cpu_s']['server']:.2f} s "
          f"server)")
    check(r["retrans"]["server"] is not None and r["drops"]["client"] == 0 and r["drops"]["server"] == 0,
          f"{tag}: server retransmissions known ({r['retrans']['server']}), no drop on either side")
    check(j["config"]["threads"] == threads and j["server"]["threads"] == threads and j["server"]["stack"] ==
          "crescent", f"{tag}: {threads} engine(s) on each side (the server said so in knb.info)")
    check("memif" in j["config"]["device"], f"{tag}: the client ran on memif ({j['config']['device']})")
    check_goodbye(tag, cout, sout, threads)
    return j, cout, sout


def check_goodbye(tag, closer, peer, queues):
    """memif: the side that closed first said goodbye on every queue and each was answered; the
    side that stayed went quiet on each (DPDK 22.11's PMD unmaps the rings under a queue still
    polled: stack/dev/memif_goodbye.hpp). Whether it polled again before its own SIGTERM is a
    race this harness does not wait out; dev_memif checks it."""
    check(f"the peer stopped polling {queues} queue(s) for our close ({queues} answered our goodbye)" in closer,
          f"{tag}: the closing side's {queues} goodbye(s) were answered")
    check(peer.count("the peer said goodbye and was answered") == queues,
          f"{tag}: the other side answered on {queues} queue(s) and went quiet")


def case_memif_rpc():
    with Bed("memif") as b:
        cpus = (["--cpus", 1], ["--cpus", 0]) if CPUS >= 2 else None
        seen = []
        for depth in (1, 16):
            j, _, _ = knb_pair(b, f"memif-rpc-qd{depth}", 1,
                               ["--msg-size", 64, "--iodepth", depth], cpus=cpus)
            check(j["config"]["msg_size"] == 64 and j["config"]["iodepth"] == depth,
                  f"qd{depth}: the document describes 64 B at iodepth {depth}")
            r = j["result"]
            seen.append(f"64 B qd{depth}: {r['rps']:.0f} RPC/s p50 {r['latency_us']['p50']} us")
        print("memif rpc: " + "; ".join(seen))


def case_memif_multiengine():
    with Bed("memif") as b:
        nap = ["--idle-sleep-us", 20, "--stats"]  # 4 engines on the machine's CPUs: they nap when idle
        j, cout, sout = knb_pair(b, "memif-2engines", 2,
                                 ["--server-threads", 1, "--msg-size", 64, "--iodepth", 16] + nap, nap)
        check(j["config"]["server_threads"] == 1, "each client engine meshes with one server engine (--server-threads 1)")
        chans = {int(i): stats_of(rest) for i, rest in re.findall(r"^channel (\d+):(.*)$", cout, re.M)}
        check(sorted(chans) == [0, 1], "a channel per client engine (knb client --stats)")
        for i, s in chans.items():
            check(s["ok"] > 0 and s["failed"] == 0 and s["connects"] == 1 and s["disconnects"] == 0,
                  f"client engine {i}: {s['ok']} calls completed, none failed, one connection kept")
        check(sum(s["ok"] for s in chans.values()) >= j["result"]["completed"],
              f"the channels completed every call the document counts ({j['result']['completed']})")
        srv = {int(i): stats_of(rest) for i, rest in re.findall(r"^server (\d+):(.*)$", sout, re.M)}
        check(sorted(srv) == [0, 1], "RPC server stats for both server engines")
        per_side = {}
        for side, out in (("server", sout), ("client", cout)):
            engines = per_side[side] = {int(i): stats_of(rest) for i, rest in ENGINE_RE.findall(out)}
            check(sorted(engines) == [0, 1], f"{side}: stats of both engines")
            for i, s in engines.items():
                check(s.get("rx_packets", 0) > 0 and s.get("tx_packets", 0) > 0,
                      f"{side} engine {i} carried traffic (rx {s.get('rx_packets', 0)}, tx {s.get('tx_packets', 0)})")
                bad = {k: v for k, v in s.items() if k in BAD_COUNTERS or k.startswith("parse_")}
                check(not bad, f"{side} engine {i}: nothing dropped on the wrong engine or elsewhere {bad or ''}")
        for i in (0, 1):
            c, sv, s = per_side["client"][i], per_side["server"][i], srv[i]
            # Client engine 0 also opened the knb.info probe's connection (closed before the run).
            want = chans[i]["connects"] + (1 if i == 0 else 0)
            check(c.get("conns_opened", 0) == want and s["accepted"] == want and sv.get("tcp_accepted", 0) == want,
                  f"server engine {i} accepted exactly client engine {i}'s {want} connection(s) (client opened "
                  f"{c.get('conns_opened', 0)}, server accepted {s['accepted']})")
            check(s["requests"] > 0 and s["replies"] == s["requests"] and s["requests"] >= chans[i]["ok"],
                  f"server engine {i} answered {s['replies']}/{s['requests']} requests, at least client engine "
                  f"{i}'s {chans[i]['ok']} calls")
        # memif loses nothing (TX that finds the ring full is retried): every frame client engine i
        # sent arrived at server engine i and the other way round.
        for i in (0, 1):
            c, sv = per_side["client"][i], per_side["server"][i]
            check(c["tx_packets"] == sv["rx_packets"] and sv["tx_packets"] == c["rx_packets"],
                  f"queue pair {i}: client engine {i} sent {c['tx_packets']} frames, server engine {i} received "
                  f"{sv['rx_packets']}; server sent {sv['tx_packets']}, client received {c['rx_packets']}")


def case_memif_sweep_raw():
    r = subprocess.run([KNB, "sweep", "--bed", "memif", "--json", "/dev/null", "--raw", "--stacks", "kernel"],
                       capture_output=True, text=True, timeout=30, env=ENV)
    check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "add crescent" in r.stderr,
          f"--raw without crescent is refused in one line: {r.stderr.strip()}")
    with Bed("memif") as b:
        js = f"/tmp/{NAME}-sweep.json"
        out = f"/tmp/{NAME}-sweep"
        b.files.append(js)
        cpus = ["--server-cpus", "0", "--client-cpus", "1"] if CPUS >= 2 else []
        p = subprocess.run([KNB, "sweep", "--bed", "memif", "--raw", "--stacks", "crescent", "--modes", "inline",
                            "--sizes", "64,4096", "--iodepths", "1,4", "--duration", "1", "--warmup", "0.3",
                            "--json", js, "--out", out] + cpus, capture_output=True, text=True, timeout=240, env=ENV)
        subprocess.run(["rm", "-rf", out], timeout=30)
        print(p.stdout)
        print("\n".join(l for l in p.stderr.splitlines() if l.startswith("knb sweep")))
        check(p.returncode == 0, f"the sweep exited 0 (rc {p.returncode}): {p.stderr.strip()[-1500:]}")
        with open(js) as f:
            d = json.load(f)
        check(d["kind"] == "sweep" and d["bed"] == "memif" and len(d["runs"]) == 4 and not d["failed"],
              "the document has the 4 crescent runs, none failed")
        raw = d["raw"]
        points = sorted((x["point"]["msg_size"], x["point"]["iodepth"]) for x in raw)
        check(points == [(64, 1), (64, 4), (4096, 1), (4096, 4)] and all(x["point"]["threads"] == 1 and
                                                                          x["point"]["conns"] == 1 for x in raw),
              f"one raw entry per point, each naming its point: {points}")
        rps = {}
        for x in raw:
            size, depth = x["point"]["msg_size"], x["point"]["iodepth"]
            res = x["result"]
            check(x["ok"] and res is not None and res["kind"] == "raw" and res["errors"] == 0 and
                  res["round_trips"] > 0, f"raw {size} B qd{depth}: {res and res['rps']:.0f} round trips/s verified")
            check(x["frame_wanted"] == 102 + size and x["raw_iodepth"] == depth and res["iodepth"] == depth,
                  f"raw {size} B qd{depth}: the request's frame ({x['frame_wanted']} B), {depth} in flight")
            if size == 64:
                check(x["frame"] == 166 and x["frames"] == 1 and res["size"] == 166 and res["frames"] == 1,
                      "64 B: one 166 B frame each way")
            else:
                check(x["frame"] == 1514 and x["frames"] == 3 and res["size"] == 1514 and res["frames"] == 3 and
                      res["message"] == 4198 and not res["capped"],
                      "4 KiB: the 4198 B request goes as a message of 3 frames of up to 1514 B (MTU + 14)")
            rps[(size, depth)] = res["rps"]
        sect = p.stdout.split("# crescent against the bed's raw limit", 1)
        check(len(sect) == 2, "the table has the section 'crescent against the bed's raw limit'")
        rows = re.findall(r"^(\d+)\s+(\d+)\s+(\d+)\s+\| crescent/inline\s+(\d+) \|\s+(\d+(?:x\d+)?)\s+(\d+)\s+(\d+) \|\s+"
                          r"([\d.]+)$", sect[1], re.M)
        check(len(rows) == 4, f"a row per point in that section ({len(rows)})")
        runs = {(x["config"]["msg_size"], x["config"]["iodepth"]): x["result"]["rps"] for x in d["runs"]}
        for size, depth, thr, crps, frame, rq, rrps, frac in rows:
            key = (int(size), int(depth))
            check(abs(int(rrps) - rps[key]) <= 1 and abs(int(crps) - runs[key]) <= 1 and
                  abs(float(frac) - runs[key] / rps[key]) < 0.002 and float(frac) > 0,
                  f"{size} B qd{depth}: {crps} RPC/s / {rrps} round trips/s = {frac}")
            check(frame == ("1514x3" if key[0] == 4096 else "166"), f"{size} B qd{depth}: frame {frame} (x3 only "
                  "where the request takes three frames)")
        check("answered once all N are in" in sect[1], "the table says what xN means")
        # Where a turn's time goes: both sides' sampled phase means per point,
        # the stack's share their sum, and the raw reflector's own split.
        ph = sect[1].split("# where a turn's time goes", 1)
        check(len(ph) == 2, "the sweep prints where a turn's time goes")
        prow = re.findall(r"^(\d+)\s+(\d+)\s+1\s+\| crescent/inline\s+(server|client) \|((?:\s+\d+){8}) \|\s+(\d+)$",
                          ph[1], re.M)
        check(len(prow) == 2 * len(runs), f"a row per point and side ({len(prow)} for {len(runs)} points)")
        for size, depth, side, cells, stack in prow:
            v = [int(c) for c in cells.split()]
            check(v[0] > 0 and v[1] > 0 and v[2] > 0 and v[6] > 0 and abs(sum(v[1:6]) - int(stack)) <= 3,
                  f"{size} B qd{depth} {side}: poll {v[0]}, parse {v[1]}, tcp {v[2]}, flush {v[6]} ns > 0, "
                  f"stack {stack} = parse + tcp + app + timers + output")
        check(re.search(r"^raw reflector, 1 queue\(s\): poll \d+ ns, reflect \d+ ns, flush \d+ ns", ph[1], re.M)
              is not None, "the raw reflector's own phase split follows")
        check("sent as a message of 3 frames" in p.stderr, "the sweep said the 4 KiB request went as 3 frames")
        # A one-way stream: 4 KiB requests, 64 B responses, beside the raw limit of
        # 3 frames answered by one 166 B frame.
        r = subprocess.run([KNB, "sweep", "--bed", "memif", "--json", "/dev/null", "--raw", "--sizes", "64,4096",
                            "--resp-size", "128"], capture_output=True, text=True, timeout=30, env=ENV)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--resp-size 128" in r.stderr and
              "no response may be larger than a request" in r.stderr,
              f"--raw with a response larger than a request is refused in one line: {r.stderr.strip()}")
        r = subprocess.run([KNB, "sweep", "--bed", "memif", "--json", "/dev/null", "--proto", "echo",
                            "--resp-size", "64"], capture_output=True, text=True, timeout=30, env=ENV)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "is for --proto rpc" in r.stderr,
              f"--resp-size with --proto echo is refused in one line: {r.stderr.strip()}")
        b.files.append(js + "1")
        # The reflector reads every frame it answers (--raw-args --touch).
        p = subprocess.run([KNB, "sweep", "--bed", "memif", "--raw", "--raw-args", "--touch", "--stacks", "crescent",
                            "--modes", "inline", "--sizes", "4096", "--resp-size", "64", "--iodepths", "2",
                            "--duration", "0.5", "--warmup", "0.2", "--json", js + "1", "--out", out + "1"] + cpus,
                           capture_output=True, text=True, timeout=120, env=ENV)
        refl = "".join(open(f).read() for f in glob.glob(out + "1/raw-reflect*.log"))
        subprocess.run(["rm", "-rf", out + "1"], timeout=30)
        check(re.search(r"knb raw reflect: --touch: [1-9]\d* frames read in full", refl) is not None,
              "--raw-args --touch reached the reflector, which read the frames it answered")
        print(p.stdout)
        check(p.returncode == 0, f"the --resp-size sweep exited 0 (rc {p.returncode}): {p.stderr.strip()[-1500:]}")
        with open(js + "1") as f:
            d = json.load(f)
        run = d["runs"][0] if len(d["runs"]) == 1 else None
        check(d.get("resp_size") == 64 and run is not None and run["config"]["msg_size"] == 4096 and
              run["config"]["resp_size"] == 64 and run["result"]["rps"] > 0,
              "the run asked 4 KiB requests and 64 B responses (the client's own document says so)")
        x = d["raw"][0] if len(d["raw"]) == 1 else {}
        res = x.get("result") or {}
        check(x.get("ok") and x["resp_frame"] == 166 and res.get("resp_size") == 166 and res.get("frames") == 3 and
              res.get("errors") == 0 and res.get("round_trips", 0) > 0,
              f"raw: 3 frames answered by one 166 B frame, verified ({res.get('rps', 0):.0f} round trips/s)")
        check(re.search(r"^4096\s+2\s+1\s+\| crescent/inline\s+\d+ \|\s+1514x3/166\s+2\s+\d+ \|\s+[\d.]+$",
                        p.stdout, re.M) is not None and "xN/R:" in p.stdout and
              "every response is 64 B (--resp-size)" in p.stdout,
              "the tables name the response size and the raw frames (1514x3/166)")
        check(d.get("raw_args") == "--touch" and "--raw-args --touch: the reflector read every frame" in p.stdout,
              "the sweep's document and table say the reflector read its frames (--raw-args --touch)")
        # A reflector that dies (as DPDK 22.11's memif server can when a client
        # disconnects) is started again before the next ping: here the first
        # one says it reflects and takes SIGSEGV at once.
        wrap = f"/tmp/{NAME}-knb-wrap.sh"
        once = f"/tmp/{NAME}-knb-wrap.once"
        b.files += [wrap, once, js + "2"]
        with open(wrap, "w") as f:
            f.write("#!/bin/bash\n"
                    f'if [ "$1 $2" = "raw reflect" ] && [ ! -e {once} ]; then touch {once}; '
                    'echo "knb raw reflect: reflecting ethertype 0x88B5 (a stand-in)"; kill -SEGV $$; fi\n'
                    f'exec {KNB} "$@"\n')
        os.chmod(wrap, 0o755)
        p = subprocess.run([KNB, "sweep", "--knb", wrap, "--bed", "memif", "--raw", "--stacks", "crescent",
                            "--modes", "inline", "--sizes", "64", "--iodepths", "1", "--duration", "0.5",
                            "--warmup", "0.2", "--json", js + "2", "--out", out + "2"] + cpus,
                           capture_output=True, text=True, timeout=120, env=ENV)
        logs = "" if p.returncode == 0 else "".join(  # a failed point's logs, before they go
            f"\n--- {os.path.basename(f)}:\n" + open(f, errors="replace").read()[-1200:]
            for f in sorted(glob.glob(os.path.join(out + "2", "*.log"))))
        subprocess.run(["rm", "-rf", out + "2"], timeout=30)
        check(p.returncode == 0 and "the reflector has exited (signal 11" in p.stderr and
              "starting it again" in p.stderr,
              f"a dead reflector is said and started again; the sweep passes (rc {p.returncode}): "
              f"{p.stderr.strip()[-800:]}{logs}")
        with open(js + "2") as f:
            d = json.load(f)
        check(len(d["raw"]) == 1 and d["raw"][0]["ok"] and d["raw"][0]["result"]["round_trips"] > 0,
              "the point after the restart has its raw round trips")


CASES = {
    "bed": case_bed,
    "memif_raw": case_raw("memif"),
    "veth_raw": case_raw("veth"),
    "memif_rpc": case_memif_rpc,
    "memif_multiengine": case_memif_multiengine,
    "memif_sweep_raw": case_memif_sweep_raw,
}


def main():
    global KNB
    (KNB,), case = nslib.parse_args(__doc__, CASES, 1)
    return nslib.run(CASES[case], nslib.need_root())


if __name__ == "__main__":
    sys.exit(main())
