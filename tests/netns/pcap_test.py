#!/usr/bin/env python3
"""Packet capture (issue 12): crescent-echo --pcap FILE over AF_XDP, read back by tcpdump.

Usage: pcap_test.py CRESCENT_ECHO CASE
  CRESCENT_ECHO  examples/crescent-echo
  CASE           capture | cap | toggle

Each case builds its own bed with `tools/testbed up NAME` (NAME-a: crescent-echo on
NAME-va 10.77.0.1 over AF_XDP with the steering program, port 7; NAME-b: a Python
client on kernel TCP at 10.77.0.2) and always removes it. Every wait is bounded.
Exit: 0 pass, 1 fail, 77 skip (not root, or no tcpdump).

  capture  the client sends 200 000 seeded bytes, reads them echoed back byte-exact and
           closes; crescent-echo is stopped (SIGTERM, exit 0, --stats: pcap_frames > 0,
           no pcap_dropped_cap). `tcpdump -r FILE -nn -v` reads the file: the client's
           SYN (received) and crescent's SYN-ACK (sent) with MSS, SACK-permitted,
           timestamps and window scale; data segments both ways adding up to the bytes
           sent; a FIN each way; every TCP and IP checksum "correct" (none "incorrect",
           no "bad cksum") — crescent computes them in software on AF_XDP; as many
           packets as pcap_frames.
  cap      --pcap-max-bytes 4096 with the same transfer: the file stops at or under 4096
           bytes (above the 24-byte header), tcpdump reads every record in it without
           error, the stats show pcap_dropped_cap > 0 and pcap_frames = the records
           read; then --pcap in a directory that does not exist: start fails with one
           line naming the path and errno, exit 1.
  toggle   crescent-echo without --pcap; kernel clients echo 20 000 bytes each in a loop;
           under that traffic `crescent-stat pcap PID on FILE` (tools/crescent-stat next to
           the examples directory) answers "pcap on FILE", a while later `pcap PID off`
           answers "pcap off"; the file then stops growing while the traffic goes on,
           tcpdump -r reads it (packets > 0, checksums correct, only port-7 traffic).
           `pcap PID on /nonexistent-crescent-dir/x.pcap` exits 1 with the process's
           one-line error naming the path and errno; afterwards transfers still echo
           byte-exact and `crescent-stat PID` still answers; crescent-echo exits 0.
"""
import subprocess
import threading
import time
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import IP_A, IP_B, Fail, check, sh  # noqa: E402

ECHO = None
PORT = 7
NBYTES = 200000
PY = "/usr/bin/python3"
CLIENT = r"""
import random, socket, sys
n = int(sys.argv[2])
data = random.Random(12).randbytes(n)
s = socket.create_connection((sys.argv[1], 7), timeout=20)
s.sendall(data)
got = bytearray()
while len(got) < n:
    b = s.recv(65536)
    if not b:
        break
    got += b
s.shutdown(socket.SHUT_WR)
s.settimeout(5)
tail = s.recv(1)
s.close()
print("echoed", len(got), "exact", bytes(got) == data, "eof", tail == b"")
"""


class Bed(nslib.Bed):
    def __init__(self, case):
        super().__init__("pc", case, hugepages=256)
        self.hugefiles.append(self.prefix)

    def echo(self, *extra, ready=r"listening on"):
        return self.serve([ECHO, "--iface", self.va, "--file-prefix", self.prefix, "--port", PORT,
                           "--stats", "--idle-sleep-us", 100] + list(extra), "crescent-echo", ready=ready,
                          timeout=60)

    def transfer(self):
        r = sh(PY, "-c", CLIENT, IP_A, NBYTES, ns=self.b, timeout=60)
        check(f"echoed {NBYTES} exact True eof True" in r.stdout,
              f"the kernel client got its {NBYTES} bytes back byte-exact, then EOF ({r.stdout.strip()})")


def stat(out, name):
    m = re.findall(rf"\b{name}=(\d+)", out)
    return sum(int(x) for x in m)


def tcpdump(path):
    r = sh("tcpdump", "-r", path, "-nn", "-v", check_rc=False, timeout=60)
    check(r.returncode == 0, f"tcpdump -r {os.path.basename(path)} exits 0 ({r.stderr.strip()[-300:]})")
    return r.stdout


