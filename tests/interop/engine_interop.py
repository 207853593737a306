#!/usr/bin/env python3
"""crescent <-> Linux interop over a two-namespace veth test bed (root).

    engine_interop.py CASE CRESCENT_ECHO KERNEL_ECHO TESTBED

Each case builds its own namespaces (unique names), runs crescent-echo on
AF_XDP with the steering program in one and Linux TCP in the other, bounds
every wait, tears everything down, and checks that nothing is left behind
(no XDP program on the interfaces, no hugepage files of its DPDK prefixes).

Cases:
  linux_client      Linux socket clients <-> crescent echo server: 16 concurrent
                    connections, messages from 1 byte to 1 MiB, byte-exact.
  crescent_client   crescent client (verifying stream) <-> Linux echo server
                    (kernel-echo), several sizes from 1 byte to 1 MiB.
  netem_<cc>        crescent client <-> kernel-echo under tc netem on both veth
                    ends: 1% and 5% loss, 25% reordering, 1% duplication, 2 ms
                    delay; CRESCENT_INTEROP_MIB MiB each way (default 64, as issue 4
                    asks: 1-2 minutes per cc on a 2-core box), byte-exact. The two
                    loss rates run at once, on two beds.
                    On kernels without sch_netem the same model runs inside
                    crescent's device layer on RX and TX (crescent-echo --impair).
  c2c_inline / c2c_batch
                    crescent client and crescent server, two AF_XDP instances in
                    two namespaces.
  capture           tcpdump of a crescent <-> Linux flow parses cleanly and both
                    SYNs carry window scale, SACK-permitted and timestamps.
  peer_options      the Linux side without timestamps, without SACK, without window
                    scaling, and without all three (its namespace's sysctls): crescent
                    leaves out what was not offered (SYN-ACK, later segments, the
                    client's negotiated state) and carries data byte-exact as server
                    and as client (the client with 1 % loss); then the peer's MSS
                    lowered (its MTU 1280; a route's advmss 536): no segment above it;
                    then crescent's own route to the peer with mtu 1280: crescent's MSS
                    option and its segments follow it, and so do the peer's; last a
                    black hole (the peer drops crescent's packets above 1200 bytes):
                    crescent halves its MSS after repeated timeouts and completes.
  linux_quirks      a Linux client's keepalive probes (1 s apart, one unanswered probe
                    resets) across 4.5 s of idle time, its SYN carrying data (Fast
                    Open without a cookie), and IPv4 options (Record Route) on every
                    segment: all answered, byte-exact.
  ecn               Linux asking for ECN (tcp_ecn=1), crescent on DCTCP, nftables
                    marking 3 % of ECN-capable packets CE both ways: ECN-setup SYN and
                    SYN-ACK, ECT(0) data, CE echoed each way, byte-exact.
  badinput          unknown interface, no hugepages (none reserved; hugetlbfs not
                    mounted), no permission (an unprivileged user), EAL failure,
                    bad options, interface already in use: one-line error naming
                    the cause and the fix, non-zero exit, nothing left behind.
  gateway           three namespaces A - G - B (G forwards): crescent client in A
                    <-> kernel-echo in B, reachable only through the route via G;
                    crescent takes the route from netlink and the gateway's MAC
                    from the kernel's neighbour table (no static ARP), byte-exact.
  tap               zero-copy TX (chained extbuf mbufs) on net_tap, the kernel on
                    the tap netdev: Linux client <-> crescent server (inline and
                    batch), crescent client <-> kernel-echo with 1 % loss; every
                    data segment must leave zero-copy.
  mac_change        knb's kernel-TCP echo client in B <-> crescent server in A; B's MAC is
                    changed (ip link set address) and announced by ARP; a second
                    run succeeds only if crescent took the new MAC from netlink.
Exit 77 (skip) when not root.
"""
import glob
import os
import re
import socket
import subprocess
import sys
import threading
import time

SKIP = 77


def sh(*cmd, check=True, timeout=30, **kw):
    return subprocess.run(list(cmd), check=check, timeout=timeout, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw)


class Bed:
    """Two namespaces joined by a veth pair (tools/testbed up/down)."""

    def __init__(self, testbed, tag):
        self.testbed = testbed
        self.name = f"ei{os.getpid() % 100000}{tag}"
        self.a, self.b = self.name + "-a", self.name + "-b"
        self.va, self.vb = self.name + "-va", self.name + "-vb"
        self.procs = []
        self.prefixes = []

    def __enter__(self):
        sh(self.testbed, "hugepages", "512")
        sh(self.testbed, "bpffs", check=False)
        sh(self.testbed, "up", self.name)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(2)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        sh(self.testbed, "down", self.name, check=False)
        for pf in self.prefixes:
            sh(self.testbed, "clean-hugefiles", pf, check=False)
        # A failed case may leave its registry directories (see no_leftovers).
        for d in glob.glob(f"/run/crescent/net-*/{self.name}-*"):
            sh("rm", "-rf", d, check=False)
            try:
                os.rmdir(os.path.dirname(d))  # the namespace's directory, once empty
            except OSError:
                pass

    def ns(self, which):
        return self.a if which == "a" else self.b

    def spawn(self, which, *cmd):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(which)] + list(cmd),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def run(self, which, *cmd, timeout=120, check=False):
        return sh("ip", "netns", "exec", self.ns(which), *cmd, timeout=timeout, check=check)

    def prefix(self, tag):
        pf = f"{self.name}{tag}"
        self.prefixes.append(pf)
        return pf

    def wait_port(self, which, ip, port, timeout=20):
        probe = (f"import socket,sys\ns=socket.socket();s.settimeout(0.5)\n"
                 f"sys.exit(0 if s.connect_ex(('{ip}',{port}))==0 else 1)")
        end = time.time() + timeout
        while time.time() < end:
            if self.run(which, sys.executable, "-c", probe, timeout=5).returncode == 0:
                return True
            time.sleep(0.2)
        return False

    def xdp_attached(self, which, iface):
        out = self.run(which, "ip", "link", "show", iface, timeout=5).stdout
        return "prog/xdp" in out or " xdp " in out

    def no_leftovers(self, which, iface):
        ok = True
        if self.xdp_attached(which, iface):
            print(f"FAIL: an XDP program is still attached to {iface}")
            ok = False
        for pf in self.prefixes:
            left = [f for f in os.listdir("/dev/hugepages") if f.startswith(pf)] \
                if os.path.isdir("/dev/hugepages") else []
            if left:
                print(f"FAIL: hugepage files left behind: {left}")
                ok = False
        # The port registry (bifurcation/registry.hpp) goes with the last
        # crescent process on the interface.
        left = glob.glob(f"/run/crescent/*/{iface}")
        if left:
            print(f"FAIL: registry directory left behind: {left} {[os.listdir(d) for d in left]}")
            ok = False
        return ok


def stop(p, name, timeout=15):
    """SIGINT, bounded wait; returns (rc, stderr)."""
    if p.poll() is None:
        p.send_signal(2)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        print(f"FAIL: {name} did not exit within {timeout}s of SIGINT")
        return -1, err
    return p.returncode, err


# ---- Linux client program (runs inside the client namespace) ------------------------

