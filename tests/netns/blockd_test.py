#!/usr/bin/env python3
"""crescent-blockd and crescent-blockd-bench across two namespaces (issue 9).

Usage: blockd_test.py BLOCKD BENCH CASE
  BLOCKD  the crescent-blockd binary     BENCH  the crescent-blockd-bench binary
  CASE    memory | impaired | kernel | file | policy | badargs

Each case builds its own bed with `tools/testbed up NAME` (NAME-a: blockd on
NAME-va 10.77.0.1, NAME-b: the bench on NAME-vb 10.77.0.2, both crescent over
AF_XDP with the steering program) and always removes it. Every wait is
bounded. Both processes run with --idle-sleep-us so that two busy-polling
engines do not starve the veth's softirq on a small machine. A bench run
passes when it exits 0 and its JSON says ok, zero errors, zero mismatches and
a positive number of CRC-verified reads. Exit: 0 pass, 1 fail, 77 skip (not
root).

  memory    in-memory volume: 4 KiB blocks at iodepth 16 for 4 s, then 64 KiB
            blocks at iodepth 4 with FLUSHes, crescent <-> crescent; blockd
            exits 0 on SIGTERM with every request answered and no CRC mismatch.
  impaired  the same with crescent's --impair loss=2,dup=1,reorder=10 on both
            ends (this kernel has no netem). loss > dup on purpose: the frames
            the veth delivered minus those the server engine received must
            then be clearly positive, which shows the impairment really ran.
  kernel    the bench over the kernel transport to blockd's --kernel-port, with
            nftables dropping 2% of TCP both ways and duplicating 1% of frames
            on the client's kernel side; the nft counters must show both.
  file      --file on a file in /var/tmp (ext4 here: O_DIRECT; another
            filesystem that refuses it: --allow-buffered, reported), crescent
            and kernel benches with FLUSHes; every reply was deferred to an
            io_uring completion; the file holds data afterwards.
  policy    blockd --allow 10.77.0.2/32: the crescent client at 10.77.0.2 is served
            while a kernel-transport client at 10.77.0.3 is refused at connection
            set-up (reset, counted); 10.77.0.2 over the kernel transport is served.
  badargs   one-line errors for bad options (no root needed).
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import IP_A, IP_B, TIMEOUT, Fail, check, sh  # noqa: E402

BLOCKD = BENCH = None
SLEEP = ["--idle-sleep-us", "100"]


class Bed(nslib.Bed):
    """blockd in NAME-a (DPDK file prefix <prefix>a), the bench in NAME-b (<prefix>b)."""

    def __init__(self, case):
        super().__init__("bd", case, hugepages=256)
        self.hugefiles += [self.prefix + "a", self.prefix + "b"]

    def blockd(self, *extra):
        return self.serve([BLOCKD, "--iface", self.va, "--file-prefix", self.prefix + "a", "--stats"]
                          + SLEEP + list(extra), "blockd")

    def bench(self, *extra, timeout=120):
        argv = [BENCH, "--iface", self.vb, "--file-prefix", self.prefix + "b", "--server", IP_A] + SLEEP
        argv += [str(x) for x in extra]
        t0 = time.time()
        r = sh(*argv, ns=self.b, check_rc=False, timeout=timeout)
        line = next((l for l in r.stdout.splitlines() if l.startswith("{")), None)
        res = json.loads(line) if line else {}
        print(f"bench {' '.join(str(x) for x in extra)} ({time.time() - t0:.1f}s): rc={r.returncode} {line}")
        return r, res


def bench_ok(r, res, what):
    tail = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("["))[-2000:]
    check(r.returncode == 0 and res.get("ok") is True and res.get("errors") == 0 and
          res.get("mismatches") == 0 and res.get("verified", 0) > 0 and res.get("ops", 0) > 0,
          f"{what}: {res.get('ops')} ops, {res.get('verified')} reads CRC-verified, "
          f"errors {res.get('errors')}, mismatches {res.get('mismatches')}" + ("" if r.returncode == 0 else "\n" + tail))


def stat(out, line_prefix, name):
    """The value of `name=` on the first output line starting with line_prefix."""
    for l in out.splitlines():
        if l.startswith(line_prefix):
            m = re.search(r"\b" + re.escape(name) + r"=(\d+)", l)
            if m:
                return int(m.group(1))
            return 0
    raise Fail(f"no '{line_prefix}' line in blockd's output")


def stop_blockd(p, expect_flush=False):
    rc = p.stop()
    out = p.output()
    print("\n".join(l for l in out.splitlines() if l.startswith("engine")))
    check(rc == 0, f"blockd exited 0 on SIGTERM (rc {rc})")
    req = stat(out, "engine 0 server:", "requests")
    rep = stat(out, "engine 0 server:", "replies")
    check(req > 0 and req == rep and stat(out, "engine 0 server:", "errors_sent") == 0,
          f"blockd answered every request with a reply ({req} requests, {rep} replies, no errors)")
    check(stat(out, "engine 0 blockd:", "crc_mismatch") == 0 and stat(out, "engine 0 blockd:", "bad_meta") == 0,
          "blockd saw no CRC mismatch and no bad metadata")
    check(stat(out, "engine 0 server:", "handler_dropped") == 0, "no call was dropped unanswered")
    if expect_flush:
        check(stat(out, "engine 0 volume:", "flushes") > 0, "FLUSHes reached the volume")
    return out


# ---- cases --------------------------------------------------------------------------

def case_memory():
    with Bed("memory") as bed:
        srv = bed.blockd("--size", 32 << 20, "--kernel-port", 7200)
        check("in memory, 33554432 bytes" in srv.output(), "blockd serves a 32 MiB in-memory volume")
        bench_ok(*bed.bench("--duration", 4, "--iodepth", 16), "4 KiB blocks, iodepth 16, 4 s")
        bench_ok(*bed.bench("--ops", 1500, "--iodepth", 4, "--block-size", 65536, "--region", 32 << 20,
                            "--read-pct", 70, "--flush-every", 50), "64 KiB blocks, iodepth 4, FLUSH every 50")
        out = stop_blockd(srv, expect_flush=True)
        check(stat(out, "engine 0 volume:", "bytes_written") > 0, "the volume stored the writes")


def veth_rx(bed):
    return int(sh("cat", f"/sys/class/net/{bed.va}/statistics/rx_packets", ns=bed.a).stdout)


def case_impaired():
    imp = ["--impair", "loss=2,dup=1,reorder=10,seed=11"]
    with Bed("impaired") as bed:
        before = veth_rx(bed)
        srv = bed.blockd("--size", 32 << 20, *imp)
        bench_ok(*bed.bench("--ops", 3000, "--iodepth", 8, *imp, timeout=150),
                 "4 KiB blocks over an impaired link (loss 2%, dup 1%, reorder 10%)")
        bench_ok(*bed.bench("--ops", 300, "--iodepth", 4, "--block-size", 65536, "--region", 32 << 20,
                            "--flush-every", 25, *imp, timeout=150),
                 "64 KiB blocks over the impaired link")
        out = stop_blockd(srv, expect_flush=True)
        delivered = veth_rx(bed) - before
        received = stat(out, "engine 0:", "rx_packets")
        lost = delivered - received
        print(f"veth delivered {delivered} frames to {bed.va}; the server engine received {received}")
        check(received > 0 and lost > delivered * 0.003,
              f"the server's RX impairment dropped more frames than it duplicated ({lost} net of {delivered})")


NFT_CLIENT = """
table inet bdimp {
  chain in {
    type filter hook input priority 0; policy accept;
    tcp sport 7200 numgen random mod 100 < 2 counter drop
  }
  chain out {
    type filter hook output priority 0; policy accept;
    tcp dport 7200 numgen random mod 100 < 2 counter drop
  }
}
table netdev bddup {
  chain egress {
    type filter hook egress device "%s" priority 0; policy accept;
    tcp dport 7200 numgen random mod 100 < 1 counter dup to "%s"
  }
}
"""


def nft_counters(bed):
    r = sh("nft", "list", "ruleset", ns=bed.b)
    return [int(x) for x in re.findall(r"counter packets (\d+)", r.stdout)]


def case_kernel():
    with Bed("kernel") as bed:
        srv = bed.blockd("--size", 32 << 20, "--kernel-port", 7200)
        check("kernel port 7200" in srv.output(), "blockd also serves RPC on kernel port 7200")
        bench_ok(*bed.bench("--transport", "kernel", "--port", 7200, "--duration", 3, "--iodepth", 16, "--conns", 2),
                 "the bench over the kernel transport, 2 connections")
        sh("nft", "-f", "-", ns=bed.b, inp=NFT_CLIENT % (bed.vb, bed.vb))
        bench_ok(*bed.bench("--transport", "kernel", "--port", 7200, "--ops", 4000, "--iodepth", 8,
                            "--block-size", 16384, "--flush-every", 100, timeout=150),
                 "the kernel transport with nftables loss and duplication on the client side")
        c = nft_counters(bed)
        print(f"nft counters (drop in, drop out, dup): {c}")
        check(len(c) == 3 and c[0] + c[1] > 0 and c[2] > 0, "nftables really dropped and duplicated packets")
        stop_blockd(srv, expect_flush=True)


def case_file():
    path = f"/var/tmp/crescent-blockd-netns-{os.getpid()}.img"
    with Bed("file") as bed:
        bed.files.append(path)
        srv = bed.blockd("--size", 32 << 20, "--file", path, "--allow-buffered", "--kernel-port", 7200,
                         "--queue-depth", 32)
        banner = next(l for l in srv.lines if "engine 0 serving" in l)
        print(banner)
        if "O_DIRECT" not in banner:
            print("note: the filesystem of /var/tmp refuses O_DIRECT here: buffered I/O (the O_DIRECT path "
                  "is not exercised by this case)")
        check("O_DIRECT" in banner or "buffered" in banner, "blockd opened the file volume")
        bench_ok(*bed.bench("--duration", 4, "--iodepth", 16, "--block-size", 8192, "--flush-every", 32),
                 "crescent bench on the file volume, 8 KiB blocks, FLUSH every 32")
        bench_ok(*bed.bench("--transport", "kernel", "--port", 7200, "--ops", 2000, "--iodepth", 8,
                            "--flush-every", 50),
                 "kernel-transport bench on the file volume")
        out = stop_blockd(srv, expect_flush=True)
        req = stat(out, "engine 0 server:", "requests")
        deferred = stat(out, "engine 0 blockd:", "deferred")
        check(deferred == req, f"every reply was sent from an io_uring completion ({deferred} of {req})")
        check(stat(out, "engine 0 volume:", "io_error") == 0, "no I/O error")
        with open(path, "rb") as f:
            data = f.read(1 << 20)
        check(os.path.getsize(path) == 32 << 20 and any(data), "the file is 32 MiB and holds written blocks")


def case_policy():
    """An allow-list (rpc::Acl) serving one client while refusing another, at the same time."""
    with Bed("policy") as bed:
        sh("ip", "addr", "add", "10.77.0.3/24", "dev", bed.vb, ns=bed.b)
        srv = bed.blockd("--size", 16 << 20, "--kernel-port", 7200, "--allow", "10.77.0.2/32")
        # The refused client: the kernel transport from 10.77.0.3, its engine on a
        # null device (the veth's one AF_XDP queue belongs to the allowed client).
        kernel_client = [BENCH, "--eal", "--no-pci --vdev=net_null0", "--ip", "10.99.0.1/24", "--server", IP_A,
                         "--transport", "kernel", "--port", "7200", "--deadline-ms", "2000"] + SLEEP
        refused = subprocess.Popen(["ip", "netns", "exec", bed.b] + kernel_client +
                                   ["--file-prefix", bed.prefix + "c", "--bind", "10.77.0.3", "--duration", "3",
                                    "--max-errors", "1000000"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            bench_ok(*bed.bench("--duration", 3, "--iodepth", 8), "10.77.0.2 (crescent) served meanwhile")
            out, err = refused.communicate(timeout=60)
        finally:
            if refused.poll() is None:
                refused.kill()
                refused.wait(5)
            nslib.clean_hugefiles(bed.prefix + "c")
        line = next((l for l in out.splitlines() if l.startswith("{")), "{}")
        res = json.loads(line)
        print(f"refused client: rc={refused.returncode} {line}")
        check(refused.returncode != 0 and res.get("ops", 1) == 0 and "reset" in res.get("error", ""),
              "10.77.0.3 (kernel transport) completed nothing: its connections were reset at set-up")
        try:
            r = sh(*(kernel_client + ["--file-prefix", bed.prefix + "d", "--bind", IP_B, "--ops", 2000]), ns=bed.b,
                   check_rc=False, timeout=120)
        finally:
            nslib.clean_hugefiles(bed.prefix + "d")
        line = next((l for l in r.stdout.splitlines() if l.startswith("{")), None)
        res = json.loads(line) if line else {}
        bench_ok(r, res, "10.77.0.2 over the kernel transport served too")
        rc = srv.stop()
        out = srv.output()
        print("\n".join(l for l in out.splitlines() if l.startswith("engine 0 server")))
        check(rc == 0, "blockd exited 0")
        check(stat(out, "engine 0 server:", "refused") >= 1, "blockd counted the refused connections")
        check(stat(out, "engine 0 server:", "requests") > 0, "and served the allowed client's requests")


def case_badargs():
    def bad(prog, args, want):
        r = subprocess.run([prog] + args, capture_output=True, text=True, timeout=TIMEOUT)
        err = r.stderr.strip()
        check(r.returncode == 2 and want in err and len(err.splitlines()) == 1,
              f"{os.path.basename(prog)} {' '.join(args)} -> one line naming '{want}' ({err!r})")
    bad(BLOCKD, ["--iface", "x", "--size", "5000"], "not a multiple of 4096")
    bad(BLOCKD, ["--iface", "x", "--port", "7100", "--kernel-port", "7100"], "--kernel-port must differ")
    bad(BLOCKD, ["--iface", "x", "--allow-buffered"], "only applies to --file")
    bad(BLOCKD, ["--size", "4096"], "exactly one of --iface")
    bad(BLOCKD, ["--iface", "x", "--bogus"], "unknown option '--bogus'")
    bad(BENCH, ["--iface", "x"], "--server IP is required")
    bad(BENCH, ["--iface", "x", "--server", "10.0.0.1", "--block-size", "5000"], "not a multiple of 4096")
    bad(BENCH, ["--iface", "x", "--server", "10.0.0.1", "--ops", "5", "--duration", "5"], "not both")
    bad(BENCH, ["--iface", "x", "--server", "10.0.0.1", "--region", "8192", "--iodepth", "16"],
        "fewer than --iodepth")
    bad(BENCH, ["--iface", "x", "--server", "10.0.0.1", "--transport", "udp"], "not crescent or kernel")
    bad(BLOCKD, ["--iface", "x", "--allow", "10.0.0.1/8"], "--allow")
    bad(BLOCKD, ["--iface", "x", "--allow", "10.0.0.0/8:erase"], "'erase' is not a method")
    bad(BLOCKD, ["--iface", "x", "--client-rate", "fast"], "--client-rate")
    bad(BENCH, ["--iface", "x", "--server", "10.0.0.1", "--bind", "10.0.0.2"], "--transport kernel only")


CASES = {
    "memory": case_memory,
    "impaired": case_impaired,
    "kernel": case_kernel,
    "file": case_file,
    "policy": case_policy,
    "badargs": case_badargs,
}


def main():
    global BLOCKD, BENCH
    (BLOCKD, BENCH), case = nslib.parse_args(__doc__, CASES, 2)
    return nslib.run(CASES[case], None if case == "badargs" else nslib.need_root())


if __name__ == "__main__":
    sys.exit(main())
