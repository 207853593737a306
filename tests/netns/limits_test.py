#!/usr/bin/env python3
"""Exhaustion and limits (issue 11): crescent-echo's per-engine limits against Linux kernel
peers over the veth + AF_XDP bed.

Usage: limits_test.py CRESCENT_ECHO CRESCENT_STAT CASE
  CRESCENT_ECHO  examples/crescent-echo
  CRESCENT_STAT  tools/crescent-stat
  CASE           conns | backlog | slow_reader | memory | memory_batch

Each case builds its own bed with `tools/testbed up NAME` (NAME-a: crescent-echo on NAME-va
10.77.0.1 over AF_XDP with the steering program, port 7; NAME-b: kernel TCP sockets at
10.77.0.2, opened by this script from inside NAME-b with setns) and always removes it.
crescent-stat reads the server's counters (engine.0.*, zbuf.*) and connections (ss) through
its control socket. Every wait is bounded in time.

  conns        --max-conns 64 --backlog 16 (SYN cookies on): 100 non-blocking connects,
               2 s: exactly 64 echo a round trip, the rest do not; tcp_drop_too_many_conns
               grew; the `connections` gauge (TCBs, TIME-WAIT included, listeners not)
               never above 64. The 36 others are reset; the client closes 20 echoing ones
               first (crescent closes second: LAST-ACK, no TIME-WAIT: the gauge drops by
               exactly 20), 20 new connections echo, a 65th does not. All closed: gauge 0,
               zbuf live objs back to the baseline.
  backlog      --max-conns 64 --backlog 16 --syn-cookies off: the 100 connects again (SYN
               retransmissions allowed, 5 s): exactly 64 echo, the rest not. Then 54 are
               reset, 10 kept; with the peer's RSTs dropped by nftables, `hping3 -S` sends
               300 SYNs from 300 source ports: 16 half-open fill the backlog, the other 284
               are counted in tcp_drop_backlog_full (no cookie sent), the 10 established
               connections echo byte-exact during it; once the RSTs flow again the
               SYN-ACK retransmissions reclaim the half-open ones (gauge back to 10).
  slow_reader  --mode batch --snd-buf 65536 --rcv-buf 65536 (batch: the connection stops
               reading while its echo waits, so the window closes): a client writes up to 16 MiB
               and never reads: its send blocks (EAGAIN) after a bounded amount (the socket takes
               nothing more for 1 s, within 3 s), the server's
               send_q <= 65536, mem_bytes and zbuf live flat over 3 s; the client closes
               unread (kernel RST) -> the connection is gone within 2 s, zbuf live back.
               Zero window: a client with SO_RCVBUF 4096 that reads nothing for 4 s ->
               the server's snd_wnd 0, the connection stays ESTABLISHED and probes
               (segs_out grows, no abort); then it reads: 2 MiB back byte-exact.
               Then the inline mode (zero-copy send of the received slices) with the same
               slow reader: the client blocks too (crescent-echo holds the window over the
               slices it keeps, Conn::hold_window: found as a finding, fixed), send_q <=
               snd_buf, memory flat, RST cleans up.
  memory       --copy-rx --max-memory-mb 4 (2 zones), inline mode: 8 kernel
               clients each send 1.5 MiB and read nothing for 3 s: mem_limit_refused and/or
               rx_no_memory > 0 while mem_bytes <= 4 MiB at every sample (~50 ms); then they
               read: every byte back (sha256); a new connection then echoes 512 KiB with no
               new drop (recovery); zbuf live back to the baseline. The peer namespace's
               net.ipv4.tcp_rto_max_ms is 1000 where the kernel has it and the clients use
               CUBIC: with BBR (the VM's default) the peers' pacing after the drops stretched
               the drain to 20-40 s now and then. A drain over 5 s is printed with both
               sides' state.
  memory_batch the same in batch mode (read() into the heap, write() copies into new zbufs).
               Found, then fixed in the engine: the received data could hold every zone in
               the 2048-byte class while write() asked for a 64 KiB obj, so NoMemory never
               ended (and no on_writable followed it); or a zone left with a larger class cost
               a later connection drops. Under max_memory the engine's copies now take the
               received payloads' class (any class when refused), received copies leave the
               senders headroom (in-order bytes may use it), and on_writable follows NoMemory.

Exit: 0 pass, 1 fail, 77 skip (not root, or no hping3/nft for `backlog`).
"""
import ctypes
import errno
import hashlib
import os
import random
import re
import select
import shutil
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import IP_A, Fail, check, wait_until  # noqa: E402