def packets(text):
    """tcpdump -v prints the IP line, then the TCP line indented: join them per packet."""
    pkts, cur = [], None
    for line in text.splitlines():
        if line and not line[0].isspace():
            if cur is not None:
                pkts.append(cur)
            cur = line
        elif cur is not None:
            cur += " " + line.strip()
    if cur is not None:
        pkts.append(cur)
    return pkts


def case_capture():
    with Bed("capture") as b:
        path = f"/tmp/{b.prefix}.pcap"
        b.files.append(path)
        srv = b.echo("--pcap", path)
        b.transfer()
        rc = srv.stop()
        out = srv.output()
        check(rc == 0, f"crescent-echo exits 0 on SIGTERM ({rc})")
        frames = stat(out, "pcap_frames")
        check(frames > 0, f"--stats counts the frames captured (pcap_frames={frames})")
        check(stat(out, "pcap_dropped_cap") == 0, "no frame over the (absent) size cap")
        text = tcpdump(path)
        pkts = packets(text)
        check(len(pkts) == frames, f"tcpdump reads as many packets as were counted ({len(pkts)} vs {frames})")
        check("incorrect" not in text and "bad cksum" not in text,
              "no incorrect TCP checksum and no bad IP checksum in the capture")
        tcp = [p for p in pkts if f"{IP_A}.{PORT}" in p]
        check(all("cksum" in p and "(correct)" in p for p in tcp),
              f"every one of the {len(tcp)} TCP segments has its checksum verified correct")
        c2s = [p for p in tcp if f"{IP_B}." in p and f"> {IP_A}.{PORT}:" in p]
        s2c = [p for p in tcp if p.count(f"{IP_A}.{PORT} > {IP_B}.") == 1]
        syn = [p for p in c2s if "Flags [S]," in p]
        synack = [p for p in s2c if "Flags [S.]," in p]
        check(len(syn) >= 1, "the client's SYN was captured as received")
        check(len(synack) >= 1, "crescent's SYN-ACK was captured as sent")
        sa = synack[0]
        print("SYN-ACK:", sa, flush=True)
        for opt in (r"mss \d+", r"sackOK", r"TS val \d+ ecr \d+", r"wscale \d+"):
            check(re.search(opt, sa), f"the SYN-ACK carries {opt}")

        def payload(ps):
            return sum(int(m.group(1)) for p in ps for m in [re.search(r"length (\d+)$", p)] if m)
        up, down = payload(c2s), payload(s2c)
        check(up >= NBYTES, f"the client's data is in the capture ({up} bytes >= {NBYTES})")
        check(down >= NBYTES, f"crescent's echo is in the capture ({down} bytes >= {NBYTES})")
        check(any("F" in re.search(r"Flags \[([^\]]*)\]", p).group(1) for p in c2s), "the client's FIN")
        check(any("F" in re.search(r"Flags \[([^\]]*)\]", p).group(1) for p in s2c), "crescent's FIN")


def case_cap():
    with Bed("cap") as b:
        path = f"/tmp/{b.prefix}.pcap"
        b.files.append(path)
        srv = b.echo("--pcap", path, "--pcap-max-bytes", 4096)
        b.transfer()
        rc = srv.stop()
        out = srv.output()
        check(rc == 0, f"crescent-echo exits 0 on SIGTERM ({rc})")
        size = os.path.getsize(path)
        check(24 < size <= 4096, f"the file stopped at the cap ({size} bytes <= 4096)")
        frames, dropped = stat(out, "pcap_frames"), stat(out, "pcap_dropped_cap")
        check(dropped > 0, f"the frames over the cap are counted (pcap_dropped_cap={dropped})")
        pkts = packets(tcpdump(path))
        check(len(pkts) == frames > 0, f"tcpdump reads every record written ({len(pkts)} = pcap_frames {frames})")

        bad = "/nonexistent-crescent-dir/x.pcap"
        p = nslib.Proc(b.a, [ECHO, "--iface", b.va, "--file-prefix", b.prefix + "x", "--port", PORT,
                             "--pcap", bad], "crescent-echo (bad --pcap)")
        b.procs.append(p)
        b.hugefiles.append(b.prefix + "x")
        try:
            rc = p.p.wait(60)
        except Exception:
            raise Fail("crescent-echo with an unwritable --pcap did not exit")
        p.t.join(5)
        want = f"cannot open the capture file {bad}: No such file or directory"
        check(rc == 1 and any(want in l for l in p.lines),
              f"a bad --pcap path fails start with one line naming it and errno (rc {rc}: {p.output()[-400:]})")


