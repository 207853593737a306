#!/usr/bin/env python3
"""crescent stack/dev netns tests: XDP steering, TX, clean exit, bad input.

Usage: dev_netns.py HELPER SCENARIO     (SCENARIO: steer | tx | cleanup | badinput)

Each scenario builds its own pair of namespaces joined by a veth pair (unique
names from the pid), runs the DPDK helper (dev_netns_helper) in namespace A on
AF_XDP and kernel peers in namespace B, and tears everything down on the way
out, whatever happens (the Bed context manager). Every wait is bounded.
Exit: 0 pass, 1 fail, 77 skip (not root / no AF_XDP).
"""
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
HELPER = None
TIMEOUT = 20  # seconds, bound of any single wait


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print(f"ok: {what}", flush=True)


def sh(*args, ns=None, check_rc=True, timeout=TIMEOUT, **kw):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and r.returncode != 0:
        raise Fail(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()}")
    return r


class Bed:
    """Namespaces <tag>a / <tag>b, veth <tag>va (10.N.0.1) <-> <tag>vb (10.N.0.2)."""

    def __init__(self, scenario):
        pid = os.getpid()
        self.tag = f"cdv{pid % 100000}"
        self.a, self.b = self.tag + "a", self.tag + "b"
        self.va, self.vb = self.tag + "va", self.tag + "vb"
        n = 100 + pid % 100
        self.ip_a, self.ip_b = f"10.{n}.0.1", f"10.{n}.0.2"
        self.prefix = f"cdvt{pid}{scenario[:2]}"
        self.procs = []

    def __enter__(self):
        self.down()
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        sh("ip", "link", "add", self.va, "type", "veth", "peer", "name", self.vb)
        sh("ip", "link", "set", self.va, "netns", self.a)
        sh("ip", "link", "set", self.vb, "netns", self.b)
        sh("ip", "-n", self.a, "addr", "add", self.ip_a + "/24", "dev", self.va)
        sh("ip", "-n", self.b, "addr", "add", self.ip_b + "/24", "dev", self.vb)
        for ns, dev in ((self.a, self.va), (self.b, self.vb)):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up")
            # Full checksums and MTU-sized frames from the kernel (TESTBED.md).
            sh("ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
               ns=ns, check_rc=False)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        self.down()
        # A helper killed above (a failed run) could not clean up after itself.
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        for d in ("/dev/hugepages",):
            if os.path.isdir(d):
                for f in os.listdir(d):
                    if f.startswith(self.prefix):
                        os.unlink(os.path.join(d, f))
        return False

    def down(self):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def mac(self, ns, dev):
        out = sh("ip", "-n", ns, "-o", "link", "show", dev).stdout
        return re.search(r"link/ether ([0-9a-f:]{17})", out).group(1)

    def xdp_attached(self):
        out = sh("ip", "-n", self.a, "link", "show", "dev", self.va).stdout
        return "xdp" in out

    def start_helper(self, *args):
        cmd = ["ip", "netns", "exec", self.a, HELPER] + list(args) + ["--prefix", self.prefix]
        h = Helper(cmd)
        self.procs.append(h)
        return h


class Helper:
    """The DPDK helper process; a thread collects its stdout lines."""

    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.out = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def poll(self):
        return self.p.poll()

    def kill(self):
        self.p.kill()

    def wait(self, timeout):
        return self.p.wait(timeout)

    def read_until(self, pattern, timeout=TIMEOUT):
        """Lines up to the first matching `pattern` (bounded)."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.out.append(line)
            got.append(line)
            print("  helper:", line, flush=True)
            if re.search(pattern, line):
                return got
        err = self.p.stderr.read() if self.p.poll() is not None else ""
        raise Fail(f"helper did not print /{pattern}/ within {timeout}s (rc={self.p.poll()}): {err.strip()}")

    def stop(self, sig=signal.SIGINT, timeout=TIMEOUT):
        """Signal the helper (Ctrl-C by default); all its output and exit code."""
        # `ip netns exec` execs the helper: the pid is the helper's.
        self.p.send_signal(sig)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Fail(f"helper did not exit within {timeout}s of signal {sig}")
        self.reader.join(timeout)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.out.append(line)
                print("  helper:", line, flush=True)
        err = self.p.stderr.read()
        if err.strip():
            print("  helper stderr:", err.strip()[-2000:], flush=True)
        return "\n".join(self.out), self.p.returncode


def py_in(ns, code, timeout=TIMEOUT):
    return sh("python3", "-c", code, ns=ns, check_rc=False, timeout=timeout)


def leftovers(bed):
    hp = [f for f in os.listdir("/dev/hugepages")] if os.path.isdir("/dev/hugepages") else []
    files = [f for f in hp if f.startswith(bed.prefix)]
    rundir = os.path.exists(f"/var/run/dpdk/{bed.prefix}")
    return files, rundir


def scenario_steer(bed):
    port, kport = 61500, 8080
    p = bed.start_helper("steer", "--iface", bed.va, "--port", str(port), "--seconds", "60", "--zbuf")
    p.read_until(r"^READY")
    check(bed.xdp_attached(), "steering program attached to the interface while running")

    # ICMP and ARP stay with the kernel of A.
    r = sh("ping", "-c", "2", "-W", "2", bed.ip_a, ns=bed.b, check_rc=False)
    check(r.returncode == 0, f"ping {bed.ip_b} -> {bed.ip_a} answered by the kernel")
    neigh = sh("ip", "-n", bed.b, "neigh", "show", bed.ip_a).stdout
    check(bed.mac(bed.a, bed.va) in neigh, "ARP resolved by A's kernel (B's neighbour table has A's MAC)")

    # A kernel TCP server on a normal port of A answers a client in B.
    server = subprocess.Popen(["ip", "netns", "exec", bed.a, "python3", "-c", f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('{bed.ip_a}', {kport})); s.listen(1); s.settimeout({TIMEOUT})
c, _ = s.accept(); c.settimeout({TIMEOUT}); d = c.recv(100); c.sendall(b'echo:' + d); c.close()
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bed.procs.append(server)
    r = py_in(bed.b, f"""
