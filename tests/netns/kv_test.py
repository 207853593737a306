#!/usr/bin/env python3
"""crescent-kv served to unmodified Redis clients across two namespaces (issue 9).

Usage: kv_test.py CRESCENT_KV CASE
  CRESCENT_KV  the crescent-kv binary
  CASE         crescent | kernel | badargs

Each case builds its own bed with `tools/testbed up NAME` (NAME-a: crescent-kv
on NAME-va 10.77.0.1 over AF_XDP with the steering program, port 6379, and the
kernel transport on port 6380 of the same process and engine; NAME-b:
redis-benchmark, redis-cli and the Python `redis` client on kernel TCP at
10.77.0.2) and always removes it. Every wait is bounded; crescent-kv runs with
--idle-sleep-us so that its busy-polling engine does not starve the veth's
softirq on a small machine. Exit: 0 pass, 1 fail, 77 skip (not root, or no
redis-benchmark / python3-redis).

  crescent  against the crescent port:
            (a) redis-benchmark -t ping,set,get,mset,incr -P 16 -n 200000 -q --csv:
                every test reports a rate > 0, and the server counted no error
                reply and no protocol error meanwhile (INFO stats);
            (b) redis-py (the Debian python3-redis, run by /usr/bin/python3 in
                NAME-b): 10 000 random binary values of 0..64 KiB (seeded)
                stored with pipelined SETs, every one read back byte-exact with
                GET and MGET; exact error replies (wrong arity, unknown command,
                invalid expire time) as redis-py raises them; EXPIRE/TTL/PTTL/
                PERSIST and a key that really expires; INCR; FLUSHALL, DBSIZE;
            (backpressure) a client that pipelines 64 GETs of a 1 MiB value
            and does not read is paused (INFO clients paused_clients:1, from
            a second connection), then receives all 64 MiB intact and the
            PING it sent meanwhile.
            crescent-kv exits 0 on SIGTERM, its --stats showing the commands,
            no protocol error and no reply cut short. Then a shorter run of
            (a) and (b) with --mode batch.
  kernel    the same (a), (b) and backpressure against the kernel port of the same process,
            plus one keyspace behind both ports: a value written through one
            transport is read back through the other.
  badargs   one-line errors for bad options; --cores 2 without --shard is
            refused with the reason; --rx-ring 100 (not a power of two) is
            refused by Runtime::start (no root needed).
"""
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import IP_A, TIMEOUT, Fail, check, sh  # noqa: E402

PORT, KPORT = 6379, 6380
KV = None
PY = "/usr/bin/python3"  # the Debian interpreter that has python3-redis
SLEEP = ["--idle-sleep-us", "100"]
ARENA_MB = 768           # 10 000 values of 0..64 KiB are ~320 MiB, held in arena objs
HUGEPAGES = 640          # 1.25 GiB: the arena, the RX pool, DPDK's own


class Bed(nslib.Bed):
    """crescent-kv in NAME-a (DPDK file prefix <prefix>); the clients in NAME-b use kernel TCP."""

    def __init__(self, case):
        super().__init__("kv", case, hugepages=HUGEPAGES)
        self.hugefiles.append(self.prefix)

    def kv(self, *extra):
        return self.serve([KV, "--iface", self.va, "--file-prefix", self.prefix, "--port", PORT,
                           "--kernel-port", KPORT, "--arena-mb", ARENA_MB, "--stats"] + SLEEP + list(extra),
                          "crescent-kv", timeout=60)


# ---- (a) redis-benchmark ---------------------------------------------------------------

def benchmark(bed, port):
    argv = ["redis-benchmark", "-h", IP_A, "-p", port, "-t", "ping,set,get,mset,incr", "-P", 16,
            "-n", 200000, "-q", "--csv"]
    t0 = time.time()
    r = sh(*argv, ns=bed.b, check_rc=False, timeout=300)
    took = time.time() - t0
    print(f"redis-benchmark -p {port} ({took:.1f}s): rc={r.returncode}\n{r.stdout.strip()}")
    if r.stderr.strip():
        print("redis-benchmark stderr:", r.stderr.strip()[-2000:])
    check(r.returncode == 0, f"redis-benchmark against port {port} exited 0")
    check("WARNING" not in r.stderr and "rror" not in r.stderr,
          "redis-benchmark printed no warning or error (CONFIG GET save/appendonly answered)")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    rates = {row[0]: float(row[1]) for row in rows[1:] if len(row) >= 2}
    want = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"]
    check(rows and rows[0][:2] == ["test", "rps"], "the CSV has redis-benchmark's header")
    check(sorted(rates) == sorted(want), f"every test ran: {sorted(rates)}")
    check(all(v > 0 for v in rates.values()), "every test reports a rate > 0: " +
          ", ".join(f"{k} {v:.0f}/s" for k, v in rates.items()))
    return rates