ECHO = STAT = None
PORT = 7
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
ZBUF_SLACK = 0  # zbuf live objs must come back to the baseline exactly
RESULTS = {}    # the numbers measured, printed at the end as "result: key=value"


def result(k, v):
    RESULTS[k] = v
    print(f"measured: {k}={v}", flush=True)


# ---- namespaces -----------------------------------------------------------------------

class InNs:
    """with InNs(name): the calling thread in netns `name` (sockets created there stay there),
    back in its own namespace on the way out."""

    def __init__(self, name):
        self.path = f"/run/netns/{name}"

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise Fail(f"setns({self.path}): {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc):
        _libc.setns(self.home, CLONE_NEWNET)
        os.close(self.home)
        return False


class Bed(nslib.Bed):
    def __init__(self, case):
        super().__init__("lm", case, hugepages=256)
        self.hugefiles.append(self.prefix)

    def echo(self, *extra):
        srv = self.serve([ECHO, "--iface", self.va, "--file-prefix", self.prefix, "--port", PORT, "--stats",
                          "--idle-sleep-us", 100] + [str(x) for x in extra], "crescent-echo",
                         ready=r"listening on", timeout=60)
        srv.pid = srv.p.pid  # ip netns exec execs the server: same pid
        c = wait_until(lambda: (lambda c: c if c.get("engine.0.published", 0) > 0 else None)(counters(srv.pid)), 10)
        check(c is not None, f"crescent-echo {' '.join(map(str, extra))} serves; crescent-stat {srv.pid} answers")
        return srv

    def stop(self, srv):
        rc = srv.stop()
        check(rc == 0, f"crescent-echo exits 0 on SIGTERM ({rc})")


# ---- crescent-stat ------------------------------------------------------------------

def counters(pid):
    return nslib.counters(STAT, pid)


def e0(c, k):
    return c.get(f"engine.0.{k}", 0)


def zbuf_live(c):
    """zbuf objs held: arena objs (zbuf.<size>.live) + RX buffers handed on zero-copy (zbuf.external_live)."""
    return sum(v for k, v in c.items() if re.fullmatch(r"zbuf\.\d+\.live", k)) + c.get("zbuf.external_live", 0)


def conns(pid):
    """crescent-stat ss: [{state, recv_q, send_q, local, remote, and the detail line's fields}], no listeners."""
    out = []
    lines = nslib.stat(STAT, "ss", pid).stdout.splitlines()
    for i, l in enumerate(lines):
        f = l.split()
        if len(f) != 6 or f[0] in ("State", "LISTEN"):
            continue
        d = dict(state=f[0], recv_q=int(f[2]), send_q=int(f[3]), local=f[4], remote=f[5])
        if i + 1 < len(lines) and lines[i + 1].startswith("\t"):
            for k, v in re.findall(r"(\w+):(\S+)", lines[i + 1]):
                d.setdefault(k, v)
        out.append(d)
    return out


def netstat(ns):
    """TcpExt counters of namespace `ns` (/proc/net/netstat) as {"TCPRcvQDrop": n, ...}."""
    text = nslib.sh("cat", "/proc/net/netstat", ns=ns).stdout.splitlines()
    out = {}
    for h, v in zip(text[::2], text[1::2]):
        if h.startswith("TcpExt:"):
            out.update({n: int(x) for n, x in zip(h.split()[1:], v.split()[1:])})
    return out


class Sampler:
    """Polls the server's counters every ~50 ms in a thread: peaks of the gauges."""

    def __init__(self, pid, keys):
        self.pid, self.keys = pid, keys
        self.peak = {k: 0 for k in keys}
        self.samples = 0
        self.errors = []
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                c = counters(self.pid)
                for k in self.keys:
                    v = zbuf_live(c) if k == "zbuf_live" else e0(c, k)
                    self.peak[k] = max(self.peak[k], v)
                self.samples += 1
            except Exception as ex:  # noqa: BLE001  (reported by stop())
                self.errors.append(str(ex))
            self.stop_ev.wait(0.05)

    def stop(self):
        self.stop_ev.set()
        self.t.join(10)
        if self.errors:
            raise Fail(f"crescent-stat failed while sampling: {self.errors[0]}")
        return self.peak


# ---- kernel clients (sockets created in namespace B) -------------------------------------

def open_many(ns, n, deadline):
    """n non-blocking connects to IP_A:PORT; after `deadline` s: (connected, pending) sockets."""
    socks = []
    with InNs(ns):
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rc = s.connect_ex((IP_A, PORT))
            if rc not in (0, errno.EINPROGRESS):
                raise Fail(f"connect: {os.strerror(rc)}")
            socks.append(s)
    end = time.time() + deadline
    pending = set(socks)
    done = []
    while pending and time.time() < end:
        _, w, _ = select.select([], list(pending), [], max(0.0, min(0.2, end - time.time())))
        for s in w:
            pending.discard(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                done.append(s)
            else:
                s.close()
    return done, list(pending)


def echo_round(socks, timeout=1.5):
    """Sends 16 distinct bytes on each socket: (those that got them back exactly, the others)."""
    want, got = {}, {}
    for i, s in enumerate(socks):
        msg = struct.pack("!QQ", i, random.getrandbits(64))
        want[s], got[s] = msg, b""
        try:
            s.send(msg)
        except OSError:
            pass
    end = time.time() + timeout
    waiting = [s for s in socks if len(got[s]) < 16]
    while waiting and time.time() < end:
        r, _, _ = select.select(waiting, [], [], max(0.0, min(0.2, end - time.time())))
        for s in r:
            try:
                d = s.recv(64)
            except OSError:
                d = b""
            if not d:
                waiting.remove(s)
                continue
            got[s] += d
            if len(got[s]) >= 16:
                waiting.remove(s)
    ok = [s for s in socks if got[s] == want[s]]
    return ok, [s for s in socks if got[s] != want[s]]


def reset(socks):
    """Close with SO_LINGER 0: the kernel sends RST (when connected)."""
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def gauge(pid):
    return e0(counters(pid), "connections")


def wait_gauge(pid, want, timeout):
    return wait_until(lambda: gauge(pid) == want, timeout) or gauge(pid) == want


# ---- conns / backlog ------------------------------------------------------------------

def hundred(b, srv, cookies):
    """The 100 connects against --max-conns 64: returns (usable, the rest), checked."""
    c0 = counters(srv.pid)
    sm = Sampler(srv.pid, ["connections"])
    done, pending = open_many(b.b, 100, 2.0 if cookies else 5.0)
    ok, bad = echo_round(done)
    # A second chance for connections whose handshake ended late (a retransmitted SYN).
    ok2, bad = echo_round(bad, timeout=0.5)
    ok += ok2
    time.sleep(0.2)
    peak = sm.stop()["connections"]
    c1 = counters(srv.pid)
    tm = e0(c1, "tcp_drop_too_many_conns") - e0(c0, "tcp_drop_too_many_conns")
    mode = "cookies " + ("on" if cookies else "off")
    result(f"{mode}.connected_kernel_side", len(done))
    result(f"{mode}.echoing", len(ok))
    result(f"{mode}.tcp_drop_too_many_conns", tm)
    result(f"{mode}.tcp_syn_cookies_sent", e0(c1, "tcp_syn_cookies_sent") - e0(c0, "tcp_syn_cookies_sent"))
    result(f"{mode}.tcp_drop_backlog_full", e0(c1, "tcp_drop_backlog_full") - e0(c0, "tcp_drop_backlog_full"))
    result(f"{mode}.connections_peak", peak)
    check(len(ok) == 64, f"{mode}: of 100 connects exactly 64 echo a round trip ({len(ok)}; {len(done)} "
          f"connected on the kernel side, {len(pending)} still connecting)")
    check(tm > 0, f"{mode}: tcp_drop_too_many_conns grew ({tm})")
    check(peak <= 64 and sm.samples > 5, f"{mode}: the connections gauge never above 64 (peak {peak}, "
          f"{sm.samples} samples)")
    check(e0(c1, "connections") == 64, f"{mode}: the connections gauge is 64 ({e0(c1, 'connections')})")
    return ok, bad + pending


def case_conns():
    with Bed("conns") as b:
        srv = b.echo("--max-conns", 64, "--backlog", 16)
        c0 = counters(srv.pid)
        live0 = zbuf_live(c0)
        check(e0(c0, "connections") == 0 and e0(c0, "listeners") == 1,
              f"baseline: connections 0 (listeners {e0(c0, 'listeners')} are not counted), zbuf live {live0}")
        ok, rest = hundred(b, srv, cookies=True)
        reset(rest)
        time.sleep(0.5)
        g = gauge(srv.pid)
        check(g == 64, f"the 36 others reset: still 64 connections ({g})")
        # The client closes 20 first; crescent-echo closes on the FIN: LAST-ACK -> CLOSED, no TIME-WAIT.
        c1 = counters(srv.pid)
        for s in ok[:20]:
            s.close()
        keep = ok[20:]
        t0 = time.time()
        gone = wait_gauge(srv.pid, 44, 3)
        result("close20.seconds_to_gauge_44", round(time.time() - t0, 2))
        c2 = counters(srv.pid)
        check(gone, f"client closed 20 first: the gauge is 44 (crescent keeps no TIME-WAIT) ({e0(c2, 'connections')})")
        closed = e0(c2, "conns_closed") - e0(c1, "conns_closed")
        check(closed == 20, f"conns_closed grew by 20 ({closed})")
        time.sleep(0.5)
        check(gauge(srv.pid) == 44, "and stays 44 (no TIME-WAIT record left behind)")
        c3 = counters(srv.pid)
        new, newpend = open_many(b.b, 20, 2.0)
        okn, badn = echo_round(new)
        check(len(okn) == 20 and not newpend, f"20 new connections echo ({len(okn)} of {len(new)} connected, "
              f"{len(newpend)} pending)")
        time.sleep(0.2)
        g, ss = gauge(srv.pid), len(conns(srv.pid))
        check(g == 64 and ss == 64, f"back at 64 connections (gauge {g}, crescent-stat ss {ss})")
        extra, extrapend = open_many(b.b, 1, 1.0)
        okx, _ = echo_round(extra, timeout=1.0)
        c4 = counters(srv.pid)
        tm = e0(c4, "tcp_drop_too_many_conns") - e0(c3, "tcp_drop_too_many_conns")
        check(len(okx) == 0 and tm > 0, f"a 65th does not echo, its SYN or cookie ACK counted in "
              f"tcp_drop_too_many_conns (+{tm})")
        reset(extra + extrapend)
        all_ok, _ = echo_round(keep + okn)
        check(len(all_ok) == 64, f"the 64 connections still echo ({len(all_ok)})")
        for s in keep + okn:
            s.close()
        t0 = time.time()
        check(wait_gauge(srv.pid, 0, 5), f"all closed: the connections gauge is 0 ({gauge(srv.pid)})")
        result("close_all.seconds_to_gauge_0", round(time.time() - t0, 2))
        live = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(srv.pid))), 5)
        check(live == live0, f"zbuf live objs back to the baseline ({zbuf_live(counters(srv.pid))}, was {live0})")
        result("zbuf_live_baseline", live0)
        b.stop(srv)