import socket, time
for i in range(50):
    try:
        s = socket.create_connection(('{bed.ip_a}', {kport}), timeout=2); break
    except ConnectionRefusedError:
        time.sleep(0.1)
s.sendall(b'hello'); print(s.recv(100).decode())
""")
    check(r.stdout.strip() == "echo:hello", f"kernel TCP server on port {kport} of A answers B "
                                             f"(got {r.stdout.strip()!r} {r.stderr.strip()[-200:]!r})")
    server.wait(TIMEOUT)

    # A SYN to the reserved port reaches the DPDK queue, not the kernel (no RST).
    r = py_in(bed.b, f"""
import socket
s = socket.socket(); s.settimeout(1.5)
try:
    s.connect(('{bed.ip_a}', {port})); print('connected')
except ConnectionRefusedError:
    print('refused')
except OSError as e:
    print('timeout')
""")
    check(r.stdout.strip() == "timeout", f"kernel of A did not answer the SYN to {port} "
                                          f"(client saw {r.stdout.strip()!r})")
    out, rc = p.stop()
    check(rc == 0, f"helper exited 0 after SIGINT (rc={rc})")
    syn = re.search(rf"RX TCP {re.escape(bed.ip_b)}:\d+ -> {re.escape(bed.ip_a)}:{port} flags=0x02 zbuf=(\d)", out)
    check(syn is not None, f"SYN to {bed.ip_a}:{port} arrived on the DPDK RX queue, parsed by stack/wire")
    check(syn.group(1) == "1", "the SYN's mbuf (zbuf-backed af_xdp RX pool) became a zbuf Slice in place")
    others = [l for l in out.splitlines() if l.startswith("RX OTHER") or
              (l.startswith("RX TCP") and f":{port} " not in l)]
    check(not others, f"nothing else reached DPDK (ARP/ICMP/port {kport} stayed in the kernel): {others}")
    m = re.search(r"STEER prog=\d+ redirected=(\d+) passed=(\d+)", out)
    check(m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1,
          "steering counters: redirected >= 1 and passed >= 1")
    check_cleanup(bed, "after SIGINT")


def scenario_tx(bed):
    count, uport = 64, 9999
    mac_b = bed.mac(bed.b, bed.vb)
    receiver = subprocess.Popen(["ip", "netns", "exec", bed.b, "python3", "-c", f"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('{bed.ip_b}', {uport})); s.settimeout(1.0)
print('BOUND', flush=True)
got = set(); deadline = time.monotonic() + {TIMEOUT}
while len(got) < {count} and time.monotonic() < deadline:
    try:
        d, a = s.recvfrom(2000)
    except socket.timeout:
        continue
    if a[0] == '{bed.ip_a}' and d.startswith(b'crescent-tx '):
        got.add(int(d.split()[1]))
print('GOT', len(got), flush=True)
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bed.procs.append(receiver)
    check(receiver.stdout.readline().strip() == "BOUND", "UDP receiver bound in B")
    # ARP for B is answered by B's kernel; the helper addresses B's MAC directly.
    p = bed.start_helper("tx", "--iface", bed.va, "--src-ip", bed.ip_a, "--dst-ip", bed.ip_b,
                         "--dst-mac", mac_b, "--dport", str(uport), "--count", str(count),
                         "--seconds", "60", "--files")
    lines = p.read_until(r"^STEER|^PORT")
    files, rundir = leftovers(bed)
    check(files or rundir, f"hugepage/runtime files of prefix {bed.prefix} exist while running "
                           f"(files={len(files)}, rundir={rundir})")
    out, _ = receiver.communicate(timeout=TIMEOUT + 5)
    m = re.search(r"GOT (\d+)", out)
    check(m and int(m.group(1)) == count, f"kernel UDP socket in B received all {count} datagrams "
                                          f"sent from the DPDK port ({out.strip()!r})")
    sent = [l for l in lines if l.startswith("SENT")]
    check(sent and sent[0] == f"SENT {count}", f"helper queued {count} frames")
    out, rc = p.stop()
    port_line = next(l for l in lines + out.splitlines() if l.startswith("PORT"))
    check(f"tx={count}" in port_line, f"port counted {count} TX packets ({port_line})")
    if "multi_segs=0" in "\n".join(lines):
        check(f"linearized={count}" in port_line, "chains linearized on a port without MULTI_SEGS")
    check(rc == 0, f"helper exited 0 after SIGINT (rc={rc})")
    check_cleanup(bed, "after SIGINT (hugepage files mode)")


def check_cleanup(bed, when):
    check(not bed.xdp_attached(), f"no XDP program left on {bed.va} {when}")
    files, rundir = leftovers(bed)
    check(not files and not rundir, f"no hugepage/runtime files of prefix {bed.prefix} left {when} "
                                    f"(files={files}, rundir={rundir})")


def scenario_cleanup(bed):
    # Normal exit and SIGTERM, in-memory and file-backed.
    p = bed.start_helper("start", "--iface", bed.va)
    try:
        rc = p.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Fail("helper 'start' did not exit")
    check(rc == 0, f"start/exit ok (rc={rc})")
    check_cleanup(bed, "after a normal exit")
    p = bed.start_helper("steer", "--iface", bed.va, "--port", "61600", "--seconds", "60", "--files")
    p.read_until(r"^READY")
    check(bed.xdp_attached(), "program attached while running")
    _, rc = p.stop(signal.SIGTERM)
    check(rc == 0, f"SIGTERM handled, exit 0 (rc={rc})")
    check_cleanup(bed, "after SIGTERM")


def scenario_badinput(bed):
    def run(*args):
        cmd = ["ip", "netns", "exec", bed.a, HELPER] + list(args) + ["--prefix", bed.prefix]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)

    r = run("start", "--iface", "nosuchif0")
    err = r.stderr.strip()
    check(r.returncode != 0, f"unknown interface: non-zero exit ({r.returncode})")
    check(len(err.splitlines()) == 1 and "no network interface 'nosuchif0'" in err,
          f"unknown interface: one-line error ({err!r})")

    # An XDP program already on the interface (a stale one): "in use", untouched.
    obj = os.environ.get("CRESCENT_XDP_PROG") or os.path.join(
        os.path.dirname(os.path.abspath(HELPER)), "..", "..", "bifurcation", "xdp", "crescent_steer.bpf.o")
    sh("ip", "-n", bed.a, "link", "set", "dev", bed.va, "xdpgeneric", "obj", obj, "sec", "xdp")
    try:
        r = run("start", "--iface", bed.va)
        err = r.stderr.strip()
        check(r.returncode != 0 and len(err.splitlines()) == 1 and "already has an XDP program" in err,
              f"busy interface: one-line 'in use' error ({err!r})")
        check(bed.xdp_attached(), "the foreign XDP program was left in place")
    finally:
        sh("ip", "-n", bed.a, "link", "set", "dev", bed.va, "xdpgeneric", "off", check_rc=False)

    # The DPDK file prefix of a running process (file-backed mode): "in use".
    p = bed.start_helper("steer", "--iface", bed.va, "--port", "61700", "--seconds", "60", "--files")
    p.read_until(r"^READY")
    r = run("start", "--eal", "--no-pci --no-huge -m 64 --vdev=net_null0")
    err = r.stderr.strip()
    check(r.returncode != 0 and len(err.splitlines()) == 1 and "in use by another process" in err,
          f"DPDK prefix in use: one-line 'in use' error ({err!r})")
    files, rundir = leftovers(bed)
    check(files and rundir, f"the failed start left the running process's files alone "
                            f"(files={len(files)}, rundir={rundir})")
    _, rc = p.stop()
    check(rc == 0, "the first process was not disturbed and exits 0")

    r = run("start", "--iface", bed.va, "--eal", "--no-pci --bogus-eal-flag")
    err = r.stderr.strip()
    check(r.returncode != 0 and len(err.splitlines()) == 1 and "EAL failed" in err,
          f"EAL failure: one-line error quoting EAL ({err!r})")
    check_cleanup(bed, "after the failed starts")


def main():
    global HELPER
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    HELPER, scenario = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return SKIP
    fn = {"steer": scenario_steer, "tx": scenario_tx, "cleanup": scenario_cleanup,
          "badinput": scenario_badinput}.get(scenario)
    if fn is None:
        print(f"unknown scenario {scenario}")
        return 2
    try:
        with Bed(scenario) as bed:
            fn(bed)
    except Fail as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: timed out: {e}", flush=True)
        return 1
    print(f"PASS: dev {scenario}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
