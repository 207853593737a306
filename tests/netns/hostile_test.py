#!/usr/bin/python3
"""Adversarial input against a crescent server (issue 11, "Adversarial input"), driven by
scapy and hping3 from the peer namespace of the veth bed.

Usage: hostile_test.py KNB CRESCENT_STAT CASE
  KNB            the knb binary
  CRESCENT_STAT  tools/crescent-stat
  CASE           frames | flood | all

The bed: tools/knb-bed up veth (server namespace NAME-a 10.77.0.1, peer NAME-b 10.77.0.2),
`knb server --stack crescent --proto echo` on port 7300 with the XDP steering program. The
test joins the peer namespace (setns) to run scapy and a kernel-TCP "probe" connection to
the server: an idle echo connection whose sequence numbers are known exactly (sniffed),
used as the target of the attacks that need a live 4-tuple; after every class it must
still echo 1000 random bytes byte-exact. Meanwhile every class runs under a knb client
(--stack kernel --proto echo --verify full, 1 s), whose run must be sane (errors 0, every
response verified) and still going when the class's frames have been sent.

  frames  each class of malformed or hostile frame (table in the summary), then checks:
          the engine counter of its reason moved by exactly the frames sent (or, for frames
          the XDP program hands to the kernel, a capture on the server's veth inside its
          namespace — AF_PACKET taps only see XDP_PASS'd frames — got them, and crescent's
          parse counters did not move); challenge ACKs (RFC 5961) seen on the wire and
          rate-limited; the probe and the knb run byte-exact; zbuf live objs and
          connections back to their baseline.
  flood   `timeout 5 hping3 --flood -S --rand-source -p 7300`: SYN cookies engage
          (tcp_syn_cookies_sent), a knb run connected just before the flood and running
          through it has zero errors, a new kernel connection during the flood echoes
          byte-exact, zbuf live objs stay bounded and come back; prints the flood rate and
          RPC/s and p99 with and without the flood.
  all     both, one bed.

A summary table (class, frames sent, counter, delta, verdict) is printed at the end and,
if HOSTILE_JSON is set, written there as JSON. Exit: 0 pass, 1 fail, 77 skip (not root,
no scapy or hping3).
"""
import ctypes
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import Fail, check  # noqa: E402
import knb_test  # noqa: E402  (the bed: tools/knb-bed up veth, its names and addresses)

try:
    from scapy.all import AsyncSniffer, Ether, IP, IPOption_NOP, Raw, TCP, conf  # noqa: E402
    conf.verb = 0
    HAVE_SCAPY = True
except ImportError:
    HAVE_SCAPY = False

KNB = STAT = None
PORT = 7300
# scapy's source ports: no socket in the peer namespace behind them. Below the kernel's
# ephemeral range (32768-60999 by default): a knb client or the probe on one of them would
# put its thousands of segments into the reply capture (overflowing it: the few replies
# that matter were lost, CI runs at 8e89247 and dfb531a) and share scapy's 4-tuples.
SPARE_LO = 20000
BACKLOG = 1024  # RuntimeOptions' default listener backlog (include/crescent/engine.hpp)
IP_A, IP_B = knb_test.SERVER_IP, "10.77.0.2"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
ROWS = []  # the summary: dicts of class, sent, counter, delta, verdict, ok


def setns(path):
    """Moves the calling thread (and the threads it starts later) into network namespace `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise Fail(f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


class InNs:
    """with InNs(name): the calling thread in netns `name`, back in its own on the way out."""

    def __init__(self, name):
        self.path = f"/run/netns/{name}"

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        setns(self.path)
        return self

    def __exit__(self, *exc):
        _libc.setns(self.home, CLONE_NEWNET)
        os.close(self.home)
        return False


def counters(pid):
    return nslib.counters(STAT, pid)


def conn_of(pid, rport):
    """ss fields of the server's connection from IP_B:rport (segs_in, state...) or None."""
    lines = nslib.stat(STAT, "ss", pid).stdout.splitlines()
    for i, l in enumerate(lines):
        if re.search(rf"{re.escape(IP_B)}:{rport}\s*$", l):
            f = dict(re.findall(r"(\w+):([\d.]+)", lines[i + 1])) if i + 1 < len(lines) else {}
            f["state"] = l.split()[0]
            return f
    return None


def snmp(ns):
    """/proc/net/snmp and /proc/net/netstat of namespace `ns` as {"Ip.InHdrErrors": n, ...}."""
    out = {}
    for f in ("/proc/net/snmp", "/proc/net/netstat"):
        text = nslib.sh("cat", f, ns=ns).stdout.splitlines()
        for h, v in zip(text[::2], text[1::2]):
            names, vals = h.split(), v.split()
            for n, x in zip(names[1:], vals[1:]):
                out[names[0].rstrip(":") + "." + n] = int(x)
    return out