def hping_ok():
    return shutil.which("hping3") and shutil.which("nft")


def case_backlog():
    with Bed("backlog") as b:
        srv = b.echo("--max-conns", 64, "--backlog", 16, "--syn-cookies", "off")
        live0 = zbuf_live(counters(srv.pid))
        ok, rest = hundred(b, srv, cookies=False)
        c = counters(srv.pid)
        check(e0(c, "tcp_syn_cookies_sent") == 0, "no SYN cookie sent with --syn-cookies off")
        reset(rest + ok[10:])
        keep = ok[:10]
        check(wait_gauge(srv.pid, 10, 3), f"54 reset, 10 kept: 10 connections ({gauge(srv.pid)})")
        # The peer's kernel would answer crescent's SYN-ACKs to hping3's ports with RSTs: drop them
        # for the burst, so that the half-open connections stay until SYN-ACK retransmission.
        nslib.sh("nft", "-f", "-", ns=b.b, inp="table inet lmrst {\n chain out {\n  type filter hook output priority 0;\n"
                 f"  ip daddr {IP_A} tcp dport {PORT} tcp flags & rst == rst counter drop\n }}\n}}\n")
        c0 = counters(srv.pid)
        sm = Sampler(srv.pid, ["connections"])
        r = nslib.sh("timeout", 20, "hping3", "-S", "-p", PORT, "-s", 20000, "-c", 300, "-i", "u300", IP_A,
                     ns=b.b, check_rc=False, timeout=30)
        time.sleep(0.3)
        mid = counters(srv.pid)
        okd, badd = echo_round(keep, timeout=2.0)
        half = e0(mid, "connections") - 10
        full = e0(mid, "tcp_drop_backlog_full") - e0(c0, "tcp_drop_backlog_full")
        result("burst.syns_sent", 300)
        result("burst.half_open", half)
        result("burst.tcp_drop_backlog_full", full)
        result("burst.tcp_syn_cookies_sent", e0(mid, "tcp_syn_cookies_sent") - e0(c0, "tcp_syn_cookies_sent"))
        check(half == 16, f"the burst fills the backlog: 16 half-open connections ({half}; hping3 rc "
              f"{r.returncode}: {r.stderr.strip()[-200:]})")
        check(full == 300 - 16, f"the other 284 SYNs are counted in tcp_drop_backlog_full ({full})")
        check(e0(mid, "tcp_syn_cookies_sent") == 0, "no cookie sent")
        check(len(okd) == 10, f"the 10 established connections echo during the overflow ({len(okd)})")
        nslib.sh("nft", "delete", "table", "inet", "lmrst", ns=b.b)
        t0 = time.time()
        back = wait_gauge(srv.pid, 10, 8)
        result("burst.seconds_to_reclaim_half_open", round(time.time() - t0, 2))
        peak = sm.stop()["connections"]
        result("burst.connections_peak", peak)
        check(back, f"the RSTs flow again: SYN-ACK retransmissions reclaim the half-open ones (gauge "
              f"{gauge(srv.pid)})")
        check(peak <= 26, f"the gauge never above 10 + 16 during the burst ({peak})")
        okd, _ = echo_round(keep)
        check(len(okd) == 10, "the 10 still echo")
        new, _ = open_many(b.b, 5, 2.0)
        okn, _ = echo_round(new)
        check(len(okn) == 5, f"new connections are accepted again ({len(okn)} of 5)")
        for s in keep + new:
            s.close()
        check(wait_gauge(srv.pid, 0, 5), f"all closed: connections 0 ({gauge(srv.pid)})")
        live = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(srv.pid))), 5)
        check(live == live0, f"zbuf live objs back to the baseline ({zbuf_live(counters(srv.pid))}, was {live0})")
        b.stop(srv)


