#!/usr/bin/env python3
"""crescent and the kernel on one interface and IP (issue 5, Luna §7.1-7.2).

Usage: coexist_test.py ECHO MIXED CASE
  ECHO   the crescent-echo binary       MIXED  the crescent-mixed binary
  CASE   samenet | restart | mixed | overlap | crash | multiengine | badargs

Every case builds its own namespaces with `tools/testbed up NAME` (NAME unique
per process: <NAME>-a runs crescent on <NAME>-va 10.77.0.1, <NAME>-b is the
peer 10.77.0.2) and always removes them with `tools/testbed down NAME`. Kernel
sockets of either namespace are made in this process (setns on the creating
thread, then back), so every client, server and counter lives here. Every
wait is bounded. Exit: 0 pass, 1 fail, 77 skip (not root / no AF_XDP).

  samenet     crescent-echo serves port 7 under load from B while, on the same
              interface and IP, a kernel HTTP server answers every request, two
              long-lived kernel connections (A->B and B->A, a message every
              100 ms) never break, ping and ARP work, and kernel clients of A
              (ip_local_port_range widened to 61000-65535) never get a port of
              the reserved client range. Zero failures allowed.
  restart     crescent-echo started and stopped 5 times while kernel traffic
              flows: no kernel connection is reset, and after each exit no XDP
              program, pinned BPF object, reserved port, registry entry or
              hugepage file of crescent remains.
  mixed       crescent-mixed: echo through crescent and GET / through kernel TCP
              at the same time; the status JSON counts the echo connections.
  overlap     a second crescent with an overlapping plan on the interface is
              refused with the registry's message naming the first.
  crash       crescent killed with SIGKILL leaves its XDP program and reserved
              ports; the next start undoes them (registry crash recovery).
  multiengine 2 engines on 2-queue veth; B picks its TX queue (= A's RX
              queue on veth) through XPS and CPU pinning as a NIC's ntuple
              rules would by port: server connections reach the engine the
              plan names for their source port, and a 2-engine client's
              replies come back to each engine's own client sub-range. What
              this does NOT test: port-based queue selection itself (no NIC).
  badargs     crescent-mixed rejects bad options with one line; --show-plan
              prints the plan without starting anything (runs without root).
"""
import ctypes
import glob
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TIMEOUT = 20
CLIENT_LO, CLIENT_HI = 61440, 65535
ECHO = MIXED = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import IP_A, IP_B, SKIP, TESTBED, Fail, check, sh  # noqa: E402


# ---- namespaces -----------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
_ns_lock = threading.Lock()


def in_ns(ns, fn):
    """Run fn() on this thread inside network namespace `ns` (sockets made there stay there)."""
    with _ns_lock:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if _libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                return fn()
            finally:
                _libc.setns(own, CLONE_NEWNET)
        finally:
            os.close(own)
            os.close(target)


def connect_from(ns, ip, port, sport=0, timeout=3):
    def mk():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", sport))
        s.settimeout(timeout)
        s.connect((ip, port))
        return s
    return in_ns(ns, mk)


def listen_in(ns, ip, port):
    def mk():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ip, port))
        s.listen(128)
        return s
    return in_ns(ns, mk)