# ---- (b) redis-py, run by the Debian interpreter in namespace B ---------------------------

PY_CLIENT = r'''
import random, sys, time, redis
port = int(sys.argv[1]); n = int(sys.argv[2]); seed = int(sys.argv[3])
r = redis.Redis(host="%(ip)s", port=port, socket_timeout=60)

def ok(cond, what):
    if not cond:
        print("FAIL: " + what, flush=True)
        sys.exit(1)
    print("ok: " + what, flush=True)

ok(r.ping() is True, "PING")
ok(r.info("server")["redis_version"] == "7.0.15", "INFO server: redis_version")
stats0 = r.info("stats")
ok(stats0["total_error_replies"] == 0 and stats0["protocol_errors"] == 0,
   "no error reply and no protocol error so far (%%d commands)" %% stats0["total_commands_processed"])
r.flushall()

rnd = random.Random(seed)
values = [rnd.randbytes(rnd.randint(0, 65536)) for _ in range(n)]
total = sum(len(v) for v in values)
t0 = time.time()
p = r.pipeline(transaction=False)
for i, v in enumerate(values):
    p.set(b"bin:%%d" %% i, v)
    if i %% 100 == 99:
        ok_all = all(x is True for x in p.execute())
        if not ok_all:
            ok(False, "a SET was not answered +OK")
p.execute()
t1 = time.time()
ok(r.dbsize() == n, "DBSIZE is %%d after the SETs (%%d bytes in %%.1fs)" %% (n, total, t1 - t0))
bad = 0
for i, v in enumerate(values):
    if r.get(b"bin:%%d" %% i) != v:
        bad += 1
t2 = time.time()
ok(bad == 0, "all %%d values read back byte-exact with GET (%%.1fs)" %% (n, t2 - t1))
keys = [b"bin:%%d" %% i for i in range(0, n, 97)]
got = r.mget(keys + [b"missing"])
ok(got[:-1] == [values[i] for i in range(0, n, 97)] and got[-1] is None, "MGET of %%d keys and a missing one" %% len(keys))

def err(args, want):
    try:
        r.execute_command(*args)
    except redis.exceptions.ResponseError as e:
        ok(str(e) == want, "%%r -> ResponseError %%r" %% (args, str(e)))
        return
    ok(False, "%%r raised no ResponseError" %% (args,))
err(("GET",), "wrong number of arguments for 'get' command")
err(("FOO", "a", "b"), "unknown command 'FOO', with args beginning with: 'a' 'b' ")
err(("SET", "k", "v", "EX", "0"), "invalid expire time in 'set' command")
err(("INCR", "bin:1") if len(values[1]) else ("INCR", "bin:2"), "value is not an integer or out of range")

ok(r.set("t", "v") is True and r.ttl("t") == -1, "SET t; TTL -1")
ok(r.expire("t", 100) is True and r.ttl("t") == 100, "EXPIRE t 100; TTL 100")
ok(0 < r.pttl("t") <= 100000, "PTTL in (0, 100000]")
ok(r.persist("t") is True and r.ttl("t") == -1, "PERSIST; TTL -1")
ok(r.set("gone", "x", px=300) is True and 0 < r.pttl("gone") <= 300, "SET gone PX 300")
time.sleep(0.5)
ok(r.get("gone") is None and r.exists("gone") == 0 and r.ttl("gone") == -2, "the key expired (GET nil, TTL -2)")
ok(r.set("later", "x", ex=1) is True, "SET later EX 1")
time.sleep(1.3)
ok(r.exists("later") == 0, "expired after 1 s")
ok(r.incr("ctr") == 1 and r.incrby("ctr", 41) == 42 and r.get("ctr") == b"42", "INCR / INCRBY / GET")
ok(r.delete("ctr", "t", "nothing") == 2, "DEL counts the keys it removed")
stats = r.info("stats")
ok(stats["total_error_replies"] == stats0["total_error_replies"] + 4 and stats["protocol_errors"] == 0,
   "the server counted exactly the 4 provoked error replies")
ok(r.flushall() is True and r.dbsize() == 0, "FLUSHALL; DBSIZE 0")
print("PYDONE", flush=True)
'''