# ---- slow reader / zero window ----------------------------------------------------------

def pattern(n, seed):
    return random.Random(seed).randbytes(n)


def fill(s, total, seconds, settle=None):
    """Non-blocking writes of up to `total` bytes for up to `seconds`, or with `settle` until the
    socket has taken nothing for `settle` s: (bytes written, EAGAIN seen)."""
    data = pattern(total, 5)
    off, eagain = 0, False
    end = time.time() + seconds
    last = time.time()
    while off < total and time.time() < end:
        try:
            off += s.send(data[off:off + 65536])
            last = time.time()
        except BlockingIOError:
            eagain = True
            if settle is not None and time.time() - last >= settle:
                break
            select.select([], [s], [], 0.1)
    return off, eagain


def slow_reader(b, srv, mode):
    pid = srv.pid
    c0 = counters(pid)
    live0 = zbuf_live(c0)
    result(f"{mode}.slow_reader.mem_bytes_before", e0(c0, "mem_bytes"))
    with InNs(b.b):
        s = socket.create_connection((IP_A, PORT), timeout=5)
    s.setblocking(False)
    sent, eagain = fill(s, 16 << 20, 3.0, settle=1.0)
    samples = []
    for _ in range(6):
        c = counters(pid)
        cs = conns(pid)
        samples.append((e0(c, "mem_bytes"), zbuf_live(c), max([x["send_q"] for x in cs] or [0]),
                        max([x["recv_q"] for x in cs] or [0])))
        time.sleep(0.5)
    more, _ = fill(s, 1 << 20, 0.5)
    mem = [x[0] for x in samples]
    live = [x[1] for x in samples]
    sq = [x[2] for x in samples]
    result(f"{mode}.slow_reader.client_bytes_written_before_block", sent)
    result(f"{mode}.slow_reader.client_eagain", eagain)
    result(f"{mode}.slow_reader.mem_bytes", mem)
    result(f"{mode}.slow_reader.zbuf_live", live)
    result(f"{mode}.slow_reader.send_q", sq)
    result(f"{mode}.slow_reader.recv_q", [x[3] for x in samples])
    return s, sent, eagain, more, mem, live, sq, live0