LINUX_CLIENT = r'''
import socket, sys, threading, os
host, port, nconn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sizes = [1, 2, 3, 100, 536, 1460, 1461, 2920, 4096, 10000, 65535, 65536, 100000, 262144, 1 << 20]
errors = []
def pattern(n, seed):
    b = bytearray(os.urandom(16)) * (n // 16 + 1)
    return bytes(b[:n])
def worker(i):
    try:
        s = socket.create_connection((host, port), timeout=20)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(30)
        for n in sizes:
            msg = pattern(n, i)
            s.sendall(msg)
            got = bytearray()
            while len(got) < n:
                chunk = s.recv(min(1 << 20, n - len(got)))
                if not chunk:
                    raise RuntimeError(f"conn {i}: EOF after {len(got)} of {n}")
                got += chunk
            if bytes(got) != msg:
                raise RuntimeError(f"conn {i}: {n}-byte echo differs")
        s.shutdown(socket.SHUT_WR)
        if s.recv(1) != b"":
            raise RuntimeError(f"conn {i}: data after the last echo")
        s.close()
    except Exception as e:
        errors.append(f"conn {i}: {e}")
ts = [threading.Thread(target=worker, args=(i,)) for i in range(nconn)]
for t in ts: t.start()
for t in ts: t.join(120)
alive = [t for t in ts if t.is_alive()]
if alive: errors.append(f"{len(alive)} connections did not finish in time")
print("\n".join(errors) if errors else f"ok: {nconn} connections x {len(sizes)} messages ({sum(sizes)} bytes each)")
sys.exit(1 if errors else 0)
'''


def crescent_server(bed, which, iface, mode="inline", extra=()):
    return bed.spawn(which, CRESCENT_ECHO, "--iface", iface, "--port", "7", "--mode", mode, "--cores", "1",
                     "--file-prefix", bed.prefix("s" + which), "--stats", *extra)


def case_linux_client(testbed):
    with Bed(testbed, "lc") as bed:
        srv = crescent_server(bed, "a", bed.va)
        if not bed.wait_port("b", "10.77.0.1", 7):
            print("FAIL: crescent-echo did not come up:", stop(srv, "crescent-echo")[1][-2000:])
            return 1
        r = bed.run("b", sys.executable, "-c", LINUX_CLIENT, "10.77.0.1", "7", "16", timeout=180)
        print(r.stdout.strip(), r.stderr.strip()[-2000:])
        rc, err = stop(srv, "crescent-echo")
        print(err.strip()[-1500:])
        ok = r.returncode == 0 and rc == 0 and bed.no_leftovers("a", bed.va)
        return 0 if ok else 1


def crescent_client(bed, which, iface, server_ip, conns, nbytes, cc="newreno", mode="inline", timeout=300,
                    extra=()):
    return bed.run(which, CRESCENT_ECHO, "--iface", iface, "--client", server_ip, "--port", "7",
                   "--conns", str(conns), "--bytes", str(nbytes), "--cc", cc, "--mode", mode,
                   "--timeout", str(timeout - 20), "--file-prefix", bed.prefix(f"c{nbytes}{cc}{mode}"),
                   "--stats", *extra, timeout=timeout)


def kernel_server(bed, which, ip):
    return bed.spawn(which, KERNEL_ECHO, "--addr", ip, "--port", "7")


def report(r):
    print(r.stdout.strip())
    if r.returncode != 0:
        print(r.stderr.strip()[-3000:])


def case_crescent_client(testbed):
    with Bed(testbed, "cc") as bed:
        srv = kernel_server(bed, "b", "10.77.0.2")
        if not bed.wait_port("b", "10.77.0.2", 7):
            print("FAIL: kernel-echo did not come up")
            return 1
        ok = True
        for conns, size in [(1, 1), (4, 1000), (8, 65536), (8, 1 << 20), (32, 100000)]:
            r = crescent_client(bed, "a", bed.va, "10.77.0.2", conns, size)
            report(r)
            ok = ok and r.returncode == 0 and '"ok":true' in r.stdout
        stop(srv, "kernel-echo")
        return 0 if ok and bed.no_leftovers("a", bed.va) else 1


def netem(bed, loss):
    spec = ["delay", "2ms", "loss", f"{loss}%", "duplicate", "1%", "reorder", "25%", "50%"]
    for which, dev in (("a", bed.va), ("b", bed.vb)):
        bed.run(which, "tc", "qdisc", "replace", "dev", dev, "root", "netem", *spec, check=True)


def netem_available():
    probe = subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
    if probe.returncode == 0:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], timeout=10)
        return True
    return "unknown" not in probe.stderr.lower()