def pyclient(bed, port, n=10000, seed=9):
    code = PY_CLIENT % {"ip": IP_A}
    t0 = time.time()
    r = sh(PY, "-c", code, port, n, seed, ns=bed.b, check_rc=False, timeout=600)
    print(r.stdout.strip())
    if r.returncode != 0 or "PYDONE" not in r.stdout:
        raise Fail(f"redis-py client against port {port} failed (rc {r.returncode}):\n{r.stderr.strip()[-3000:]}")
    check(True, f"redis-py client against port {port}: {n} random binary values and the checks above "
                f"({time.time() - t0:.1f}s)")


BACKPRESSURE = r'''
import socket, sys, time
port = int(sys.argv[1])
def cmd(*a):
    return b"*%%d\r\n" %% len(a) + b"".join(b"$%%d\r\n%%s\r\n" %% (len(x), x) for x in a)
def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(min(1 << 20, n - len(buf)))
        if not d:
            raise SystemExit("FAIL: connection closed after %%d of %%d bytes" %% (len(buf), n))
        buf += d
    return bytes(buf)
big = bytes(range(256)) * 4096  # 1 MiB
s = socket.create_connection(("%(ip)s", port)); s.settimeout(60)
s.sendall(cmd(b"SET", b"big", big))
assert recv_exact(s, 5) == b"+OK\r\n"
n = 64
s.sendall(cmd(b"GET", b"big") * n)
time.sleep(1.0)  # 64 MiB of replies, unread: the server stops reading this client
s.sendall(cmd(b"PING"))
o = socket.create_connection(("%(ip)s", port)); o.settimeout(10)
o.sendall(cmd(b"INFO", b"clients"))
time.sleep(0.3)
info = o.recv(65536)
paused = b"paused_clients:1" in info
one = b"$1048576\r\n" + big + b"\r\n"
for i in range(n):
    if recv_exact(s, len(one)) != one:
        raise SystemExit("FAIL: GET reply %%d differs" %% i)
pong = recv_exact(s, 7)
print("BPDONE paused=%%d pong=%%r" %% (paused, pong), flush=True)
'''


def backpressure(bed, port):
    """A client that does not read 64 MiB of replies is paused, then served in full."""
    r = sh(PY, "-c", BACKPRESSURE % {"ip": IP_A}, port, ns=bed.b, check_rc=False, timeout=120)
    print(r.stdout.strip())
    line = next((l for l in r.stdout.splitlines() if l.startswith("BPDONE")), "")
    check(r.returncode == 0 and "paused=1" in line and "pong=b'+PONG\\r\\n'" in line,
          f"port {port}: 64 pipelined GETs of 1 MiB unread -> the client was paused (INFO clients), then got "
          f"all 64 MiB intact and the PING sent meanwhile" + ("" if r.returncode == 0 else "\n" + r.stderr[-2000:]))


def cli(bed, port, *args):
    r = sh("redis-cli", "-h", IP_A, "-p", port, *args, ns=bed.b, check_rc=False)
    return r.stdout.strip()


def stat(out, name):
    m = re.search(r"^engine 0 kv:.*\b" + re.escape(name) + r"=(\d+)", out, re.M)
    if not m:
        raise Fail(f"no '{name}' in crescent-kv's --stats:\n{out[-2000:]}")
    return int(m.group(1))