def mac_of(ns, ifname):
    return nslib.sh("cat", f"/sys/class/net/{ifname}/address", ns=ns).stdout.strip()


def sniffer(iface, bpf):
    """A started capture on `iface` in the calling thread's namespace. The socket (and its
    filter, which scapy compiles with tcpdump) is opened here, before the caller sends
    anything: AsyncSniffer would open it in its own thread, possibly after the frames."""
    got = []
    sn = AsyncSniffer(opened_socket=conf.L2listen(iface=iface, filter=bpf), prn=got.append, store=False)
    sn.start()
    sn.got = got  # the frames so far, while it runs
    return sn


def add(cls, sent, counter, delta, ok, verdict, known=None):
    ROWS.append(dict(cls=cls, sent=sent, counter=counter, delta=delta, ok=bool(ok), known=known, verdict=verdict))
    tag = "ok" if ok else ("KNOWN FINDING" if known else "FINDING")
    print(f"{tag}: {cls}: sent {sent}, {counter} +{delta}: {verdict}", flush=True)


class Probe:
    """A kernel TCP connection from the peer namespace to the crescent echo server (the caller
    is in that namespace), with both sides' next sequence numbers tracked from a capture."""

    def __init__(self, iface):
        self.iface = iface
        sn = sniffer(iface, f"tcp and host {IP_A} and port {PORT}")
        time.sleep(0.3)
        self.s = socket.create_connection((IP_A, PORT), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lport = self.s.getsockname()[1]
        self.exchange(b"hello, probe\n")
        time.sleep(0.3)
        sn.stop()
        pk = sn.got
        mine = [p for p in pk if TCP in p and self.lport in (p[TCP].sport, p[TCP].dport)]
        self.cli_nxt = self.srv_nxt = None
        for p in mine:
            t = p[TCP]
            nxt = (t.seq + len(t.payload) + (1 if t.flags.S else 0) + (1 if t.flags.F else 0)) % 2**32
            if t.sport == self.lport:
                self.cli_nxt = nxt
            else:
                self.srv_nxt = nxt
        if self.cli_nxt is None or self.srv_nxt is None:
            raise Fail(f"the probe connection's segments were not captured ({len(mine)} seen)")

    def exchange(self, data):
        self.s.sendall(data)
        got = b""
        end = time.time() + 5
        while len(got) < len(data) and time.time() < end:
            try:
                d = self.s.recv(len(data) - len(got))
            except socket.timeout:
                break
            if not d:
                break
            got += d
        return got == data

    def alive(self):
        """1000 random bytes echoed byte-exact (the sequence numbers move by 1000 each way)."""
        data = random.randbytes(1000)
        try:
            ok = self.exchange(data)
        except OSError:
            return False
        if ok:
            self.cli_nxt = (self.cli_nxt + 1000) % 2**32
            self.srv_nxt = (self.srv_nxt + 1000) % 2**32
        return ok

    def seg(self, flags="A", seq_off=0, ack_off=0, **kw):
        """A TCP header on the probe's 4-tuple: seq = the server's RCV.NXT + seq_off,
        ack = its SND.NXT + ack_off."""
        return TCP(sport=self.lport, dport=PORT, flags=flags, seq=(self.cli_nxt + seq_off) % 2**32,
                   ack=(self.srv_nxt + ack_off) % 2**32, window=1000, **kw)


class Hostile:
    def __init__(self, b, pid):
        self.b, self.pid = b, pid
        self.va, self.vb = knb_test.NAME + "-va", knb_test.NAME + "-vb"
        self.mac_a, self.mac_b = mac_of(b.a, self.va), mac_of(b.b, self.vb)
        self.probe = None
        self.spare = SPARE_LO  # source ports with no socket behind them (scapy's own)
        lo, hi = map(int, nslib.sh("cat", "/proc/sys/net/ipv4/ip_local_port_range", ns=b.b).stdout.split())
        if lo <= SPARE_LO + 999 and hi >= SPARE_LO:
            raise Fail(f"the peer namespace's ephemeral ports {lo}-{hi} overlap the spare source ports "
                       f"{SPARE_LO}-{SPARE_LO + 999}")

    def eth(self):
        return Ether(src=self.mac_b, dst=self.mac_a)

    def ip(self, **kw):
        return IP(src=IP_B, dst=IP_A, **kw)

    def port(self):
        self.spare += 1
        return self.spare

    def baseline(self):
        c = counters(self.pid)
        return c.get("zbuf.2048.live", 0), c.get("engine.0.connections", 0)

    def knb_run(self, seconds=1.0, extra=()):
        """A knb kernel echo client from the peer namespace in a thread: join() -> (rc, out, doc);
        join.running() is True while the client has not exited."""
        res = {}

        def go():
            res["r"] = self.b.client(["--stack", "kernel", "--kernel-wait", "block", "--proto", "echo",
                                      "--verify", "full", "--msg-size", "96", "--duration", str(seconds),
                                      "--warmup", "0.3"] + list(extra), timeout=30 + seconds)

        t = threading.Thread(target=go)
        t.start()

        def join():
            t.join(60 + seconds)
            return res.get("r", (1, "the knb client did not finish", None))
        join.running = t.is_alive
        return join

    def kernel_tap(self):
        """A capture on the server's veth inside the server namespace: sees only what the
        XDP program passed to the kernel (XDP_REDIRECTed frames never reach the taps)."""
        with InNs(self.b.a):
            return sniffer(self.va, "not arp and not ip6")

    def run_class(self, cls, frames, expect, counter=None, kernel=None, replies=None, challenge=None, known=None):
        """Sends `frames` (scapy packets or raw bytes) under a knb run and checks, for `expect`:
          "parse"     engine counter `counter` moved by len(frames), the kernel tap saw none
          "kernel"    the kernel tap saw every frame (nstat `kernel` moved, if named), crescent's
                      parse counters did not move
          "accepted"  parsed: the probe connection's segs_in moved by len(frames)
          "listener"  to the listener: `replies(list of reply packets)` -> (ok, text)
          challenge   (lo, hi): challenge ACKs (pure ACKs on the probe's 4-tuple) seen on the wire
          known       a finding reported and not fixed here: printed as such, does not fail the test
        Always: the knb run sane, the probe alive, zbuf live objs / connections at baseline."""
        p = self.probe
        only = os.environ.get("HOSTILE_ONLY")
        if only and only not in cls:
            return True
        kernel = kernel or []
        z0, c0 = self.baseline()
        # The kernel's counters and the captures are set up before the knb run starts (its
        # traffic is steered to crescent, past the kernel tap and the capture's filter), so that
        # the frames go out early in its 1 s.
        k_before = snmp(self.b.a)
        tap = self.kernel_tap()
        # Only the probe's and the spare ports' replies: the knb run's thousands of segments per
        # second would overflow the capture's socket buffer and hide the few that matter.
        sn = sniffer(self.vb, f"tcp and src port {PORT} and (dst port {p.lport} or dst portrange "
                              f"{SPARE_LO}-{SPARE_LO + 999})")
        join = self.knb_run()
        # The client connected (one more connection on the server) and past its 0.3 s warm-up;
        # then crescent's counters, published every 10 ms, and the probe's segs_in (100 ms: the
        # previous class's last exchange is in by now).
        nslib.wait_until(lambda: counters(self.pid).get("engine.0.connections", 0) > c0, 5, step=0.05)
        time.sleep(0.3)
        before = counters(self.pid)
        conn0 = conn_of(self.pid, p.lport) or {}
        segs0 = int(conn0.get("segs_in", -1))
        raw = [f if isinstance(f, (bytes, bytearray)) else bytes(f) for f in frames]
        for f in raw:
            self.tx.send(Raw(f))
        knb_during = join.running()
        n = len(raw)
        sports = {Ether(r)[TCP].sport for r in raw if len(r) >= 54 and TCP in Ether(r)}

        def tapped_now():
            # A frame shorter than an Ethernet header is padded to 14 bytes by AF_PACKET.
            return [f for f in list(tap.got)
                    if any(bytes(f)[:len(r)] == r or r[:len(bytes(f))] == bytes(f) for r in raw)]

        def challenges_now():
            return [r for r in list(sn.got) if TCP in r and r[TCP].dport == p.lport and r[TCP].flags == "A"
                    and len(r[TCP].payload) == 0]

        def arrived():
            """What the class waits for before judging (a loaded machine delays the engine and
            its 10/100 ms stats publication): the expected counts, or 5 s."""
            if expect == "parse" and counters(self.pid).get(counter, 0) - before.get(counter, 0) < n:
                return False
            if expect == "kernel" and len(tapped_now()) < n:
                return False
            if expect == "accepted" and int((conn_of(self.pid, p.lport) or {}).get("segs_in", -1)) - segs0 < n:
                return False
            if challenge is not None and len(challenges_now()) < challenge[0]:
                return False
            if expect == "listener" and want_reply and not any(
                    TCP in r and r[TCP].dport in sports and r[TCP].flags == "SA" for r in list(sn.got)):
                return False
            return True

        want_reply = getattr(replies, "want_synack", False)
        end = time.time() + 5
        while not arrived() and time.time() < end:
            time.sleep(0.1)
        time.sleep(0.4)  # anything beyond the expected (a challenge ACK too many, a late reply)
        sn.stop()
        tap.stop()
        replies_seen = [r for r in sn.got if TCP in r]
        tapped = tapped_now()
        after = counters(self.pid)
        k_after = snmp(self.b.a)
        conn1 = conn_of(self.pid, p.lport) or {}
        segs1 = int(conn1.get("segs_in", -1))
        rc, out, d = join()
        parse_moved = {k[len("engine.0.parse_"):]: after[k] - before.get(k, 0) for k in after
                       if k.startswith("engine.0.parse_") and after[k] != before.get(k, 0)}
        ok, what = True, ""
        if expect == "parse":
            delta = after.get(counter, 0) - before.get(counter, 0)
            ok = delta == n and not tapped
            what = f"counted by crescent under its reason{'' if ok else f'; other parse moves {parse_moved}, kernel saw {len(tapped)}'}"
            cname = counter
        elif expect == "kernel":
            delta = len(tapped)
            kd = {k: k_after[k] - k_before[k] for k in kernel or []}
            ok = delta == n and not parse_moved and all(v >= n for v in kd.values())
            what = (f"XDP passed them to the kernel (tap saw {len(tapped)}/{n}; "
                    + ", ".join(f"{k} +{v}" for k, v in kd.items()) + f"); crescent parse counters unmoved {parse_moved or ''}")
            cname = "kernel tap" + ("".join(f" + {k}" for k in kernel))
        elif expect == "accepted":
            delta = segs1 - segs0
            ok = delta == n and not parse_moved and not tapped
            what = f"parsed and taken by the probe connection (its segs_in), no parse drop {parse_moved or ''}"
            cname = "conn segs_in"
        else:  # listener
            delta = sum(after.get(c, 0) - before.get(c, 0) for c in (counter or []))
            ok, what = replies([r for r in replies_seen if r[TCP].dport in sports and r[TCP].dport != p.lport])
            ok = ok and not parse_moved and not tapped
            cname = "+".join(counter) if counter else "(none)"
        if challenge is not None:
            ch = challenges_now()
            lo, hi = challenge
            cok = lo <= len(ch) <= hi
            ok = ok and cok
            what += f"; challenge ACKs on the wire: {len(ch)} (want {lo}..{hi})"
            if not cok:
                seen = [f"{r[TCP].flags}/{len(r[TCP].payload)}" for r in replies_seen if r[TCP].dport == p.lport]
                what += f" (to the probe: {seen})"
                # Whether the server answered (segs_out moves: then the capture lost them) or
                # dropped them; its window then (an RST is judged against RCV.WND).
                what += "; server conn " + ", ".join(f"{k} {conn0.get(k, '?')}->{conn1.get(k, '?')}"
                                                     for k in ("rcv_wnd", "segs_out", "state"))
        alive = p.alive()
        try:
            knb_test.sane(rc, out, d, f"{cls}: knb run during the class")
            knb_ok = True
        except Fail as e:
            knb_ok = False
            what += f"; knb run not sane: {e}"
        if not knb_during:
            knb_ok = False
            what += "; the knb run had ended before the frames were sent (the machine too slow for its 1 s?)"
        end = time.time() + 5
        z1, c1 = self.baseline()
        while (z1, c1) != (z0, c0) and time.time() < end:
            time.sleep(0.2)
            z1, c1 = self.baseline()
        base_ok = (z1, c1) == (z0, c0)
        what += (f"; probe {'alive, byte-exact' if alive else 'BROKEN'}; zbuf live {z0}->{z1}, "
                 f"connections {c0}->{c1}")
        good = ok and alive and knb_ok and base_ok
        if not good and known:
            what += f" [known finding: {known}]"
        add(cls, n, cname, delta, good, what, known=known if not good else None)
        ROWS[-1]["knb_verified"] = (d or {}).get("result", {}).get("verified", 0)
        ROWS[-1]["probe_bytes"] = 2000 if alive else 0
        return good

    # ---- the classes -------------------------------------------------------------------------

    def classes(self):
        p = self.probe
        E, ipb = self.eth, self.ip
        data = Raw(b"EVIL" * 8)  # would corrupt the probe's echo if ever taken as data
        fr = []

        def good(**ipkw):
            return E() / ipb(**ipkw) / p.seg("PA") / data

        # --- Ethernet / IP headers ---
        self.run_class("eth_truncated (10 B frame)", [bytes(good())[:10]] * 3, "kernel")
        self.run_class("ip_header_truncated (12 B of IP)", [bytes(good())[:14 + 12]] * 3, "kernel",
                       kernel=["Ip.InHdrErrors"])
        f = bytearray(bytes(good()))
        f[14] = 0x44  # IHL 4
        self.run_class("ip_ihl_lt_5 (IHL 4)", [bytes(f)] * 3, "kernel", kernel=["Ip.InHdrErrors"])
        f = bytes(E() / IP(bytes(ipb(ihl=15, options=[IPOption_NOP()] * 40) / p.seg())))[:14 + 40]
        self.run_class("ip_ihl_past_frame (IHL 15, 40 B)", [f] * 3, "kernel", kernel=["Ip.InHdrErrors"])
        self.run_class("ip_total_length_gt_frame", [E() / ipb(len=1200) / p.seg("PA") / data] * 3,
                       "parse", "engine.0.parse_ip_bad_total_length")
        self.run_class("ip_total_length_lt_ihl", [E() / ipb(len=12) / p.seg("PA") / data] * 3,
                       "parse", "engine.0.parse_ip_bad_total_length")
        self.run_class("ip_total_length_cuts_tcp_header", [E() / ipb(len=30) / p.seg("PA") / data] * 3,
                       "parse", "engine.0.parse_tcp_truncated")
        g = E() / ipb() / p.seg("PA") / data
        good_ip_csum = IP(bytes(g[IP])).chksum
        self.run_class("ip_bad_checksum", [E() / ipb(chksum=good_ip_csum ^ 0x0101) / p.seg("PA") / data] * 3,
                       "parse", "engine.0.parse_ip_bad_checksum")
        # --- TCP header ---
        self.run_class("tcp_data_offset_lt_5", [E() / ipb() / p.seg("PA", dataofs=4) / data] * 3,
                       "parse", "engine.0.parse_tcp_bad_data_offset")
        self.run_class("tcp_data_offset_past_segment", [E() / ipb() / p.seg("A", dataofs=15)] * 3,
                       "parse", "engine.0.parse_tcp_bad_data_offset")
        good_tcp_csum = TCP(bytes((ipb() / p.seg("PA") / data)[TCP])).chksum
        self.run_class("tcp_bad_checksum", [E() / ipb() / p.seg("PA", chksum=good_tcp_csum ^ 0x0101) / data] * 3,
                       "parse", "engine.0.parse_tcp_bad_checksum")

        def with_opts(raw_opts, flags="PA", payload=data, tcp=None):
            n = len(raw_opts)
            assert n % 4 == 0
            t = tcp if tcp is not None else p.seg(flags)
            t.dataofs = 5 + n // 4
            return E() / ipb() / t / Raw(raw_opts) / payload

        self.run_class("tcp_option_length_0_1_overrun",
                       [with_opts(b"\x13\x00\x01\x01"), with_opts(b"\x02\x01\x01\x01"),
                        with_opts(b"\x1e\x28\x00\x00\x00\x00\x00\x00"), with_opts(b"\x01\x01\x01\x08")],
                       "parse", "engine.0.parse_tcp_bad_option")
        self.run_class("tcp_option_known_wrong_length (MSS len 3, WS len 4, TS len 8)",
                       [with_opts(b"\x02\x03\x05\x01"), with_opts(b"\x03\x04\x07\x01"),
                        with_opts(b"\x08\x08" + b"\x00" * 6 + b"\x01\x01\x01\x01")],
                       "parse", "engine.0.parse_tcp_bad_option_length")
        self.run_class("tcp_40_nops (valid: pure ACK on the probe)", [with_opts(b"\x01" * 40, "A", b"")] * 3,
                       "accepted")
        lp = p

        def sack(blocks):
            body = b"".join(((lp.srv_nxt + l) % 2**32).to_bytes(4, "big") + ((lp.srv_nxt + r) % 2**32).to_bytes(4, "big")
                            for l, r in blocks)
            o = b"\x01\x01\x05" + bytes([2 + 8 * len(blocks)]) + body
            return with_opts(o + b"\x00" * (-len(o) % 4), "A", b"")

        self.run_class("tcp_sack_outside_window/overlapping/reversed (pure ACKs on the probe)",
                       [sack([(100000, 200000)]), sack([(-3000, -1000), (-2000, -500)]), sack([(500, 100)]),
                        sack([(-(2**31), -(2**31) + 100)])], "accepted")

        def syn_replies(want_synack):
            class Judge:
                def __call__(self, rs):
                    return judge(rs)

            def judge(rs):
                synacks = [r for r in rs if r[TCP].flags == "SA"]
                rsts = [r for r in rs if r[TCP].flags.R]
                ok = (len(synacks) >= 1) if want_synack else (not synacks)
                return ok, f"replies: {len(synacks)} SYN-ACK, {len(rsts)} RST (want {'a SYN-ACK' if want_synack else 'no SYN-ACK'})"
            j = Judge()
            j.want_synack = want_synack
            return j

        def syn(opts_raw, **kw):
            t = TCP(sport=self.port(), dport=PORT, flags="S", seq=random.getrandbits(32), window=1000, **kw)
            return with_opts(opts_raw, tcp=t, payload=b"")

        self.run_class("tcp_duplicate_conflicting_options (2x MSS, MSS 536+1460, WS 15, WS 255) SYNs",
                       [syn(b"\x02\x04\x05\xb4\x02\x04\x05\xb4"), syn(b"\x02\x04\x02\x18\x02\x04\x05\xb4"),
                        syn(b"\x01\x03\x03\x0f"), syn(b"\x01\x03\x03\xff"),
                        syn(b"\x01\x03\x03\x0f\x01\x03\x03\x02")],
                       "listener", ["engine.0.tcp_accepted"], replies=syn_replies(True))
        # --- IP layer ---
        frag_sport = self.port()
        firsts = [E() / ipb(id=0x4100 + i, flags="MF", frag=0) / TCP(sport=frag_sport, dport=PORT, flags="S")
                  / Raw(b"F" * 16) for i in range(3)]
        laters = [E() / ipb(id=0x4200 + i, flags=0, frag=3, proto=6) / Raw(b"L" * 16) for i in range(3)]
        self.run_class("ip_fragments (3 first + 3 later)", firsts + laters, "kernel", kernel=["Ip.ReasmReqds"])
        self.run_class("ip_options (4 NOPs, pure ACK on the probe)",
                       [E() / ipb(options=[IPOption_NOP()] * 4) / p.seg("A")] * 3, "accepted")
        self.run_class("ttl_0 (pure ACK on the probe; taken, as Linux does for local delivery)",
                       [E() / ipb(ttl=0) / p.seg("A")] * 3, "accepted")

        def to_listener(flags, **ipkw):
            return E() / IP(dst=IP_A, **({"src": IP_B} | ipkw)) / TCP(sport=self.port(), dport=PORT, flags=flags,
                                                                        seq=random.getrandbits(32), window=1000)

        self.run_class("xmas/null/syn+fin/syn+rst/fin+psh+urg to the listener",
                       [to_listener("FSRPAU"), to_listener(""), to_listener("SF"), to_listener("SR"),
                        to_listener("FPU")], "listener", ["engine.0.tcp_accepted", "engine.0.tcp_rst_sent"],
                       replies=syn_replies(False))
        land = E() / IP(src=IP_A, dst=IP_A) / TCP(sport=PORT, dport=PORT, flags="S", seq=1234)
        self.run_class("land (src = dst = server, SYN)", [land] * 3, "parse", "engine.0.parse_ip_bad_source")
        self.run_class("multicast/broadcast/zero sources (SYN)",
                       [to_listener("S", src=s) for s in ("224.0.0.1", "239.1.2.3", "255.255.255.255", "0.0.0.0")],
                       "parse", "engine.0.parse_ip_bad_source")
        # The wire parser cannot know the subnet; the engine asks its next-hop layer (the
        # interface's prefix from netlink) for SYNs.
        self.run_class("subnet-broadcast source 10.77.0.255 (SYN)", [to_listener("S", src="10.77.0.255")] * 2,
                       "parse", "engine.0.parse_ip_bad_source")
        # --- RFC 5961 on the probe connection (its 4-tuple, sequence numbers exact) ---
        self.run_class("xmas/syn+fin/null on the probe (in-window seq)",
                       [E() / ipb() / p.seg("FSRPAU", seq_off=48), E() / ipb() / p.seg("SF", seq_off=48),
                        E() / ipb() / p.seg("", seq_off=0)], "accepted", challenge=(2, 2))
        self.run_class("rfc5961_rst_in_window (not exact)", [E() / ipb() / p.seg("R", seq_off=48 + i) for i in range(3)],
                       "accepted", challenge=(3, 3))
        self.run_class("rfc5961_rst_out_of_window", [E() / ipb() / p.seg("R", seq_off=2**31 + i) for i in range(3)],
                       "accepted", challenge=(0, 0))
        self.run_class("rfc5961_syn_in_window", [E() / ipb() / p.seg("S", seq_off=48 + i) for i in range(3)],
                       "accepted", challenge=(3, 3))
        # Out of the window, a SYN or an ACK of unsent data is a refused pure segment: answered
        # at most once per 500 ms per connection (Linux's tcp_oow_rate_limited(), which ends any
        # ACK loop), so three in a burst draw one ACK. The sleep starts a fresh interval.
        time.sleep(0.6)
        self.run_class("rfc5961_syn_out_of_window", [E() / ipb() / p.seg("S", seq_off=2**31 + i) for i in range(3)],
                       "accepted", challenge=(1, 1))
        self.run_class("rfc5961_old_ack (SND.UNA - 2^30)", [E() / ipb() / p.seg("A", ack_off=-(2**30) + i) for i in range(3)],
                       "accepted", challenge=(3, 3))
        time.sleep(0.6)
        self.run_class("rfc5961_ack_unsent_data (SND.NXT + 2^20)",
                       [E() / ipb() / p.seg("A", ack_off=2**20 + i) for i in range(3)], "accepted", challenge=(1, 1))
        time.sleep(1.1)  # a fresh rate-limit interval
        self.run_class("rfc5961_rate_limit (60 in-window RSTs in < 1 s)",
                       [E() / ipb() / p.seg("R", seq_off=100 + i) for i in range(60)], "accepted", challenge=(1, 10))


def server(b):
    srv = b.server([KNB, "server", "--stack", "crescent", "--proto", "echo", "--cpus", "0"]
                   + knb_test.crescent_dev("a"), "knb server (crescent echo)")
    return srv, srv.p.pid


def case_frames(b, pid):
    h = Hostile(b, pid)
    with InNs(b.b):
        h.tx = conf.L2socket(iface=h.vb)
        h.probe = Probe(h.vb)
        check(h.probe.alive(), f"the probe connection from {IP_B}:{h.probe.lport} echoes byte-exact")
        h.classes()
        h.probe.s.close()


def flood_counters(pid, samples):
    c = counters(pid)
    samples.append((c.get("zbuf.2048.live", 0), c.get("engine.0.connections", 0)))
    return c


def case_flood(b, pid):
    h = Hostile(b, pid)
    z0, c0 = h.baseline()
    with InNs(b.b):
        rc, out, d0 = h.knb_run(3.0)()
        knb_test.sane(rc, out, d0, "knb run without a flood")
        before = counters(pid)
        # The flow under the flood is one established just before it: a connection opened
        # inside the flood needs one of its SYNs through the veth's XDP ring, which the flood
        # overruns (crescent took ~26 % of the frames in one CI run), and a kernel client
        # sends 3 SYNs in knb's 5 s (0, 1, 3 s): that run once failed to connect at all.
        # Opening a connection inside the flood is checked below, with a plain socket.
        join = h.knb_run(3.0)
        time.sleep(0.4)
        t0 = time.time()
        flood = subprocess.Popen(["taskset", "-c", knb_test.CPU_C, "timeout", "-s", "INT", "5", "hping3", "--flood", "-S", "--rand-source",
                                  "-p", str(PORT), IP_A], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            samples = []
            time.sleep(1.1)
            flood_counters(pid, samples)
            # A new legitimate connection during the flood.
            new_ok = False
            try:
                s = socket.create_connection((IP_A, PORT), timeout=5)
                msg = random.randbytes(2000)
                s.sendall(msg)
                got = b""
                end = time.time() + 5
                while len(got) < len(msg) and time.time() < end:
                    dd = s.recv(4096)
                    if not dd:
                        break
                    got += dd
                new_ok = got == msg
                s.close()
            except OSError as e:
                print(f"new connection during the flood: {e}")
            rc, out, d1 = join()
            mid = flood_counters(pid, samples)
        finally:
            fout, _ = flood.communicate(timeout=30)
        t_end = time.time()
        flood_s = t_end - t0
    m = re.search(r"(\d+) packets transmitted", fout)
    sent = int(m.group(1)) if m else None
    after = counters(pid)
    rx = after["engine.0.rx_packets"] - before["engine.0.rx_packets"]
    cookies = after.get("engine.0.tcp_syn_cookies_sent", 0) - before.get("engine.0.tcp_syn_cookies_sent", 0)
    try:
        knb_test.sane(rc, out, d1, "knb run during the SYN flood")
        knb_ok = True
    except Fail as e:
        knb_ok, d1 = False, d1
        print(f"FINDING: {e}")
    zmax = max(s[0] for s in samples)
    cmax = max(s[1] for s in samples)
    # zbuf objs must come back at once; the SYN-RECEIVED embryos of spoofed sources (their
    # SYN-ACKs have no route) are bounded by the backlog and end with their SYN-ACK retries
    # (syn_retries), as Linux's request socks do: how long that took is reported, not judged
    # (~60 s: RELIABILITY.md), so it is waited for only HOSTILE_DRAIN s (2); the zbufs up to 10 s.
    limit = float(os.environ.get("HOSTILE_DRAIN", "2"))
    end, end_z = t_end + limit, t_end + max(limit, 10.0)
    z1, c1 = h.baseline()
    cmax = max(cmax, c1)
    while (z1 != z0 and time.time() < end_z) or (c1 > c0 and time.time() < end):
        time.sleep(0.5)
        z1, c1 = h.baseline()
    drain = time.time() - t_end if c1 <= c0 else None
    r0, r1 = d0["result"], (d1 or {}).get("result") or {}
    rate = (sent or rx) / 5.0
    print(f"flood: hping3 sent {sent} SYNs in 5 s ({rate:.0f}/s; crescent received {rx} frames over {flood_s:.1f} s); "
          f"SYN cookies sent {cookies}; during: {mid.get('engine.0.connections')} connections, zbuf live max {zmax}")
    print(f"flow without the flood: {r0['rps']:.0f} RPC/s, p99 {r0['latency_us']['p99']:.1f} us; during: "
          f"{r1.get('rps', 0):.0f} RPC/s, p99 {r1.get('latency_us', {}).get('p99', 0):.1f} us, errors {r1.get('errors')}")
    bound = c0 + BACKLOG + 8  # the backlog's embryos, the knb run's and the new connection
    ok = cookies > 0 and knb_ok and new_ok and z1 == z0 and zmax <= z0 + 64 and cmax <= bound
    add("syn_flood (hping3 --flood -S --rand-source, 5 s)", sent if sent is not None else rx,
        "engine.0.tcp_syn_cookies_sent", cookies, ok,
        f"{rate:.0f} SYN/s; flow {r0['rps']:.0f} -> {r1.get('rps', 0):.0f} RPC/s, p99 {r0['latency_us']['p99']:.1f} -> "
        f"{r1.get('latency_us', {}).get('p99', 0):.1f} us, errors {r1.get('errors')}; new connection during the flood "
        f"{'echoed byte-exact' if new_ok else 'FAILED'}; zbuf live {z0} -> max {zmax} -> {z1}; connections {c0} -> "
        f"max {max(cmax, c1)} (bound {bound}: backlog {BACKLOG}), "
        + (f"back to {c1} {drain:.1f} s after the flood ended" if drain is not None
           else f"still {c1} {limit:.0f} s after the flood ended (half-open embryos: their SYN-ACK retries)"))
    ROWS[-1].update(knb_verified=r1.get("verified", 0) + r0.get("verified", 0), probe_bytes=4000 if new_ok else 0,
                    flood=dict(sent=sent, seconds=5, rate=rate, crescent_rx=rx, cookies=cookies,
                               rps_without=r0["rps"], p99_without_us=r0["latency_us"]["p99"],
                               rps_during=r1.get("rps"), p99_during_us=r1.get("latency_us", {}).get("p99"),
                               errors_during=r1.get("errors"), conns_max=max(cmax, c1), drain_s=drain))


def summary():
    print("\nclass | frames sent | counter | delta | verdict")
    print("----- | ----------- | ------- | ----- | -------")
    for r in ROWS:
        tag = "ok" if r["ok"] else ("known finding" if r.get("known") else "FINDING")
        print(f"{r['cls']} | {r['sent']} | {r['counter']} | {r['delta']} | {tag}: {r['verdict']}")
    print(f"total: {len(ROWS)} classes, {sum(r['sent'] for r in ROWS if not r['cls'].startswith('syn_flood'))} "
          f"crafted frames (+ the flood), {sum(r.get('knb_verified', 0) for r in ROWS)} knb echo responses verified "
          f"byte-exact, {sum(r.get('probe_bytes', 0) for r in ROWS)} probe bytes echoed byte-exact")
    path = os.environ.get("HOSTILE_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(ROWS, f, indent=1)
        print(f"summary written to {path}")


def run_case(case):
    knb_test.KNB = KNB
    random.seed(11)
    try:
        with knb_test.Bed() as b:
            srv, pid = server(b)
            if case in ("frames", "all"):
                case_frames(b, pid)
            if case in ("flood", "all"):
                case_flood(b, pid)
            check(srv.p.poll() is None, "the crescent server is still running")
            check(srv.stop() == 0, "the crescent server exited 0 on SIGTERM")
    finally:
        summary()
    bad = [r["cls"] for r in ROWS if not r["ok"] and not r.get("known")]
    check(not bad, f"every class handled ({len(ROWS)} classes; findings: {bad})")


def main():
    global KNB, STAT
    (KNB, STAT), case = nslib.parse_args(__doc__, {"frames": 1, "flood": 1, "all": 1}, 2)
    skip = nslib.need_root()
    if not skip and not HAVE_SCAPY:
        skip = "scapy is not importable by /usr/bin/python3 (apt-get install python3-scapy)"
    if not skip and shutil.which("hping3") is None and case != "frames":
        skip = "hping3 is not installed"
    return nslib.run(lambda: run_case(case), skip)


if __name__ == "__main__":
    sys.exit(main())