def case_netem(testbed, cc):
    mib = int(os.environ.get("CRESCENT_INTEROP_MIB", "64"))
    # Probe in a scratch namespace (never touch the host's lo).
    scratch = f"einetem{os.getpid()}"
    sh("ip", "netns", "add", scratch)
    try:
        have_netem = sh("ip", "netns", "exec", scratch, sys.executable, "-c",
                "import sys; sys.path.insert(0, %r); import engine_interop as e; sys.exit(0 if e.netem_available() else 1)"
                % os.path.dirname(os.path.abspath(__file__)), check=False).returncode == 0
    finally:
        sh("ip", "netns", "del", scratch, check=False)
    if not have_netem:
        # Same model inside crescent's device layer, on RX and TX, so both
        # directions of the flow are impaired (crescent-echo --impair).
        print("note: this kernel has no sch_netem (CONFIG_NET_SCH_NETEM is not set): "
              "impairing inside crescent (--impair) instead of tc netem")
    # The two loss rates run at once, each on its own bed: the flows wait on
    # netem's delays and losses, not on the CPU, so together they take as long
    # as the slower one. The clients nap when idle (--idle-sleep-us), so two of
    # them and their kernel-echo peers share the two CPUs without spinning.
    results = {}

    def one(loss):
        lines = []
        with Bed(testbed, f"n{cc[:2]}{loss}") as bed:
            srv = kernel_server(bed, "b", "10.77.0.2")
            if not bed.wait_port("b", "10.77.0.2", 7):
                results[loss] = (False, "FAIL: kernel-echo did not come up")
                return
            extra = ("--idle-sleep-us", "50")
            if have_netem:
                netem(bed, loss)
            else:
                extra += ("--impair", f"loss={loss},dup=1,reorder=25,delay=2ms,seed={loss}")
            t0 = time.time()
            r = crescent_client(bed, "a", bed.va, "10.77.0.2", 1, mib << 20, cc=cc, timeout=900, extra=extra)
            lines.append(f"-- {cc}, {loss}% loss, {mib} MiB each way: {time.time() - t0:.1f}s")
            lines.append(r.stdout.strip())
            if r.returncode != 0:
                lines.append(r.stderr.strip()[-3000:])
            ok = r.returncode == 0 and '"ok":true' in r.stdout
            stop(srv, "kernel-echo")
            ok = ok and bed.no_leftovers("a", bed.va)
        results[loss] = (ok, "\n".join(lines))

    runs = [threading.Thread(target=one, args=(loss,)) for loss in (1, 5)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    ok = True
    for loss in (1, 5):
        good, text = results.get(loss, (False, f"FAIL: the {loss}% run ended without a result"))
        print(text)
        ok = ok and good
    return 0 if ok else 1


def case_c2c(testbed, mode):
    with Bed(testbed, "c" + mode[0]) as bed:
        srv = crescent_server(bed, "a", bed.va, mode=mode)
        if not bed.wait_port("b", "10.77.0.1", 7):
            print("FAIL: crescent-echo server did not come up:", stop(srv, "crescent-echo")[1][-2000:])
            return 1
        ok = True
        for conns, size in [(1, 1), (4, 65536), (4, 4 << 20)]:
            r = crescent_client(bed, "b", bed.vb, "10.77.0.1", conns, size, mode=mode)
            report(r)
            ok = ok and r.returncode == 0 and '"ok":true' in r.stdout
        rc, err = stop(srv, "crescent-echo")
        print(err.strip()[-1500:])
        ok = ok and rc == 0 and bed.no_leftovers("a", bed.va) and bed.no_leftovers("b", bed.vb)
        return 0 if ok else 1


def case_capture(testbed):
    with Bed(testbed, "cap") as bed:
        pcap = f"/tmp/{bed.name}.pcap"
        srv = crescent_server(bed, "a", bed.va)
        if not bed.wait_port("b", "10.77.0.1", 7):
            print("FAIL: crescent-echo did not come up")
            return 1
        dump = bed.spawn("b", "tcpdump", "-i", bed.vb, "-w", pcap, "-U", "-s", "256", "tcp", "port", "7")
        time.sleep(1.5)
        r = bed.run("b", sys.executable, "-c", LINUX_CLIENT, "10.77.0.1", "7", "2", timeout=120)
        print(r.stdout.strip())
        time.sleep(0.5)
        stop(dump, "tcpdump")
        stop(srv, "crescent-echo")
        rd = sh("tcpdump", "-nn", "-v", "-r", pcap, check=False, timeout=60)
        os.unlink(pcap)
        text = rd.stdout
        ok = r.returncode == 0 and rd.returncode == 0
        if "bad cksum" in text or "[bad" in text or "truncated" in text.lower():
            print("FAIL: tcpdump reports bad checksums or truncated packets")
            ok = False
        syns = [l for l in text.splitlines() if "Flags [S]" in l or "Flags [S.]" in l]
        synacks = [l for l in syns if "Flags [S.]" in l and "10.77.0.1.7 >" in l]
        if not synacks:
            print("FAIL: no SYN-ACK from crescent in the capture")
            ok = False
        for l in synacks:
            for opt in ("wscale", "sackOK", "TS val", "mss"):
                if opt not in l:
                    print(f"FAIL: crescent's SYN-ACK lacks {opt}: {l}")
                    ok = False
        # Established segments from crescent carry timestamps (negotiated).
        data = [l for l in text.splitlines() if "10.77.0.1.7 >" in l and "Flags [.]" in l]
        if data and not any("TS val" in l for l in data):
            print("FAIL: crescent's segments carry no timestamps")
            ok = False
        print(f"capture: {len(text.splitlines())} lines, {len(synacks)} SYN-ACKs from crescent")
        return 0 if ok and bed.no_leftovers("a", bed.va) else 1


# ---- the Linux peer's TCP options off, or ECN asked for -----------------------------

# Each set is applied to the Linux namespace's sysctls (per namespace) before its
# connections open; crescent must negotiate down to what the peer offered and
# carry data both ways byte-exact, as server (LINUX_CLIENT) and as client
# (against kernel-echo, 1 % loss both ways inside crescent). `absent` names the
# SYN-ACK options crescent must then leave out (RFC 7323 §2.2 / §3.2, RFC 2018 §2).
PEER_OPTION_SETS = {
    "no_ts": ({"net.ipv4.tcp_timestamps": "0"}, ("TS val",)),
    "no_sack": ({"net.ipv4.tcp_sack": "0"}, ("sackOK",)),
    "no_wscale": ({"net.ipv4.tcp_window_scaling": "0"}, ("wscale",)),
    "none": ({"net.ipv4.tcp_timestamps": "0", "net.ipv4.tcp_sack": "0", "net.ipv4.tcp_window_scaling": "0"},
             ("TS val", "sackOK", "wscale")),
    # Linux answering every SYN with a cookie (RFC 4987; what a server under a SYN flood does):
    # the options it remembers ride in its TSval, and without timestamps it offers none.
    "syncookies": ({"net.ipv4.tcp_syncookies": "2"}, ()),
    "syncookies_no_ts": ({"net.ipv4.tcp_syncookies": "2", "net.ipv4.tcp_timestamps": "0"}, ("TS val",)),
}

CRESCENT_IP, LINUX_IP = "10.77.0.1", "10.77.0.2"


def from_crescent(line):
    """tcpdump -nn line of a segment crescent sent (its server port 7, or its client port)."""
    m = re.search(r"(\d+\.\d+\.\d+\.\d+)\.\d+ > \d+\.\d+\.\d+\.\d+\.\d+: ", line)
    return m is not None and m.group(1) == CRESCENT_IP


def tcpdump_lines(pcap):
    # -v puts the IP header (tos, ECN) on one line and the TCP segment on the next: join them.
    rd = sh("tcpdump", "-nn", "-v", "-r", pcap, check=False, timeout=60)
    lines, cur = [], ""
    for l in rd.stdout.splitlines():
        if not l.startswith((" ", "\t")):
            if cur:
                lines.append(cur)
            cur = l
        else:
            cur += " " + l.strip()
    if cur:
        lines.append(cur)
    return rd.returncode, lines


def conn_fields(text):
    """crescent-echo --stats lines ("conn :PORT: ... key=value ...") as dicts."""
    out = []
    for l in text.splitlines():
        if l.startswith("conn :"):
            out.append(dict(kv.split("=", 1) for kv in l.split() if "=" in kv))
    return out


def peer_options_round(bed, label, sysctls, absent, cc="newreno", setup=(), undo=(), max_payload=None,
                       max_payload_in=None):
    """One option set: sysctls in B and `setup` commands ((namespace, argv) pairs), capture on
    B's veth, Linux client -> crescent server, then crescent client -> kernel-echo; `undo`
    afterwards. With max_payload (max_payload_in), no segment from (to) crescent may carry
    more. Returns (ok, the capture's joined lines, the client's conn stats)."""
    saved = {k: bed.run("b", "sysctl", "-n", k, check=True).stdout.strip() for k in sysctls}
    for k, v in sysctls.items():
        bed.run("b", "sysctl", "-q", "-w", f"{k}={v}", check=True)
    for which, cmd in setup:
        bed.run(which, *cmd, check=True)
    pcap = f"/tmp/{bed.name}-{label}.pcap"
    dump = bed.spawn("b", "tcpdump", "-i", bed.vb, "-w", pcap, "-U", "--immediate-mode", "-s", "128",
                     "tcp", "port", "7")
    time.sleep(1.5)
    ok = True
    srv = crescent_server(bed, "a", bed.va, extra=("--cc", cc))
    if not bed.wait_port("b", CRESCENT_IP, 7):
        print(f"FAIL [{label}]: crescent-echo did not come up:", stop(srv, "crescent-echo")[1][-2000:])
        stop(dump, "tcpdump")
        return False, [], []
    r = bed.run("b", sys.executable, "-c", LINUX_CLIENT, CRESCENT_IP, "7", "4", timeout=180)
    print(f"[{label}] Linux client -> crescent: {r.stdout.strip()} {r.stderr.strip()[-1500:]}")
    ok = ok and r.returncode == 0
    rc, err = stop(srv, "crescent-echo")
    if rc != 0:
        print(f"FAIL [{label}]: crescent-echo server exit {rc}: {err.strip()[-1500:]}")
        ok = False
    kern = kernel_server(bed, "b", LINUX_IP)
    if not bed.wait_port("b", LINUX_IP, 7):
        print(f"FAIL [{label}]: kernel-echo did not come up")
        stop(dump, "tcpdump")
        return False, [], []
    c = crescent_client(bed, "a", bed.va, LINUX_IP, 4, 2 << 20, cc=cc, timeout=240,
                        extra=("--impair", "loss=1,seed=7"))
    print(f"[{label}] crescent client -> kernel-echo, 4 x 2 MiB, 1 % loss:")
    report(c)
    ok = ok and c.returncode == 0 and '"ok":true' in c.stdout
    stats = conn_fields(c.stderr)
    if len(stats) != 4:
        print(f"FAIL [{label}]: expected 4 connections' stats from the client, got {len(stats)}")
        ok = False
    stop(kern, "kernel-echo")
    time.sleep(0.5)
    stop(dump, "tcpdump")
    rc, lines = tcpdump_lines(pcap)
    os.unlink(pcap)
    if rc != 0 or any("bad cksum" in l or "[bad" in l for l in lines):
        print(f"FAIL [{label}]: the capture does not read cleanly (bad checksums?)")
        ok = False
    synacks = [l for l in lines if "Flags [S." in l and from_crescent(l)]
    if len(synacks) < 4:
        print(f"FAIL [{label}]: {len(synacks)} SYN-ACKs from crescent in the capture, expected 4")
        ok = False
    for l in synacks:
        for opt in absent:
            if opt in l:
                print(f"FAIL [{label}]: the peer did not offer it, yet crescent's SYN-ACK carries {opt!r}: {l}")
                ok = False
    if "TS val" in absent:
        late = [l for l in lines if from_crescent(l) and "TS val" in l and "Flags [S" not in l]
        if late:
            print(f"FAIL [{label}]: {len(late)} segments from crescent carry timestamps not negotiated: {late[0]}")
            ok = False
    if "sackOK" in absent:
        blocks = [l for l in lines if from_crescent(l) and re.search(r"\bsack \d", l)]
        if blocks:
            print(f"FAIL [{label}]: crescent sent SACK blocks to a peer without SACK: {blocks[0]}")
            ok = False
    if "wscale" in absent:
        # Without window scaling the 16-bit field is the window itself: crescent's
        # receive buffer (far above 64 KiB) must show as windows near 65535, not as
        # a scaled-down count.
        wins = [int(m.group(1)) for l in lines if from_crescent(l) and "Flags [S" not in l
                for m in [re.search(r"\bwin (\d+)", l)] if m]
        if not wins or max(wins) < 32768:
            print(f"FAIL [{label}]: crescent's largest unscaled window is {max(wins) if wins else None}")
            ok = False
    for limit, outbound in ((max_payload, True), (max_payload_in, False)):
        if limit is None:
            continue
        sizes = [int(m[-1]) for l in lines if from_crescent(l) == outbound
                 for m in [re.findall(r", length (\d+)", l)] if m]
        who = "crescent's" if outbound else "Linux's"
        if not sizes or max(sizes) > limit:
            print(f"FAIL [{label}]: {who} largest segment payload is {max(sizes) if sizes else None}, above {limit}")
            ok = False
        else:
            print(f"[{label}] {who} largest segment payload: {max(sizes)} (at most {limit})")
    print(f"[{label}] capture: {len(lines)} segments, {len(synacks)} SYN-ACKs from crescent")
    for k, v in saved.items():  # as they were, for the next set
        bed.run("b", "sysctl", "-q", "-w", f"{k}={v}", check=False)
    for which, cmd in undo:
        bed.run(which, *cmd, check=False)
    return ok, lines, stats


def case_peer_options(testbed):
    ok = True
    with Bed(testbed, "po") as bed:
        for label, (sysctls, absent) in PEER_OPTION_SETS.items():
            cookies_before = nstat(bed, "b", "TcpExtSyncookiesRecv")
            good, _, stats = peer_options_round(bed, label, sysctls, absent)
            if sysctls.get("net.ipv4.tcp_syncookies") == "2":
                cookies = nstat(bed, "b", "TcpExtSyncookiesRecv") - cookies_before
                print(f"[{label}] Linux took {cookies} SYN cookies back")
                if cookies < 4:
                    print(f"FAIL [{label}]: Linux took back {cookies} cookies, not the client's 4: it did not use them")
                    good = False
            # What the client's connections end up with: what Linux's SYN-ACK offered. A
            # cookie SYN-ACK without timestamps offers no SACK and no window scale either.
            client_absent = set(absent)
            if sysctls.get("net.ipv4.tcp_syncookies") == "2" and "TS val" in absent:
                client_absent |= {"sackOK", "wscale"}
            for st in stats:
                neg = st.get("negotiated(ts/sack/ecn)", "")
                want_ts = "0" if "TS val" in client_absent else "1"
                want_sack = "0" if "sackOK" in client_absent else "1"
                if neg[:3] != f"{want_ts}/{want_sack}":
                    print(f"FAIL [{label}]: the client negotiated ts/sack {neg[:3]}, expected {want_ts}/{want_sack}")
                    good = False
                if "wscale" in client_absent and st.get("wscale(snd/rcv)") != "0/0":
                    print(f"FAIL [{label}]: the client scales windows ({st.get('wscale(snd/rcv)')}) without the option")
                    good = False
            ok = ok and good
        # The peer's MSS: a smaller MTU on its side only (a frame above it is dropped by the
        # veth, so an oversized segment would stall the transfer), and a route's advmss.
        good, _, _ = peer_options_round(
            bed, "mtu1280", {}, (), setup=[("b", ("ip", "link", "set", bed.vb, "mtu", "1280"))],
            undo=[("b", ("ip", "link", "set", bed.vb, "mtu", "1500"))], max_payload=1280 - 40 - 12)
        ok = ok and good
        good, _, _ = peer_options_round(
            bed, "advmss536", {}, (),
            setup=[("b", ("ip", "route", "replace", f"{CRESCENT_IP}/32", "dev", bed.vb, "advmss", "536"))],
            undo=[("b", ("ip", "route", "del", f"{CRESCENT_IP}/32"))], max_payload=536 - 12)
        ok = ok and good
        # crescent's own route to the peer sets an MTU of 1280 (a path narrower than either
        # interface, as "ip route ... mtu" says for an overlay or a VPC's edge): crescent takes
        # its MSS from it, as server and as client, both ways.
        good, _, _ = peer_options_round(
            bed, "route_mtu1280", {}, (),
            setup=[("a", ("ip", "route", "replace", f"{LINUX_IP}/32", "dev", bed.va, "mtu", "1280"))],
            undo=[("a", ("ip", "route", "del", f"{LINUX_IP}/32"))], max_payload=1280 - 40 - 12,
            max_payload_in=1280 - 40 - 12)
        ok = ok and good
        # A black hole: the Linux side drops every packet from crescent above 1200 bytes
        # (nftables, input hook) and sends no ICMP (which would reach the kernel, not
        # crescent, anyway). crescent must find it from its timeouts and halve its MSS,
        # as server and as client.
        hole = [("b", ("nft", "add", "table", "inet", "crescent_hole")),
                ("b", ("nft", "add", "chain", "inet", "crescent_hole", "in",
                       "{ type filter hook input priority 0; policy accept; }")),
                ("b", ("nft", "add", "rule", "inet", "crescent_hole", "in", "ip", "saddr", CRESCENT_IP,
                       "ip", "length", ">", "1200", "counter", "drop"))]
        good, _, stats = peer_options_round(bed, "blackhole1200", {}, (), setup=hole)
        counters = bed.run("b", "nft", "list", "table", "inet", "crescent_hole", timeout=10).stdout
        bed.run("b", "nft", "delete", "table", "inet", "crescent_hole", timeout=10)
        dropped = sum(int(n) for n in re.findall(r"counter packets (\d+)", counters))
        halved = [int(st.get("mss_blackhole", "0")) for st in stats]
        mss = [int(st.get("mss", "0")) for st in stats]
        print(f"[blackhole1200] {dropped} packets from crescent dropped; the client's connections halved their "
              f"MSS {halved} times, down to {mss}")
        if dropped == 0 or not stats or min(halved) < 1 or max(mss) > 1200 - 40 - 12:
            print("FAIL [blackhole1200]: crescent did not find the black hole and lower its MSS")
            good = False
        ok = ok and good
        ok = ok and bed.no_leftovers("a", bed.va)
    return 0 if ok else 1


# A Linux client's keepalive probes (SEQ = RCV.NXT - 1, refused and answered with an ACK,
# RFC 9293 §3.8.4) and its SYN carrying data (TCP Fast Open without a cookie,
# tcp_fastopen=0x5: crescent takes the SYN, not its data, which Linux sends again).
LINUX_QUIRKS_CLIENT = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
def expect(s, msg):
    got = b""
    while len(got) < len(msg):
        c = s.recv(4096)
        if not c:
            raise RuntimeError(f"EOF after {got!r}")
        got += c
    if got != msg:
        raise RuntimeError(f"sent {msg!r}, got {got!r}")
def echo(s, msg):
    s.sendall(msg)
    expect(s, msg)
s = socket.create_connection((host, port), timeout=10)
s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
# 1 s idle, 1 s between probes, 1 unanswered probe: an unanswering peer is reset after ~2 s.
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 1)
echo(s, b"before the idle time")
time.sleep(4.5)
echo(s, b"after four probes")
s.close()
t = socket.socket()
t.settimeout(10)
t.sendto(b"in the SYN", socket.MSG_FASTOPEN, (host, port))
expect(t, b"in the SYN")
t.close()
# IPv4 options on every segment (Record Route, 12 bytes: IHL 8): steered and parsed past them.
u = socket.socket()
u.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes([7, 11, 4] + [0] * 8 + [1]))
u.settimeout(10)
u.connect((host, port))
echo(u, bytes(range(256)) * 12)
u.close()
print("ok: keepalive probes answered, SYN data echoed, IP options carried")
"""


def case_linux_quirks(testbed):
    with Bed(testbed, "lq") as bed:
        bed.run("b", "sysctl", "-q", "-w", "net.ipv4.tcp_fastopen=5", check=True)
        srv = crescent_server(bed, "a", bed.va)
        if not bed.wait_port("b", CRESCENT_IP, 7):
            print("FAIL: crescent-echo did not come up:", stop(srv, "crescent-echo")[1][-2000:])
            return 1
        pcap = f"/tmp/{bed.name}.pcap"
        dump = bed.spawn("b", "tcpdump", "-i", bed.vb, "-w", pcap, "-U", "--immediate-mode", "-s", "128",
                         "tcp", "port", "7")
        time.sleep(1.5)
        r = bed.run("b", sys.executable, "-c", LINUX_QUIRKS_CLIENT, CRESCENT_IP, "7", timeout=60)
        print(r.stdout.strip(), r.stderr.strip()[-1500:])
        time.sleep(0.5)
        stop(dump, "tcpdump")
        rc, err = stop(srv, "crescent-echo")
        _, lines = tcpdump_lines(pcap)
        os.unlink(pcap)
        ok = r.returncode == 0 and rc == 0
        # Probes: zero-length ACKs from Linux one byte below what crescent acknowledged;
        # count crescent's ACKs in the idle second-spaced gaps (at least 3 in 4.5 s).
        idle_acks = [l for l in lines if from_crescent(l) and "Flags [.]" in l and ", length 0" in l]
        syn_data = [l for l in lines
                    if "Flags [S]" in l and not from_crescent(l) and not l.rstrip().endswith("length 0")]
        print(f"linux_quirks: {len(idle_acks)} pure ACKs from crescent, {len(syn_data)} SYN(s) with data from Linux")
        if len(idle_acks) < 3:
            print("FAIL: crescent answered fewer than 3 keepalive probes")
            ok = False
        if not syn_data:
            print("FAIL: Linux sent no SYN with data (tcp_fastopen=5 did not take): the test did not test")
            ok = False
        return 0 if ok and bed.no_leftovers("a", bed.va) else 1


def nstat(bed, which, name):
    r = bed.run(which, "nstat", "-az", name, timeout=10)
    m = re.search(rf"^{name}\s+(\d+)", r.stdout, re.M)
    return int(m.group(1)) if m else 0


ECN_MARK = """table inet crescent_ecn {
  chain out {
    type filter hook output priority 0; policy accept;
    ip daddr %(c)s ip ecn { ect0, ect1 } numgen random mod 100 < 3 ip ecn set ce counter
  }
  chain in {
    type filter hook input priority 0; policy accept;
    ip saddr %(c)s ip ecn { ect0, ect1 } numgen random mod 100 < 3 ip ecn set ce counter
  }
}
"""


def case_ecn(testbed):
    """ECN with Linux (RFC 3168): the Linux namespace asks for ECN on its own connections
    (tcp_ecn=1) and crescent runs DCTCP (which wants ECN). nftables in B marks 3 % of the
    ECN-capable TCP packets Congestion Experienced both ways. crescent must answer the
    ECN-setup SYN with ECE (and send an ECN-setup SYN as client), send ECT(0) data, echo CE
    to Linux (Linux counts TcpExtTCPDeliveredCE) and see Linux's ECE; byte-exact throughout."""
    ok = True
    with Bed(testbed, "ecn") as bed:
        nft = subprocess.run(["ip", "netns", "exec", bed.b, "nft", "-f", "-"], input=ECN_MARK % {"c": CRESCENT_IP},
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        if nft.returncode != 0:
            print("FAIL: nftables would not take the CE-marking rules:", nft.stderr.strip())
            return 1
        bed.run("b", "nstat", "-n", timeout=10)  # nstat's history: count from here
        before = nstat(bed, "b", "TcpExtTCPDeliveredCE")
        good, lines, stats = peer_options_round(bed, "ecn", {"net.ipv4.tcp_ecn": "1"}, (), cc="dctcp")
        ok = ok and good
        synacks = [l for l in lines if "Flags [S." in l and from_crescent(l)]
        if not synacks or not all("Flags [S.E]" in l for l in synacks):
            print(f"FAIL: crescent's SYN-ACKs to an ECN-setup SYN lack ECE: {synacks[:1]}")
            ok = False
        syns = [l for l in lines if "Flags [S" in l and "Flags [S." not in l and from_crescent(l)]
        if not syns or not all("Flags [SEW]" in l for l in syns):
            print(f"FAIL: crescent's SYNs (DCTCP) are not ECN-setup SYNs: {syns[:1]}")
            ok = False
        data = [l for l in lines if from_crescent(l) and "Flags [S" not in l and re.search(r"length [1-9]", l)]
        ect = [l for l in data if "ECT(0)" in l or "tos 0x2," in l]
        if not data or len(ect) < len(data) // 2:
            print(f"FAIL: {len(ect)} of crescent's {len(data)} data segments are ECN-capable (ECT(0)): {data[:1]}")
            ok = False
        counters = bed.run("b", "nft", "list", "table", "inet", "crescent_ecn", timeout=10).stdout
        marked = sum(int(n) for n in re.findall(r"counter packets (\d+)", counters))
        delivered_ce = nstat(bed, "b", "TcpExtTCPDeliveredCE") - before
        ce_in = sum(int(st.get("ecn(ce_in/ece_in)", "0/0").split("/")[0]) for st in stats)
        ece_in = sum(int(st.get("ecn(ce_in/ece_in)", "0/0").split("/")[1]) for st in stats)
        neg = [st.get("negotiated(ts/sack/ecn)", "") for st in stats]
        print(f"ecn: {marked} packets marked CE by nftables; Linux delivered {delivered_ce} segments whose CE crescent "
              f"echoed; the crescent client saw {ce_in} CE marks and {ece_in} ECE ACKs; negotiated {neg}")
        if marked == 0:
            print("FAIL: nftables marked nothing: the test did not test")
            ok = False
        if not neg or not all(n.endswith("/1") for n in neg):
            print("FAIL: the crescent client did not negotiate ECN with Linux")
            ok = False
        if ce_in == 0 or ece_in == 0:
            print("FAIL: the crescent client saw no CE marks or no ECE from Linux")
            ok = False
        if delivered_ce == 0:
            print("FAIL: Linux never heard crescent echo a CE mark (TcpExtTCPDeliveredCE did not move)")
            ok = False
        ok = ok and bed.no_leftovers("a", bed.va)
    return 0 if ok else 1


# crescent's own progress log lines ("[12:00:00.000] [runtime] [info] ...").
INFO_LOG = re.compile(r"^\[[\d:.]+\] \[\w+\] \[(info|debug|trace)\] ")


def one_line_error(r, must, strict=False):
    """Non-zero exit and a last "crescent..." stderr line matching `must`;
    strict: besides info logging, that line is all stderr says (no EAL dump)."""
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    err_lines = [l for l in lines if l.startswith("crescent")]
    ok = r.returncode != 0 and len(err_lines) >= 1 and re.search(must, err_lines[-1], re.I)
    print(f"rc={r.returncode} last: {err_lines[-1] if err_lines else '(none)'}")
    if strict:
        other = [l for l in lines if not INFO_LOG.match(l)]
        if len(other) != 1:
            print(f"FAIL: expected one error line, stderr has {len(other)}: {other[:10]}")
            ok = False
    return bool(ok)


# A private mount namespace (inside `ip netns exec`'s own) where the kernel
# reports no hugepages reserved: an empty hugepages-2048kB over
# /sys/kernel/mm/hugepages. Then `exec "$0" "$@"`.
NO_HUGEPAGES_SH = ("mount -t tmpfs crescent-nohuge /sys/kernel/mm/hugepages && "
                   "d=/sys/kernel/mm/hugepages/hugepages-2048kB && mkdir $d && "
                   "for f in nr_hugepages free_hugepages resv_hugepages surplus_hugepages "
                   "nr_overcommit_hugepages; do echo 0 > $d/$f; done && exec \"$0\" \"$@\"")
# ... where no hugetlbfs is mounted.
NO_HUGETLBFS_SH = ("umount -a -t hugetlbfs 2>/dev/null; ! grep -q ' hugetlbfs ' /proc/mounts && "
                   "exec \"$0\" \"$@\"")
# An unprivileged user (nobody) without capabilities.
AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all")


def in_mount_ns(script, *cmd):
    return ("unshare", "-m", "--propagation", "private", "sh", "-c", script) + cmd


def badinput_resources(bed):
    """No hugepages and no permission: each refused with its cause and fix,
    and nothing attached, reserved or registered for the interface."""
    ok = True
    # --iface with no hugepages reserved in the kernel.
    r = bed.run("a", *in_mount_ns(NO_HUGEPAGES_SH, CRESCENT_ECHO, "--iface", bed.va, "--file-prefix",
                                  bed.prefix("h")), timeout=60)
    ok &= one_line_error(r, r"no free hugepages.*tools/testbed hugepages", strict=True)
    # --eal (hugepage files, not --in-memory) with no hugetlbfs mounted. (--iface
    # runs --in-memory, which needs no hugetlbfs: anonymous hugepages.)
    r = bed.run("a", *in_mount_ns(NO_HUGETLBFS_SH, CRESCENT_ECHO, "--eal", "--no-pci --vdev=net_bogus0", "--ip",
                                  "10.1.1.1/24", "--file-prefix", bed.prefix("m")), timeout=60)
    ok &= one_line_error(r, r"hugetlbfs is not mounted.*(tools/testbed hugepages|mount -t hugetlbfs)", strict=True)
    ok &= bed.no_leftovers("a", bed.va)
    # Not root. nobody must be able to run the build's binary (and reach its
    # libcrescent); if the tree is not readable for it, say so and skip.
    probe = bed.run("a", *AS_NOBODY, CRESCENT_ECHO, "--help", timeout=30)
    if probe.returncode != 0:
        print(f"NOTE: no-permission check skipped: nobody cannot run {CRESCENT_ECHO} "
              f"(rc={probe.returncode} {probe.stderr.strip()[-300:]})")
        return ok

    def reserved():  # per network namespace
        return bed.run("a", "cat", "/proc/sys/net/ipv4/ip_local_reserved_ports", timeout=10).stdout
    before = reserved()
    r = bed.run("a", *AS_NOBODY, CRESCENT_ECHO, "--iface", bed.va, "--file-prefix", bed.prefix("p"), timeout=60)
    ok &= one_line_error(r, r"needs root.*run as root", strict=True)
    if reserved() != before:
        print("FAIL: the refused start changed ip_local_reserved_ports")
        ok = False
    ok &= bed.no_leftovers("a", bed.va)
    return ok


def case_badinput(testbed):
    with Bed(testbed, "bad") as bed:
        ok = True
        r = bed.run("a", CRESCENT_ECHO, "--iface", "nosuchif0", "--file-prefix", bed.prefix("x"), timeout=60)
        ok &= one_line_error(r, "no network interface 'nosuchif0'")
        r = bed.run("a", CRESCENT_ECHO, "--eal", "--no-pci --vdev=net_bogus0", "--ip", "10.1.1.1/24",
                    "--file-prefix", bed.prefix("y"), "--no-huge", timeout=60)
        ok &= one_line_error(r, "EAL|device|port")
        r = bed.run("a", CRESCENT_ECHO, "--iface", bed.va, "--mode", "sideways", timeout=60)
        ok &= one_line_error(r, "--mode")
        r = bed.run("a", CRESCENT_ECHO, "--iface", bed.va, "--port", "70000", timeout=60)
        ok &= one_line_error(r, "--port")
        ok &= badinput_resources(bed)
        # The interface is taken by a first instance: the second must refuse.
        srv = crescent_server(bed, "a", bed.va)
        if not bed.wait_port("b", "10.77.0.1", 7):
            print("FAIL: first crescent-echo did not come up")
            ok = False
        r = bed.run("a", CRESCENT_ECHO, "--iface", bed.va, "--port", "7", "--file-prefix", bed.prefix("z"),
                    timeout=60)
        ok &= one_line_error(r, "already|in use|overlaps")
        # ... and the first keeps serving.
        ok &= bed.wait_port("b", "10.77.0.1", 7, timeout=5)
        rc, _ = stop(srv, "crescent-echo")
        ok &= rc == 0
        ok &= bed.no_leftovers("a", bed.va)
        return 0 if ok else 1


# ---- routing and neighbours learned from the kernel (issue 4) --------------------------

class GatewayBed(Bed):
    """Three namespaces A - G - B: veth 10.78.1.0/24 (A-G) and 10.78.2.0/24 (G-B), G
    forwards; A's default route and B's route to 10.78.1.0/24 go via G. No static ARP."""

    A_IP, GA_IP, GB_IP, B_IP = "10.78.1.2", "10.78.1.1", "10.78.2.1", "10.78.2.2"

    def __init__(self, testbed, tag):
        super().__init__(testbed, tag)
        self.g = self.name + "-g"
        self.va, self.vga = self.name + "-ag", self.name + "-ga"   # A <-> G
        self.vgb, self.vb = self.name + "-gb", self.name + "-bg"   # G <-> B

    def ns(self, which):
        return {"a": self.a, "b": self.b, "g": self.g}[which]

    def __enter__(self):
        sh(self.testbed, "hugepages", "512")
        sh(self.testbed, "bpffs", check=False)
        try:
            for n in (self.a, self.g, self.b):
                sh("ip", "netns", "add", n)
                sh("ip", "-n", n, "link", "set", "lo", "up")
            sh("ip", "link", "add", self.va, "netns", self.a, "type", "veth", "peer", "name", self.vga,
               "netns", self.g)
            sh("ip", "link", "add", self.vgb, "netns", self.g, "type", "veth", "peer", "name", self.vb,
               "netns", self.b)
            for n, dev, addr in ((self.a, self.va, self.A_IP), (self.g, self.vga, self.GA_IP),
                                 (self.g, self.vgb, self.GB_IP), (self.b, self.vb, self.B_IP)):
                sh("ip", "-n", n, "addr", "add", addr + "/24", "dev", dev)
                sh("ip", "-n", n, "link", "set", dev, "up")
                # Kernel-side peers must send full checksums and MTU-sized frames (TESTBED.md).
                sh("ip", "netns", "exec", n, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
                   "gro", "off", check=False)
            sh("ip", "netns", "exec", self.g, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
            sh("ip", "-n", self.a, "route", "add", "default", "via", self.GA_IP)
            sh("ip", "-n", self.b, "route", "add", "10.78.1.0/24", "via", self.GB_IP)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        super().__exit__(*exc)
        sh("ip", "netns", "del", self.g, check=False)


def neigh(bed, which, ip):
    """The kernel's neighbour entry for ip in a namespace ('' if none)."""
    return bed.run(which, "ip", "neigh", "show", ip, timeout=10).stdout.strip()


def case_gateway(testbed):
    with GatewayBed(testbed, "gw") as bed:
        # Nothing in A has talked to G yet: whatever MAC crescent uses must come from
        # the kernel resolving the gateway on crescent's behalf.
        before = neigh(bed, "a", bed.GA_IP)
        if before:
            print(f"FAIL: A already has a neighbour entry for the gateway: {before}")
            return 1
        srv = kernel_server(bed, "b", bed.B_IP)
        if not bed.wait_port("b", bed.B_IP, 7):
            print("FAIL: kernel-echo did not come up")
            return 1
        # G reaches B (the second hop works) without touching A's tables.
        if bed.run("g", "ping", "-c", "1", "-W", "2", bed.B_IP, timeout=10).returncode != 0:
            print("FAIL: the gateway namespace cannot reach B")
            return 1
        ok = True
        for conns, size in [(1, 1), (4, 100000), (4, 1 << 20)]:
            r = crescent_client(bed, "a", bed.va, bed.B_IP, conns, size, timeout=180)
            report(r)
            ok = ok and r.returncode == 0 and '"ok":true' in r.stdout
        after = neigh(bed, "a", bed.GA_IP)
        print(f"A's neighbour entry for the gateway: {after or '(none)'}")
        if not after or "lladdr" not in after or "PERMANENT" in after:
            print("FAIL: the gateway's MAC was not learned dynamically by the kernel in A")
            ok = False
        # Nothing in A may have resolved B directly (it is off-link).
        direct = neigh(bed, "a", bed.B_IP)
        if direct:
            print(f"FAIL: A has a neighbour entry for the off-link server: {direct}")
            ok = False
        stop(srv, "kernel-echo")
        return 0 if ok and bed.no_leftovers("a", bed.va) else 1


def echo_load(bed, which, host, mode, timeout=60):
    """knb's echo client on kernel TCP against the echo server at host:7, every byte
    verified: rr = 4 KiB messages one at a time per connection, stream = 64 KiB
    messages, 4 in flight per connection (256 KiB windows)."""
    size, depth = ("4096", "1") if mode == "rr" else ("65536", "4")
    r = bed.run(which, KNB, "client", "--stack", "kernel", "--proto", "echo", "--server", host, "--port", "7",
                "--conns", "4", "--msg-size", size, "--iodepth", depth, "--duration", "2", "--warmup", "0.2",
                "--verify", "full", "--progress", "off", "--cpus", str((os.cpu_count() or 1) - 1), timeout=timeout)
    print(f"knb echo {mode}: rc={r.returncode} {r.stdout.strip()[-400:]} {r.stderr.strip()[-1500:]}")
    return r.returncode == 0


def link_mac(bed, which, dev):
    out = bed.run(which, "ip", "-o", "link", "show", dev, timeout=10).stdout
    m = re.search(r"link/ether ([0-9a-f:]{17})", out)
    return m.group(1) if m else ""


def case_mac_change(testbed):
    with Bed(testbed, "mac") as bed:
        srv = crescent_server(bed, "a", bed.va)
        if not bed.wait_port("b", "10.77.0.1", 7):
            print("FAIL: crescent-echo did not come up:", stop(srv, "crescent-echo")[1][-2000:])
            return 1
        ok = echo_load(bed, "b", "10.77.0.1", "rr") and echo_load(bed, "b", "10.77.0.1", "stream")
        old_mac = link_mac(bed, "b", bed.vb)
        entry = neigh(bed, "a", "10.77.0.2")
        print(f"before: B's MAC {old_mac}; A's entry: {entry}")
        if old_mac not in entry or "PERMANENT" in entry:
            print("FAIL: A's kernel did not learn B's MAC dynamically")
            ok = False
        # Locally administered, and distinct from the old one.
        new_mac = "02:4e:77:%02x:%02x:%02x" % ((os.getpid() >> 16) & 0xff, (os.getpid() >> 8) & 0xff,
                                               os.getpid() & 0xff)
        if new_mac == old_mac:
            new_mac = new_mac[:-2] + ("01" if new_mac[-2:] != "01" else "02")
        if bed.run("b", "ip", "link", "set", "dev", bed.vb, "address", new_mac, timeout=10).returncode != 0:
            # veth without live address change: the classic down / set / up.
            bed.run("b", "ip", "link", "set", "dev", bed.vb, "down", timeout=10, check=True)
            bed.run("b", "ip", "link", "set", "dev", bed.vb, "address", new_mac, timeout=10, check=True)
            bed.run("b", "ip", "link", "set", "dev", bed.vb, "up", timeout=10, check=True)
        if link_mac(bed, "b", bed.vb) != new_mac:
            print(f"FAIL: could not set B's MAC to {new_mac}")
            ok = False
        # B forgets A and pings it: its ARP request carries the new MAC, from which
        # A's kernel updates its neighbour entry (and tells crescent over netlink).
        bed.run("b", "ip", "neigh", "flush", "all", timeout=10)
        learned = False
        end = time.time() + 15
        while time.time() < end:
            bed.run("b", "ping", "-c", "1", "-W", "1", "10.77.0.1", timeout=5)
            entry = neigh(bed, "a", "10.77.0.2")
            if new_mac in entry:
                learned = True
                break
            time.sleep(0.3)
        print(f"after: B's MAC {new_mac}; A's entry: {entry}")
        if not learned:
            print("FAIL: A's kernel did not learn B's new MAC")
            ok = False
        # crescent must now address B by the new MAC: with the old one, B's kernel
        # drops every reply (PACKET_OTHERHOST) and these runs fail.
        ok = echo_load(bed, "b", "10.77.0.1", "rr") and echo_load(bed, "b", "10.77.0.1", "stream") and ok
        rc, err = stop(srv, "crescent-echo")
        print(err.strip()[-1500:])
        ok = ok and rc == 0 and bed.no_leftovers("a", bed.va)
        return 0 if ok else 1


# ---- zero-copy TX on a MULTI_SEGS device: net_tap against the kernel ---------------

TAP_KERNEL_MAC, TAP_CRESCENT_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


def tap_eal(bed, tag):
    """crescent-echo arguments for a net_tap port in namespace a: the PMD
    creates the tap netdev there; crescent has 10.79.0.2 and the kernel, on
    the netdev, 10.79.0.1 (static configuration: no netdev of crescent's own)."""
    iface = bed.name[:12] + "-t"
    return iface, ["--eal", f"--no-pci --vdev=net_tap0,iface={iface},mac={TAP_CRESCENT_MAC}",
                   "--ip", "10.79.0.2/24", "--mac", TAP_CRESCENT_MAC,
                   "--neighbour", f"10.79.0.1={TAP_KERNEL_MAC}", "--file-prefix", bed.prefix(tag)]


def wait_started(proc, timeout=30):
    """Reads crescent-echo's stderr up to its start-up banner (printed once the
    port is started: the PMD sets the tap netdev's MAC until then). Reads the
    raw fd: a buffered readline() could pull the banner into Python's buffer
    where select() no longer sees it."""
    import select
    fd = proc.stderr.fileno()
    seen, end = b"", time.time() + timeout
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk
        if b"(net_tap) 10.79.0.2" in seen:
            return True, seen.decode(errors="replace")
    return False, seen.decode(errors="replace")


def tap_kernel_side(bed, proc, iface):
    """Once crescent started the port: the kernel's address, MAC and a
    neighbour entry for crescent (crescent does not answer ARP)."""
    started, early = wait_started(proc)
    if not started:
        print("FAIL: crescent-echo on net_tap did not start:", early[-2000:])
        return False
    for cmd in (["ip", "link", "set", iface, "address", TAP_KERNEL_MAC],
                ["ip", "addr", "replace", "10.79.0.1/24", "dev", iface],
                ["ip", "link", "set", iface, "up"],
                ["ip", "neigh", "replace", "10.79.0.2", "lladdr", TAP_CRESCENT_MAC, "dev", iface,
                 "nud", "permanent"]):
        if bed.run("a", *cmd, timeout=10).returncode != 0:
            print("FAIL:", " ".join(cmd))
            return False
    return True


def stat(text, name):
    m = re.search(rf"\b{name}=(\d+)", text)
    return int(m.group(1)) if m else 0


def zero_copy_ok(text, who):
    zc, cp = stat(text, "tx_zero_copy_segments"), stat(text, "tx_copied_segments")
    print(f"{who}: tx_zero_copy_segments={zc} tx_copied_segments={cp}")
    if zc == 0 or cp != 0:
        print(f"FAIL: {who} did not send its data zero-copy (chained extbuf mbufs)")
        return False
    return True


def case_tap(testbed):
    """Zero-copy TX against Linux TCP: net_tap takes chained mbufs, so every
    data segment leaves as a header mbuf chained to extbuf mbufs over the
    send queue's zbufs (AF_XDP, which cannot, copies). Server in both
    dispatch modes, then a crescent client through a lossy link so chained
    frames are retransmitted while earlier ones may still sit in the device."""
    with Bed(testbed, "tap") as bed:
        ok = True
        for mode in ("inline", "batch"):
            iface, eal = tap_eal(bed, "s" + mode[0])
            srv = bed.spawn("a", CRESCENT_ECHO, *eal, "--port", "7", "--mode", mode, "--stats")
            if not tap_kernel_side(bed, srv, iface) or not bed.wait_port("a", "10.79.0.2", 7):
                print("FAIL: crescent-echo on net_tap did not come up:", stop(srv, "crescent-echo")[1][-2000:])
                return 1
            r = bed.run("a", sys.executable, "-c", LINUX_CLIENT, "10.79.0.2", "7", "16", timeout=180)
            print(f"-- Linux client <-> crescent server ({mode}) over net_tap:", r.stdout.strip(),
                  r.stderr.strip()[-2000:])
            rc, err = stop(srv, "crescent-echo")
            print(err.strip()[-1200:])
            ok = ok and r.returncode == 0 and rc == 0 and zero_copy_ok(err, f"server ({mode})")

        mib = max(1, int(os.environ.get("CRESCENT_INTEROP_MIB", "64")) // 4)
        srv = kernel_server(bed, "a", "0.0.0.0")  # bound before the tap (and its address) exists
        iface, eal = tap_eal(bed, "c")
        # The client creates the tap; configure the kernel side while it connects
        # (its SYN is retried until the neighbour entry exists).
        cli = bed.spawn("a", CRESCENT_ECHO, *eal, "--client", "10.79.0.1", "--port", "7", "--conns", "4",
                        "--bytes", str(mib << 20), "--cc", "cubic", "--timeout", "200", "--stats",
                        "--impair", "loss=1,dup=1,reorder=25,delay=1ms,seed=7")
        ok = tap_kernel_side(bed, cli, iface) and ok
        try:
            out, err = cli.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            cli.kill()
            out, err = cli.communicate()
        print(f"-- crescent client <-> Linux server over net_tap, 1% loss, 4 x {mib} MiB each way:", out.strip())
        # Each connection's loss recovery (retransmissions, undone responses, reordering).
        print("\n".join(l for l in err.splitlines() if l.startswith("conn :")))
        if cli.returncode != 0:
            print(err.strip()[-3000:])
        ok = ok and cli.returncode == 0 and '"ok":true' in out and zero_copy_ok(err, "client")
        stop(srv, "kernel-echo")
        # Every frame crescent sent carried a good checksum (a bad one would
        # only show as retransmissions otherwise).
        csum = re.search(r"TcpInCsumErrors\s+(\d+)", bed.run("a", "nstat", "-az", "TcpInCsumErrors").stdout)
        print(f"kernel TcpInCsumErrors: {csum.group(1) if csum else '?'}")
        if not csum or int(csum.group(1)) != 0:
            print("FAIL: the kernel dropped frames from crescent for bad TCP checksums")
            ok = False
        if bed.run("a", "ip", "link", "show", iface, timeout=5).returncode == 0:
            print(f"FAIL: the tap netdev {iface} outlived crescent")
            ok = False
        return 0 if ok and bed.no_leftovers("a", bed.va) else 1


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return SKIP
    global CRESCENT_ECHO, KERNEL_ECHO
    case, CRESCENT_ECHO, KERNEL_ECHO, testbed = sys.argv[1:]
    if case == "linux_client":
        return case_linux_client(testbed)
    if case == "crescent_client":
        return case_crescent_client(testbed)
    if case.startswith("netem_"):
        return case_netem(testbed, case[len("netem_"):])
    if case.startswith("c2c_"):
        return case_c2c(testbed, case[len("c2c_"):])
    if case == "capture":
        return case_capture(testbed)
    if case == "peer_options":
        return case_peer_options(testbed)
    if case == "ecn":
        return case_ecn(testbed)
    if case == "linux_quirks":
        return case_linux_quirks(testbed)
    if case == "tap":
        return case_tap(testbed)
    if case == "badinput":
        return case_badinput(testbed)
    if case == "gateway":
        return case_gateway(testbed)
    if case == "mac_change":
        global KNB
        KNB = os.environ.get("CRESCENT_KNB", "")
        if not KNB:
            print("mac_change needs CRESCENT_KNB (path of the knb binary)")
            return 2
        return case_mac_change(testbed)
    print(f"unknown case {case}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