class Bed:
    def __init__(self, case, queues=1):
        self.name = f"cx{case[:3]}{os.getpid() % 100000}"
        self.a, self.b = self.name + "-a", self.name + "-b"
        self.va, self.vb = self.name + "-va", self.name + "-vb"
        self.prefix = f"cx{case[:3]}{os.getpid()}"
        self.queues = queues
        self.procs = []
        self.stop = threading.Event()
        self.threads = []

    def __enter__(self):
        sh(TESTBED, "bpffs")
        sh(TESTBED, "hugepages", "256")
        sh(TESTBED, "up", self.name)
        if self.queues > 1:
            # testbed's veth has one queue: replace it by a multi-queue pair.
            sh("ip", "-n", self.a, "link", "del", self.va)
            q = str(self.queues)
            sh("ip", "link", "add", self.va, "numtxqueues", q, "numrxqueues", q, "type", "veth",
               "peer", "name", self.vb, "numtxqueues", q, "numrxqueues", q)
            sh("ip", "link", "set", self.va, "netns", self.a)
            sh("ip", "link", "set", self.vb, "netns", self.b)
            sh("ip", "-n", self.a, "addr", "add", IP_A + "/24", "dev", self.va)
            sh("ip", "-n", self.b, "addr", "add", IP_B + "/24", "dev", self.vb)
            for ns, dev in ((self.a, self.va), (self.b, self.vb)):
                sh("ip", "-n", ns, "link", "set", dev, "up")
                sh("ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                   ns=ns, check_rc=False)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(5)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        subprocess.run([TESTBED, "down", self.name], timeout=TIMEOUT)
        subprocess.run([TESTBED, "clean-hugefiles", self.prefix], timeout=TIMEOUT)
        for d in glob.glob(f"/run/crescent/*/{self.va}"):
            subprocess.run(["rm", "-rf", d])
            try:
                os.rmdir(os.path.dirname(d))  # the namespace's directory, once empty
            except OSError:
                pass
        return False

    def spawn(self, argv):
        self.procs = [p for p in self.procs if p.poll() is None]
        return Crescent(self, argv)

    def thread(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)
        return t


class Crescent(nslib.Proc):
    """A crescent example in namespace A (nslib.Proc), stopped with the bed."""

    def __init__(self, bed, argv):
        super().__init__(bed.a, argv, "crescent")
        bed.procs.append(self.p)


def echo_args(bed, extra=()):
    return [ECHO, "--iface", bed.va, "--port", "7", "--file-prefix", bed.prefix] + list(extra)


# ---- kernel traffic -------------------------------------------------------------

class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.fail = 0
        self.errors = []

    def good(self, n=1):
        with self.lock:
            self.ok += n

    def bad(self, why):
        with self.lock:
            self.fail += 1
            if len(self.errors) < 5:
                self.errors.append(why)

    def __str__(self):
        return f"{self.ok} ok, {self.fail} failed {self.errors}"


def start_http_server(bed, port=8000):
    """A kernel HTTP server in A on the crescent interface's IP (a monitoring agent)."""
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"kernel ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = in_ns(bed.a, lambda: ThreadingHTTPServer((IP_A, port), H))
    srv.daemon_threads = True
    bed.thread(lambda: srv.serve_forever(poll_interval=0.1))
    bed.stop_hooks = getattr(bed, "stop_hooks", []) + [srv.shutdown]
    return srv


def http_poller(bed, counter, url, ns, period=0.05, expect=b"kernel ok"):
    def run():
        while not bed.stop.is_set():
            try:
                body = fetch_in(ns, url)
                if expect in body:
                    counter.good()
                else:
                    counter.bad(f"unexpected body {body[:60]!r}")
            except Exception as e:  # noqa: BLE001 - every failure is counted
                counter.bad(f"{url}: {e}")
            bed.stop.wait(period)
    return bed.thread(run)


def fetch_in(ns, url):
    m = re.match(r"http://([\d.]+):(\d+)(/.*)?$", url)
    s = connect_from(ns, m.group(1), int(m.group(2)))
    try:
        s.sendall(f"GET {m.group(3) or '/'} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        if not data.startswith(b"HTTP/1.") or b" 200 " not in data.split(b"\r\n", 1)[0]:
            raise Fail(f"bad response {data[:80]!r}")
        return data.split(b"\r\n\r\n", 1)[1]
    finally:
        s.close()


def long_lived(bed, counter, client_ns, server_ns, server_ip, port):
    """An sshd-like kernel connection: a message and its echo every 100 ms; never breaks."""
    lsock = listen_in(server_ns, server_ip, port)

    def serve():
        lsock.settimeout(0.2)
        while not bed.stop.is_set():
            try:
                c, _ = lsock.accept()
            except socket.timeout:
                continue
            c.settimeout(1)
            while not bed.stop.is_set():
                try:
                    d = c.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not d:
                    break
                c.sendall(d)
            c.close()
        lsock.close()
    bed.thread(serve)
    s = connect_from(client_ns, server_ip, port)
    local_port = s.getsockname()[1]

    def talk():
        i = 0
        while not bed.stop.is_set():
            msg = f"keepalive {i}\n".encode()
            try:
                s.sendall(msg)
                got = b""
                while len(got) < len(msg):
                    d = s.recv(len(msg) - len(got))
                    if not d:
                        raise Fail("closed by peer")
                    got += d
                if got != msg:
                    raise Fail(f"garbled {got!r}")
                counter.good()
            except Exception as e:  # noqa: BLE001
                counter.bad(f"long-lived {client_ns}->{server_ip}:{port}: {e}")
                return
            i += 1
            bed.stop.wait(0.1)
        s.close()
    bed.thread(talk)
    return local_port


def echo_load(bed, counter, ns, ip, port, conns=4, size=4096):
    """Kernel clients streaming to crescent's echo port; every byte verified."""
    def run(k):
        rnd = random.Random(k)
        while not bed.stop.is_set():
            try:
                s = connect_from(ns, ip, port)
                try:
                    for _ in range(50):
                        if bed.stop.is_set():
                            break
                        msg = bytes(rnd.getrandbits(8) for _ in range(size))
                        s.sendall(msg)
                        got = b""
                        while len(got) < len(msg):
                            d = s.recv(65536)
                            if not d:
                                raise Fail("echo connection closed")
                            got += d
                        if got != msg:
                            raise Fail("echo differs")
                        counter.good()
                finally:
                    s.close()
            except Exception as e:  # noqa: BLE001
                if not bed.stop.is_set():
                    counter.bad(f"echo: {e}")
                    bed.stop.wait(0.2)
    for k in range(conns):
        bed.thread(lambda k=k: run(k))


def echo_once(ns, ip, port, msg=b"ping through crescent"):
    s = connect_from(ns, ip, port)
    try:
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = s.recv(4096)
            if not d:
                break
            got += d
        return got == msg
    finally:
        s.close()


# ---- state of the interface ----------------------------------------------------

def reserved(bed):
    return open_in(bed.a, "/proc/sys/net/ipv4/ip_local_reserved_ports").strip()


def open_in(ns, path):
    return sh("cat", path, ns=ns).stdout


def xdp_attached(bed):
    out = sh("ip", "-n", bed.a, "link", "show", bed.va).stdout
    return "xdp" in out.split("\n", 1)[0] or "prog/xdp" in out


def bpffs_entries():
    out = set()
    for root, dirs, files in os.walk("/sys/fs/bpf"):
        for n in dirs + files:
            out.add(os.path.join(root, n))
    return out


def registry_entries(bed):
    return glob.glob(f"/run/crescent/*/{bed.va}/*.entry")


def leftovers(bed, reserved_before, bpf_before):
    """What crescent left behind: [] when nothing."""
    left = []
    if xdp_attached(bed):
        left.append("XDP program on " + bed.va)
    if reserved(bed) != reserved_before:
        left.append(f"reserved ports {reserved(bed)!r} (was {reserved_before!r})")
    new_bpf = bpffs_entries() - bpf_before
    if new_bpf:
        left.append(f"pinned BPF objects {sorted(new_bpf)}")
    if registry_entries(bed):
        left.append(f"registry entries {registry_entries(bed)}")
    huge = glob.glob(f"/dev/hugepages/{bed.prefix}*") + glob.glob(f"/var/run/dpdk/{bed.prefix}*")
    if huge:
        left.append(f"DPDK files {huge}")
    return left


def steer_ok_or_skip(c):
    out = c.output()
    if c.p.poll() is not None and re.search(r"af_xdp|AF_XDP|XDP", out) and "listening" not in out:
        print(f"SKIP: AF_XDP unavailable here:\n{out}")
        sys.exit(SKIP)


# ---- cases ----------------------------------------------------------------------

def case_samenet():
    with Bed("samenet") as bed:
        # Kernel clients of A could take any port 61000-65535 were it not for the reservation.
        sh("sysctl", "-qw", "net.ipv4.ip_local_port_range=61000 65535", ns=bed.a)
        c = bed.spawn(echo_args(bed))
        if not c.wait_for(r"listening on"):
            steer_ok_or_skip(c)
            raise Fail(f"crescent-echo did not start:\n{c.output()}")
        check(reserved(bed) == f"{CLIENT_LO}-{CLIENT_HI}", "client range reserved in A while crescent runs")
        start_http_server(bed, 8000)
        http, ll, echo = Counter(), Counter(), Counter()
        http_poller(bed, http, f"http://{IP_A}:8000/", bed.b)
        long_lived(bed, ll, bed.b, bed.a, IP_A, 2222)        # B -> kernel server of A
        a_port = long_lived(bed, ll, bed.a, bed.b, IP_B, 2223)  # kernel client of A -> B
        echo_load(bed, echo, bed.b, IP_A, 7, conns=4)
        # Kernel clients in A: many short connections to a server in B.
        lsock = listen_in(bed.b, IP_B, 2224)
        lsock.settimeout(0.5)

        def acceptor():
            while not bed.stop.is_set():
                try:
                    s, _ = lsock.accept()
                    s.close()
                except OSError:
                    continue
        bed.thread(acceptor)
        ports, port_fail = [a_port], Counter()
        pings = Counter()
        t_end = time.time() + 8
        while time.time() < t_end:
            try:
                s = connect_from(bed.a, IP_B, 2224)
                ports.append(s.getsockname()[1])
                # RST on close: no TIME_WAIT, so the narrow range never runs dry.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                port_fail.good()
            except Exception as e:  # noqa: BLE001
                port_fail.bad(str(e))
            if len(ports) % 50 == 0:
                r = sh("ping", "-c", "2", "-i", "0.2", "-W", "1", IP_A, ns=bed.b, check_rc=False)
                pings.good() if r.returncode == 0 else pings.bad(r.stdout[-200:])
            time.sleep(0.02)
        # ARP: forget A in B, then a kernel request must re-learn it through the shared interface.
        sh("ip", "-n", bed.b, "neigh", "flush", "dev", bed.vb)
        r = sh("ping", "-c", "3", "-i", "0.2", "-W", "1", IP_A, ns=bed.b, check_rc=False)
        pings.good() if r.returncode == 0 else pings.bad(r.stdout[-200:])
        neigh = sh("ip", "-n", bed.b, "neigh", "show", IP_A, "dev", bed.vb).stdout
        bed.stop.set()
        for t in bed.threads:
            t.join(5)
        for h in getattr(bed, "stop_hooks", []):
            h()
        in_range = [p for p in ports if CLIENT_LO <= p <= CLIENT_HI]
        print(f"http: {http}\nlong-lived: {ll}\necho (crescent): {echo}\nping: {pings}\n"
              f"kernel client ports of A: {len(ports)} (min {min(ports)}, max {max(ports)}), {port_fail}")
        check(http.fail == 0 and http.ok >= 20, f"kernel HTTP server on the shared IP answered all {http.ok} requests")
        check(ll.fail == 0 and ll.ok >= 100, f"long-lived kernel connections never broke ({ll.ok} exchanges)")
        check(echo.fail == 0 and echo.ok >= 20, f"crescent echo under load: {echo.ok} verified round trips")
        check(pings.fail == 0 and pings.ok >= 2, f"ping works ({pings.ok} runs)")
        check("lladdr" in neigh, f"ARP: B re-learnt A's MAC: {neigh.strip()}")
        check(port_fail.fail == 0 and len(ports) >= 50, f"{len(ports)} kernel connections from A")
        check(not in_range, f"no kernel ephemeral port of A in {CLIENT_LO}-{CLIENT_HI} (got {in_range[:5]})")
        check(max(ports) >= 61000 and min(ports) >= 61000, "A's kernel clients used the widened range below it")
        check(c.stop() == 0, "crescent-echo exited cleanly")


def case_restart():
    with Bed("restart") as bed:
        reserved_before = reserved(bed)
        bpf_before = bpffs_entries()
        start_http_server(bed, 8000)
        http, ll = Counter(), Counter()
        http_poller(bed, http, f"http://{IP_A}:8000/", bed.b)
        long_lived(bed, ll, bed.b, bed.a, IP_A, 2222)
        long_lived(bed, ll, bed.a, bed.b, IP_B, 2223)
        for i in range(5):
            c = bed.spawn(echo_args(bed))
            if not c.wait_for(r"listening on"):
                steer_ok_or_skip(c)
                raise Fail(f"start {i + 1}: crescent-echo did not start:\n{c.output()}")
            check(xdp_attached(bed) and registry_entries(bed), f"start {i + 1}: steering + registry entry in place")
            check(echo_once(bed.b, IP_A, 7), f"start {i + 1}: echo through crescent")
            time.sleep(0.5)
            rc = c.stop()
            check(rc == 0, f"start {i + 1}: crescent-echo exited with 0 on SIGTERM")
            left = leftovers(bed, reserved_before, bpf_before)
            check(not left, f"start {i + 1}: nothing left behind {left}")
            time.sleep(0.3)
        time.sleep(0.5)
        bed.stop.set()
        for t in bed.threads:
            t.join(5)
        for h in getattr(bed, "stop_hooks", []):
            h()
        print(f"http: {http}\nlong-lived: {ll}")
        check(http.fail == 0 and http.ok >= 20, f"kernel HTTP answered all {http.ok} requests across restarts")
        check(ll.fail == 0 and ll.ok >= 50, f"long-lived kernel connections never reset ({ll.ok} exchanges)")


def case_mixed():
    with Bed("mixed") as bed:
        # Application slot 1 of 2: the upper half of the client range is ours.
        c = bed.spawn([MIXED, "--iface", bed.va, "--port", "7", "--http-port", "8080",
                       "--app-slots", "2", "--app-slot", "1", "--file-prefix", bed.prefix])
        if not c.wait_for(r"HTTP status on"):
            steer_ok_or_skip(c)
            raise Fail(f"crescent-mixed did not start:\n{c.output()}")
        check(reserved(bed) == "63488-65535", f"slot 1 of 2 reserved 63488-65535 (got {reserved(bed)!r})")
        # A client that never sends its request: it must not hold up the loop,
        # and the server drops it after its 5 s head timeout.
        idle = connect_from(bed.b, IP_A, 8080)
        idle_t0 = time.time()
        echo, status = Counter(), Counter()
        echo_load(bed, echo, bed.b, IP_A, 7, conns=3)
        last = {}

        def poll_status():
            while not bed.stop.is_set():
                try:
                    j = json.loads(fetch_in(bed.b, f"http://{IP_A}:8080/"))
                    last.update(j)
                    status.good()
                except Exception as e:  # noqa: BLE001
                    status.bad(str(e))
                bed.stop.wait(0.05)
        bed.thread(poll_status)
        time.sleep(6)
        # Both paths at once: the last status seen while the echo load ran.
        snap = dict(last)
        bed.stop.set()
        for t in bed.threads:
            t.join(5)
        print(f"echo: {echo}\nstatus: {status}\nlast status: {json.dumps(snap)[:400]}")
        check(echo.fail == 0 and echo.ok >= 20, f"echo through crescent: {echo.ok} verified round trips")
        check(status.fail == 0 and status.ok >= 20, f"HTTP status through kernel TCP: {status.ok} GETs answered")
        check(snap.get("echo", {}).get("accepted", 0) >= 3, "status counts the echo connections")
        check(snap.get("echo", {}).get("bytes", 0) > 0, "status counts echoed bytes")
        check(snap.get("ip") == IP_A, "both served on the same IP")
        check(snap.get("client_ports") == "63488-65535",
              f"the engine's client ports are the plan's (got {snap.get('client_ports')})")
        bad = fetch_raw(bed.b, IP_A, 8080, b"POST / HTTP/1.0\r\n\r\n")
        check(bad.startswith(b"HTTP/1.0 405"), "POST answered 405")
        check(fetch_raw(bed.b, IP_A, 8080, b"GET /nope HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 404"), "unknown path 404")
        idle.settimeout(8)
        try:
            dropped = idle.recv(1) == b""
        except OSError:
            dropped = True
        waited = time.time() - idle_t0
        idle.close()
        check(dropped and 4.5 <= waited <= 9, f"a silent HTTP client was dropped after {waited:.1f}s (5 s head timeout)")
        check(c.stop() == 0, "crescent-mixed exited cleanly")


def fetch_raw(ns, ip, port, req):
    s = connect_from(ns, ip, port)
    try:
        s.sendall(req)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                return data
            data += d
    finally:
        s.close()


def case_overlap():
    with Bed("overlap") as bed:
        c = bed.spawn([MIXED, "--iface", bed.va, "--app-slots", "2", "--app-slot", "0",
                       "--file-prefix", bed.prefix])
        if not c.wait_for(r"HTTP status on"):
            steer_ok_or_skip(c)
            raise Fail(f"crescent-mixed did not start:\n{c.output()}")
        before = reserved(bed)
        r = sh(MIXED, "--iface", bed.va, "--app-slots", "2", "--app-slot", "0", "--http-port", "8081",
               "--file-prefix", bed.prefix + "x", ns=bed.a, check_rc=False)
        msg = (r.stdout + r.stderr).strip()
        print(f"second instance: rc {r.returncode}: {msg[-400:]}")
        check(r.returncode != 0, "an overlapping plan is refused")
        check(str(c.p.pid) in msg or "overlap" in msg.lower(), "the message names the holder / the overlap")
        check(reserved(bed) == before, "the refused instance changed no reserved port")
        check(echo_once(bed.b, IP_A, 7), "the first instance still serves")
        check(c.stop() == 0, "first instance exited cleanly")


def case_crash():
    with Bed("crash") as bed:
        reserved_before = reserved(bed)
        c = bed.spawn(echo_args(bed))
        if not c.wait_for(r"listening on"):
            steer_ok_or_skip(c)
            raise Fail(f"crescent-echo did not start:\n{c.output()}")
        c.stop(signal.SIGKILL)
        check(xdp_attached(bed) and reserved(bed) != reserved_before,
              "SIGKILL leaves the XDP program and the reserved ports behind")
        c2 = bed.spawn(echo_args(bed))
        if not c2.wait_for(r"listening on"):
            raise Fail(f"restart after a crash failed:\n{c2.output()}")
        check(re.search(r"detached XDP program \d+ left by dead pid", c2.output()) is not None
              and re.search(r"removed reserved ports .* left by dead pid", c2.output()) is not None,
              "the new instance detached the dead one's XDP program and released its reserved ports")
        check(echo_once(bed.b, IP_A, 7), "echo through the new instance")
        check(c2.stop() == 0, "the new instance exited cleanly")
        check(not xdp_attached(bed) and reserved(bed) == reserved_before and not registry_entries(bed),
              "nothing of either instance remains")


def engine_lines(out):
    """{engine index: {counter: value}} from --stats lines."""
    res = {}
    for m in re.finditer(r"^engine (\d+):(.*)$", out, re.M):
        res[int(m.group(1))] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return res


def case_multiengine():
    if (os.cpu_count() or 1) < 2:
        print("SKIP: needs 2 CPUs for 2 engines")
        sys.exit(SKIP)
    with Bed("multi", queues=2) as bed:
        # B's TX queue i arrives on A's RX queue i (veth), i.e. on engine i. No
        # NIC here steers by port, and this kernel has no tc skbedit/multiq, so
        # B plays the NIC with XPS: TX queue i is used by CPU i, and every B
        # thread that sends on a connection is pinned to the CPU of the engine
        # the plan names (softirq replies run on the CPU the frame came in on,
        # which is the engine's own lcore, so they follow).
        for q in (0, 1):
            sh("sh", "-c", f"echo {1 << q:x} > /sys/class/net/{bed.vb}/queues/tx-{q}/xps_cpus", ns=bed.b)
        all_cpus = os.sched_getaffinity(0)
        reserved_before = reserved(bed)
        bpf_before = bpffs_entries()
        c = bed.spawn(echo_args(bed, ["--cores", "2", "--stats"]))
        started = c.wait_for(r"listening on")
        out = c.output()
        # The plan is computed and logged before any device is touched.
        check(re.search(r"engine 0 \(queue 0\): local ports 61440-63487", out) and
              re.search(r"engine 1 \(queue 1\): local ports 63488-65535", out),
              "2-engine plan: the client range split in two contiguous halves")
        check(re.search(r"server port 7: by source port 0/0x0001 -> engine 0 \(50.0%\), "
                        r"1/0x0001 -> engine 1 \(50.0%\)", out),
              "2-engine plan: port 7 spread by the source port's low bit")
        if not started and re.search(r"fewer combined channels", out):
            c.stop()
            left = leftovers(bed, reserved_before, bpf_before)
            check(not left, f"the refused 2-queue start left nothing behind {left}")
            print("SKIP: the af_xdp PMD (DPDK 22.11) needs ethtool 'combined' channels for more than one "
                  "queue and veth only reports rx/tx channels, so 2 engines cannot run on veth here:\n"
                  + out.splitlines()[-1])
            sys.exit(SKIP)
        if not started:
            steer_ok_or_skip(c)
            raise Fail(f"crescent-echo --cores 2 did not start:\n{out}")
        print("\n".join(l for l in c.lines if "engine" in l and "port" in l))
        # Server: 16 connections from chosen source ports, 8 even and 8 odd.
        sports = list(range(40100, 40116))
        fails = 0
        for sp in sports:
            os.sched_setaffinity(0, {sp & 1})  # plan: engine = source port low bit
            try:
                s = connect_from(bed.b, IP_A, 7, sport=sp)
                s.sendall(b"x" * 100)
                got = b""
                while len(got) < 100:
                    d = s.recv(100)
                    if not d:
                        break
                    got += d
                fails += got != b"x" * 100
                s.close()
            except Exception as e:  # noqa: BLE001
                print(f"connection from {sp}: {e}")
                fails += 1
        os.sched_setaffinity(0, all_cpus)
        check(fails == 0, f"{len(sports)} echo connections to a 2-engine server")
        rc = c.stop()
        stats = engine_lines(c.output())
        print(f"per-engine: { {e: s.get('tcp_accepted', 0) for e, s in stats.items()} }")
        check(rc == 0, "server exited cleanly")
        check(stats.get(0, {}).get("tcp_accepted", 0) == 8 and stats.get(1, {}).get("tcp_accepted", 0) == 8,
              "connections spread by the source port's low bit: 8 per engine, as planned")

        # Client: 2 engines connect to a kernel echo server in B; replies come back
        # to each engine's own sub-range (a wrong queue would reset them).
        seen = []
        lsock = listen_in(bed.b, IP_B, 9007)
        lsock.settimeout(0.5)

        def kernel_echo():
            while not bed.stop.is_set():
                try:
                    s, peer = lsock.accept()
                except OSError:
                    continue
                seen.append(peer[1])

                def pump(s=s, port=peer[1]):
                    os.sched_setaffinity(0, {1 if port >= 63488 else 0})  # engine 1: 63488-65535
                    s.settimeout(10)
                    try:
                        while True:
                            d = s.recv(65536)
                            if not d:
                                break
                            s.sendall(d)
                    except OSError:
                        pass
                    s.close()
                threading.Thread(target=pump, daemon=True).start()
        bed.thread(kernel_echo)
        r = sh(ECHO, "--iface", bed.va, "--cores", "2", "--port", "9007", "--file-prefix", bed.prefix + "c",
               "--client", IP_B, "--conns", "8", "--bytes", "200000", "--timeout", "30", "--stats",
               ns=bed.a, check_rc=False, timeout=60)
        print(r.stdout.strip())
        print("\n".join(l for l in r.stderr.splitlines() if l.startswith("engine")))
        e0 = [p for p in seen if 61440 <= p <= 63487]
        e1 = [p for p in seen if 63488 <= p <= 65535]
        print(f"client source ports seen by B: engine 0 {sorted(e0)}, engine 1 {sorted(e1)}")
        check(r.returncode == 0 and '"ok":true' in r.stdout, "a 2-engine client completed 8 verified connections")
        check(len(e0) == 4 and len(e1) == 4 and len(seen) == 8,
              "each client engine used its own sub-range of the plan (4 + 4)")
        st = engine_lines(r.stderr)
        check(all(st.get(e, {}).get("tcp_drop_no_listener", 0) == 0 and
                  st.get(e, {}).get("tcp_rst_sent", 0) == 0 for e in (0, 1)),
              "no client engine received a segment of the other's connections")


def case_badargs():
    """crescent-mixed's options: one-line refusals (exit 2) and --show-plan, without root."""
    bad = [
        (["--port", "7"], "--iface IFACE is required"),
        (["--iface", "x", "--http-port", "7"], "is also the echo --port"),
        (["--iface", "x", "--http-port", "62000"], "client port range"),
        (["--iface", "x", "--port", "0"], "not a number in 1..65535"),
        (["--iface", "x", "--port", "7x"], "not a number"),
        (["--iface", "x", "--bogus"], "unknown option '--bogus'"),
        (["--iface"], "--iface needs a value"),
    ]
    for args, want in bad:
        r = subprocess.run([MIXED] + args, capture_output=True, text=True, timeout=TIMEOUT)
        err = r.stderr.strip()
        check(r.returncode == 2 and want in err and "\n" not in err,
              f"crescent-mixed {' '.join(args)} -> exit 2, one line: {err}")
    r = subprocess.run([MIXED, "--iface", "x", "--app-slots", "2", "--app-slot", "2", "--show-plan"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    check(r.returncode == 1 and "slot 2 out of range" in r.stderr, f"bad plan refused: {r.stderr.strip()}")
    r = subprocess.run([MIXED, "--iface", "x", "--app-slots", "4", "--app-slot", "3", "--port", "9000",
                        "--show-plan"], capture_output=True, text=True, timeout=TIMEOUT)
    print(r.stdout)
    check(r.returncode == 0 and "client ports 64512-65535" in r.stdout and "server port 9000" in r.stdout,
          "--show-plan prints slot 3 of 4 (64512-65535) and the echo port, starting nothing")


CASES = {
    "badargs": case_badargs,
    "samenet": case_samenet,
    "restart": case_restart,
    "mixed": case_mixed,
    "overlap": case_overlap,
    "crash": case_crash,
    "multiengine": case_multiengine,
}


def main():
    global ECHO, MIXED
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    ECHO, MIXED = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3] != "badargs" and os.geteuid() != 0:
        print("SKIP: needs root")
        return SKIP
    try:
        CASES[sys.argv[3]]()
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