def engine_stat(out, name):
    # The engine's own counters (examples::print_engine_stats: nonzero ones only).
    m = re.search(r"^engine 0:.*\b" + re.escape(name) + r"=(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


def stop_kv(p):
    rc = p.stop()
    out = p.output()
    print("\n".join(l for l in out.splitlines() if l.startswith("engine")))
    check(rc == 0, f"crescent-kv exited 0 on SIGTERM (rc {rc})")
    check(stat(out, "commands") > 1200000, f"it executed {stat(out, 'commands')} commands")
    check(stat(out, "protocol_errors") == 0 and stat(out, "reply_oom") == 0,
          "no protocol error, no reply cut short for lack of memory")
    return out


# ---- cases ----------------------------------------------------------------------------

def case_crescent():
    with Bed("crescent") as bed:
        srv = bed.kv()
        check("kernel port 6380" in srv.output(), "crescent-kv serves port 6379 (crescent) and 6380 (kernel)")
        check("rings 2048/" in srv.output(), "crescent-kv's queue has 2048 RX descriptors (its --rx-ring default)")
        check(cli(bed, PORT, "PING") == "PONG", "redis-cli PING -> PONG over crescent")
        benchmark(bed, PORT)
        pyclient(bed, PORT)
        backpressure(bed, PORT)
        out = stop_kv(srv)
        check(stat(out, "connections") > 50, "redis-benchmark's 50 clients and the others connected")
        check(stat(out, "pauses") >= 1, "the slow reader was paused (--stats pauses)")
        # Inline mode: a delivery's replies leave from inside the callback
        # (Stream::send_now -> Conn::send_now, EngineConfig::reply_at_once).
        sent_now = engine_stat(out, "tx_sent_now")
        check(sent_now > 1000, f"replies sent at once from the callbacks (tx_sent_now {sent_now})")
        # Batch dispatch mode: the same clients, a shorter run.
        srv = bed.kv("--mode", "batch")
        check("batch mode" in srv.output(), "crescent-kv in batch mode")
        benchmark(bed, PORT)
        pyclient(bed, PORT, n=1000, seed=3)
        out = stop_kv(srv)
        check(engine_stat(out, "tx_sent_now") == 0, "batch mode: send_now does nothing (tx_sent_now 0)")


def case_kernel():
    with Bed("kernel") as bed:
        srv = bed.kv()
        check(cli(bed, KPORT, "PING") == "PONG", "redis-cli PING -> PONG over the kernel port")
        benchmark(bed, KPORT)
        pyclient(bed, KPORT)
        backpressure(bed, KPORT)
        # One keyspace behind both ports (one engine).
        check(cli(bed, PORT, "SET", "shared", "via crescent") == "OK", "SET through the crescent port")
        check(cli(bed, KPORT, "GET", "shared") == "via crescent", "GET through the kernel port sees it")
        check(cli(bed, KPORT, "SET", "shared", "via kernel") == "OK", "SET through the kernel port")
        check(cli(bed, PORT, "GET", "shared") == "via kernel", "GET through the crescent port sees it")
        info = cli(bed, KPORT, "INFO", "clients")
        check("crescent_clients_kernel:1" in info, "INFO clients counts the kernel connection")
        out = stop_kv(srv)
        check(stat(out, "pauses") >= 1, "the slow reader was paused (--stats pauses)")


def case_badargs():
    def bad(args, want):
        r = subprocess.run([KV] + args, capture_output=True, text=True, timeout=TIMEOUT)
        err = r.stderr.strip()
        check(r.returncode == 2 and want in err and len(err.splitlines()) == 1,
              f"crescent-kv {' '.join(args)} -> one line naming '{want}' ({err!r})")
    bad(["--port", "6379"], "exactly one of --iface")
    bad(["--iface", "x", "--kernel-port", "6379"], "--kernel-port must differ")
    bad(["--iface", "x", "--cores", "2"], "add --shard")
    bad(["--iface", "x", "--mode", "fast"], "not inline or batch")
    bad(["--iface", "x", "--kernel-bind", "1.2.3.4"], "--kernel-bind needs --kernel-port")
    bad(["--iface", "x", "--kernel-port", "1", "--kernel-bind", "nope"], "not an IPv4 address")
    bad(["--iface", "x", "--hz", "0"], "--hz")
    bad(["--iface", "x", "--bogus"], "unknown option '--bogus'")
    bad(["--iface", "x", "--rx-ring", "32"], "--rx-ring")
    # In range but not a power of two: refused by Runtime::start (exit 1), before anything starts.
    r = subprocess.run([KV, "--iface", "x", "--rx-ring", "100"], capture_output=True, text=True, timeout=TIMEOUT)
    err = r.stderr.strip()
    check(r.returncode == 1 and "RX ring of 100 descriptors: give a power of two in 64..4096" in err
          and len(err.splitlines()) == 1, f"crescent-kv --rx-ring 100 -> one line from the runtime ({err!r})")
    r = subprocess.run([KV, "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    check(r.returncode == 0 and "--kernel-port" in r.stdout and "--shard" in r.stdout, "--help prints the usage")


CASES = {"crescent": case_crescent, "kernel": case_kernel, "badargs": case_badargs}


def redis_missing():
    """None when redis-benchmark, redis-cli and PY's redis module are there, else what is missing."""
    if not shutil.which("redis-benchmark") or not shutil.which("redis-cli"):
        return "needs redis-benchmark and redis-cli (Debian redis-tools)"
    if subprocess.run([PY, "-c", "import redis"], capture_output=True).returncode != 0:
        return f"{PY} cannot import redis (Debian python3-redis)"
    return None


def main():
    global KV
    (KV,), case = nslib.parse_args(__doc__, CASES, 1)
    return nslib.run(CASES[case], None if case == "badargs" else nslib.need_root() or redis_missing())


if __name__ == "__main__":
    sys.exit(main())