def case_toggle():
    stat_bin = os.path.join(os.path.dirname(os.path.abspath(ECHO)), "..", "tools", "crescent-stat")
    check(os.access(stat_bin, os.X_OK), f"crescent-stat is built next to crescent-echo ({stat_bin})")

    def cstat(*args):
        return subprocess.run([stat_bin] + [str(a) for a in args], capture_output=True, text=True, timeout=30)

    with Bed("toggle") as b:
        path = f"/tmp/{b.prefix}.pcap"
        b.files.append(path)
        srv = b.echo()
        pid = srv.p.pid  # ip netns exec execs the server: same pid
        stop = threading.Event()
        done, errors = [0], []

        def load():
            while not stop.is_set():
                r = sh(PY, "-c", CLIENT, IP_A, 20000, ns=b.b, timeout=30, check_rc=False)
                if "echoed 20000 exact True eof True" not in r.stdout:
                    errors.append(r.stdout + r.stderr)
                    return
                done[0] += 1

        t = threading.Thread(target=load)
        t.start()
        try:
            deadline = time.time() + 20
            while done[0] < 3 and not errors and time.time() < deadline:
                time.sleep(0.05)
            check(done[0] >= 3, f"traffic runs before the toggle ({done[0]} transfers, {errors[:1]})")
            r = cstat("pcap", pid, "on", path)
            check(r.returncode == 0 and f"pcap on {path}" in r.stdout,
                  f"crescent-stat pcap on answers (rc {r.returncode}: {r.stdout.strip()} {r.stderr.strip()})")
            at_on = done[0]
            while done[0] < at_on + 5 and not errors and time.time() < deadline + 20:
                time.sleep(0.05)
            check(done[0] >= at_on + 5, f"transfers while capturing ({done[0] - at_on})")
            r = cstat("pcap", pid, "off")
            check(r.returncode == 0 and "pcap off" in r.stdout,
                  f"crescent-stat pcap off answers (rc {r.returncode}: {r.stdout.strip()} {r.stderr.strip()})")
            size_off = os.path.getsize(path)
            at_off = done[0]
            while done[0] < at_off + 5 and not errors and time.time() < deadline + 40:
                time.sleep(0.05)
            check(done[0] >= at_off + 5, f"transfers after the capture ({done[0] - at_off})")
            size_after = os.path.getsize(path)
            check(size_after == size_off > 24,
                  f"the file stops growing when the capture is off ({size_off} -> {size_after} bytes)")
        finally:
            stop.set()
            t.join(60)
        check(not errors, f"every transfer echoed byte-exact ({errors[:1]})")
        text = tcpdump(path)
        pkts = packets(text)
        check(len(pkts) > 0, f"tcpdump reads the toggled capture ({len(pkts)} packets)")
        check("incorrect" not in text and "bad cksum" not in text, "no incorrect checksum in the capture")
        syn = [p for p in pkts if f"> {IP_A}.{PORT}:" in p and "Flags [S]," in p]
        check(len(syn) >= 1, f"SYNs of the transfers during the capture are in it ({len(syn)})")

        bad = "/nonexistent-crescent-dir/x.pcap"
        r = cstat("pcap", pid, "on", bad)
        want = f"cannot open the capture file {bad}: No such file or directory"
        check(r.returncode == 1 and want in r.stderr and r.stderr.count("\n") == 1,
              f"a bad path answers one error line naming it and errno (rc {r.returncode}: {r.stderr.strip()})")
        b.transfer()
        r = cstat(pid)
        check(r.returncode == 0 and f"pid={pid}" in r.stdout, "crescent-stat still answers after the error")
        rc = srv.stop()
        check(rc == 0, f"crescent-echo exits 0 on SIGTERM ({rc})")


CASES = {"capture": case_capture, "cap": case_cap, "toggle": case_toggle}


def main():
    global ECHO
    (ECHO,), case = nslib.parse_args(__doc__, CASES, 1)
    skip = nslib.need_root() or (None if shutil.which("tcpdump") else "no tcpdump")
    return nslib.run(CASES[case], skip)


if __name__ == "__main__":
    sys.exit(main())