def case_slow_reader():
    with Bed("slow_reader") as b:
        srv = b.echo("--mode", "batch", "--snd-buf", 65536, "--rcv-buf", 65536)
        pid = srv.pid
        s, sent, eagain, more, mem, live, sq, live0 = slow_reader(b, srv, "batch")
        check(eagain and sent < (16 << 20), f"the client's send blocks (EAGAIN) after {sent} of 16 MiB")
        check(more == 0, f"and stays blocked ({more} more bytes taken in 0.5 s)")
        check(max(sq) <= 65536, f"the server's send_q stays <= snd_buf 65536 ({sq})")
        check(max(mem) == min(mem) and max(live) - min(live) <= 4,
              f"server memory flat over 3 s: mem_bytes {mem}, zbuf live {live}")
        # Close unread: the kernel sends RST (unread data in its receive queue).
        c0 = counters(pid)
        s.close()
        t0 = time.time()
        gone = wait_gauge(pid, 0, 2.0)
        result("batch.slow_reader.seconds_to_gone_after_rst", round(time.time() - t0, 2))
        check(gone, f"closed unread (RST): the crescent connection is gone within 2 s ({gauge(pid)})")
        c1 = counters(pid)
        check(e0(c1, "conns_closed") - e0(c0, "conns_closed") == 1, "conns_closed +1")
        lv = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(pid))), 3)
        check(lv == live0, f"zbuf live back to the baseline ({zbuf_live(counters(pid))}, was {live0})")

        # Zero-window peer.
        total = 2 << 20
        data = pattern(total, 9)
        with InNs(b.b):
            z = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            z.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            z.settimeout(10)
            z.connect((IP_A, PORT))
        err = []

        def writer():
            try:
                z.sendall(data)
            except OSError as ex:
                err.append(str(ex))
        wt = threading.Thread(target=writer, daemon=True)
        wt.start()
        time.sleep(1.0)
        first = [x for x in conns(pid)]
        time.sleep(3.0)
        second = [x for x in conns(pid)]
        check(len(first) == 1 and len(second) == 1, f"the zero-window connection stays ({len(second)})")
        a, c = first[0], second[0]
        result("zero_window.server_snd_wnd", [a.get("snd_wnd"), c.get("snd_wnd")])
        result("zero_window.server_segs_out_over_3s", int(c["segs_out"]) - int(a["segs_out"]))
        result("zero_window.server_send_q", c["send_q"])
        check(c["state"] == "ESTABLISHED" and c.get("snd_wnd") == "0",
              f"the server sees a zero window and stays ESTABLISHED ({c['state']}, snd_wnd {c.get('snd_wnd')})")
        check(int(c["segs_out"]) > int(a["segs_out"]),
              f"and probes it (segs_out {a['segs_out']} -> {c['segs_out']} in 3 s)")
        got = bytearray()
        end = time.time() + 30
        z.settimeout(1)
        while len(got) < total and time.time() < end:
            try:
                d = z.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            got += d
        wt.join(5)
        check(not err and bytes(got) == data, f"the reader starts: {len(got)} of {total} bytes back, byte-exact "
              f"{bytes(got) == data} ({err})")
        result("zero_window.bytes_verified", len(got))
        z.close()
        check(wait_gauge(pid, 0, 3), "the connection closes")
        lv = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(pid))), 3)
        check(lv == live0, f"zbuf live back to the baseline ({zbuf_live(counters(pid))}, was {live0})")
        b.stop(srv)

        # Inline mode: the received slices are sent back zero-copy; what it holds under a slow reader.
        srv = b.echo("--snd-buf", 65536, "--rcv-buf", 65536)
        pid = srv.pid
        s, sent, eagain, more, mem, live, sq, live0 = slow_reader(b, srv, "inline")
        check(max(sq) <= 65536, f"inline: the server's send_q stays <= snd_buf 65536 ({sq})")
        # Receive backpressure in inline mode: the slices crescent-echo keeps hold their bytes in
        # the window (Conn::hold_window), so the client is stopped as in batch mode. (Before it,
        # the window reopened when on_data() returned and the server took in all 16 MiB.)
        check(eagain and sent < (16 << 20), f"inline: the client's send blocks (EAGAIN) after {sent} of 16 MiB")
        check(more == 0, f"inline: and stays blocked ({more} more bytes taken in 0.5 s)")
        check(max(live) - min(live) <= 4, f"inline: server memory flat over 3 s: mem_bytes {mem}, zbuf live {live}")
        s.close()
        check(wait_gauge(pid, 0, 2.0), f"inline: closed unread (RST): gone within 2 s ({gauge(pid)})")
        lv = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(pid))), 3)
        check(lv == live0, f"inline: zbuf live back to the baseline ({zbuf_live(counters(pid))}, was {live0})")
        b.stop(srv)


# ---- memory -----------------------------------------------------------------------

def case_memory():
    with Bed("memory") as b:
        memory(b, "inline")


def case_memory_batch():
    with Bed("memory_batch") as b:
        memory(b, "batch")


def memory(b, mode):
    nconn, each = 8, 3 << 19  # 8 x 1.5 MiB
    # The peers recover from crescent's drops on their own clock: BBR (this VM's default)
    # took its bandwidth estimate down to ~54 kbit/s during the drops and paced the drain
    # over 20-40 s; their RTO backs off up to 120 s. The clients use CUBIC, and the RTO is
    # capped at 1 s in the peer namespace (Linux >= 6.15): the drain measures crescent.
    rto_max = "/proc/sys/net/ipv4/tcp_rto_max_ms"
    if os.path.exists(rto_max):
        nslib.sh("sysctl", "-qw", "net.ipv4.tcp_rto_max_ms=1000", ns=b.b)
    result(f"{mode}.peer_tcp_rto_max_ms", nslib.sh("cat", rto_max, ns=b.b, check_rc=False).stdout.strip() or "n/a")
    srv = b.echo("--mode", mode, "--copy-rx", "--max-memory-mb", 4)
    pid = srv.pid
    c0 = counters(pid)
    live0 = zbuf_live(c0)
    check(e0(c0, "mem_limit_bytes") == 4 << 20, f"mem_limit_bytes is 4 MiB ({e0(c0, 'mem_limit_bytes')})")
    sm = Sampler(pid, ["mem_bytes", "zbuf_live"])
    socks = []
    with InNs(b.b):
        for _ in range(nconn):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
            s.settimeout(5)
            s.connect((IP_A, PORT))
            socks.append(s)
    datas = [pattern(each, 100 + i) for i in range(nconn)]
    errs = []

    def writer(s, d):
        try:
            s.settimeout(60)
            s.sendall(d)
            s.shutdown(socket.SHUT_WR)
        except OSError as ex:
            errs.append(str(ex))
    ws = [threading.Thread(target=writer, args=(s, d), daemon=True) for s, d in zip(socks, datas)]
    for w in ws:
        w.start()
    time.sleep(3.0)
    c1 = counters(pid)
    refused = e0(c1, "mem_limit_refused") - e0(c0, "mem_limit_refused")
    nomem = e0(c1, "rx_no_memory") - e0(c0, "rx_no_memory")
    result(f"{mode}.pressure.mem_limit_refused", refused)
    result(f"{mode}.pressure.rx_no_memory", nomem)
    result(f"{mode}.pressure.mem_bytes", e0(c1, "mem_bytes"))
    result(f"{mode}.pressure.zbuf_live", zbuf_live(c1))
    result(f"{mode}.pressure.server_send_q_total", sum(x["send_q"] for x in conns(pid)))
    check(refused + nomem > 0, f"the clients not reading run the core out of zones: mem_limit_refused "
          f"+{refused}, rx_no_memory +{nomem}")
    # Now they read everything.
    got = [bytearray() for _ in socks]

    def reader(i):
        s = socks[i]
        end = time.time() + 90
        s.settimeout(1)
        while time.time() < end:
            try:
                d = s.recv(262144)
            except socket.timeout:
                continue
            except OSError as ex:
                errs.append(str(ex))
                return
            if not d:
                done_at[i] = round(time.time() - t0, 2)
                return
            got[i] += d
    done_at = [None] * nconn
    rs = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(nconn)]
    n0 = netstat(b.b)
    t0 = time.time()
    for r in rs:
        r.start()
    for r in rs:
        r.join(max(0.0, t0 + 5 - time.time()))
    if any(r.is_alive() for r in rs):  # a slow drain: what each side holds
        left = [i for i in range(nconn) if done_at[i] is None]
        result(f"{mode}.slow_drain.unfinished", {i: len(got[i]) for i in left})
        result(f"{mode}.slow_drain.server_conns", [x for x in conns(pid) if x["send_q"] or x["recv_q"]
                                                   or x["state"] != "ESTABLISHED"])
        c = counters(pid)
        result(f"{mode}.slow_drain.server_counters", {k[9:]: v for k, v in c.items() if k.startswith("engine.0.")
                                                      and v and ("drop" in k or "no_" in k or "tx_" in k)})
        result(f"{mode}.slow_drain.peer_ss", nslib.sh("ss", "-tnie", "dst", IP_A, ns=b.b,
                                                      check_rc=False).stdout.replace("\n", " | "))
    for r in rs + ws:
        r.join(max(1.0, t0 + 95 - time.time()))
    secs = time.time() - t0
    if secs > 5:
        print(f"NOTE: the drain took {secs:.1f} s (slow_drain.* above: both sides after 5 s)", flush=True)
    n1 = netstat(b.b)
    peak = sm.stop()
    result(f"{mode}.drain.peer_tcpext", {k: n1[k] - n0.get(k, 0) for k in ("TCPRcvQDrop", "PruneCalled", "RcvPruned",
                                                                       "TCPOFODrop", "TCPZeroWindowDrop",
                                                                       "TCPDSACKOldSent", "TCPTimeouts")
                                         if k in n1})
    result(f"{mode}.drain.seconds_per_conn", done_at)
    exact = sum(1 for g, d in zip(got, datas) if hashlib.sha256(g).digest() == hashlib.sha256(d).digest())
    result(f"{mode}.drain.seconds", round(secs, 2))
    result(f"{mode}.drain.bytes_verified", sum(len(g) for g, d in zip(got, datas) if g == d))
    result(f"{mode}.peak.mem_bytes", peak["mem_bytes"])
    result(f"{mode}.peak.zbuf_live", peak["zbuf_live"])
    result(f"{mode}.samples", sm.samples)
    if errs or exact != nconn:
        c = counters(pid)
        result(f"{mode}.stalled.zbuf_classes", {k[5:]: v for k, v in c.items()
                                                if re.fullmatch(r"zbuf\.\d+\.(capacity|live)", k)})
        result(f"{mode}.stalled.server_conns", conns(pid))
        result(f"{mode}.stalled.server_counters", {k: v for k, v in c.items() if k.startswith("engine.0.") and v
                                                   and ("drop" in k or "no_memory" in k or "parse" in k)})
        result(f"{mode}.stalled.client_ss", nslib.sh("ss", "-tnie", "dst", IP_A, ns=b.b, check_rc=False).stdout)
    check(not errs, f"no socket error ({errs[:2]})")
    check(exact == nconn, f"every byte comes back: {exact} of {nconn} connections sha256-exact "
          f"({[len(g) for g in got]} bytes of {each} each)")
    check(peak["mem_bytes"] <= 4 << 20 and sm.samples > 20,
          f"mem_bytes <= 4 MiB at every one of {sm.samples} samples (peak {peak['mem_bytes']})")
    for s in socks:
        s.close()
    check(wait_gauge(pid, 0, 5), f"connections back to 0 ({gauge(pid)})")
    lv = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(pid))), 5)
    check(lv == live0, f"zbuf live back to the baseline ({zbuf_live(counters(pid))}, was {live0})")
    # Recovery: a reading client's 512 KiB echo, no new drop.
    c2 = counters(pid)
    d = pattern(512 << 10, 7)
    with InNs(b.b):
        s = socket.create_connection((IP_A, PORT), timeout=10)
    t = threading.Thread(target=lambda: s.sendall(d), daemon=True)
    t.start()
    g = bytearray()
    end = time.time() + 20
    while len(g) < len(d) and time.time() < end:
        try:
            x = s.recv(65536)
        except socket.timeout:
            continue
        if not x:
            break
        g += x
    t.join(5)
    s.close()
    c3 = counters(pid)
    if e0(c3, "rx_no_memory") != e0(c2, "rx_no_memory"):
        print("zbuf classes:", {k: v for k, v in c3.items() if re.fullmatch(r"zbuf\.\d+\.(capacity|live)", k)}, flush=True)
    check(bytes(g) == d, f"recovered: a new connection echoes 512 KiB byte-exact ({len(g)} bytes)")
    check(e0(c3, "rx_no_memory") == e0(c2, "rx_no_memory") and e0(c3, "mem_limit_refused") == e0(c2, "mem_limit_refused"),
          f"with no new rx_no_memory or mem_limit_refused (+{e0(c3, 'rx_no_memory') - e0(c2, 'rx_no_memory')}, "
          f"+{e0(c3, 'mem_limit_refused') - e0(c2, 'mem_limit_refused')})")
    check(wait_gauge(pid, 0, 5), f"connections back to 0 ({gauge(pid)})")
    result(f"{mode}.end.mem_limit_refused", e0(c2, "mem_limit_refused"))
    result(f"{mode}.end.rx_no_memory", e0(c2, "rx_no_memory"))
    lv = wait_until(lambda: (lambda v: v if v == live0 else None)(zbuf_live(counters(pid))), 5)
    check(lv == live0, f"zbuf live back to the baseline ({zbuf_live(counters(pid))}, was {live0})")
    result(f"{mode}.end.mem_bytes", e0(counters(pid), "mem_bytes"))
    b.stop(srv)


CASES = {"conns": case_conns, "backlog": case_backlog, "slow_reader": case_slow_reader, "memory": case_memory,
         "memory_batch": case_memory_batch}


def main():
    global ECHO, STAT
    (ECHO, STAT), case = nslib.parse_args(__doc__, list(CASES), 2)
    skip = nslib.need_root()
    if not skip and case == "backlog" and not hping_ok():
        skip = "needs hping3 and nft"
    rc = nslib.run(CASES[case], skip)
    for k, v in RESULTS.items():
        print(f"result: {k}={v}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
