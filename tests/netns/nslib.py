"""Shared harness of the two-namespace tests (blockd_test.py, kv_test.py, faults_test.py, ...).

A test script imports it from its own directory:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nslib

What it gives:
  Fail, check(cond, what)   a failed check raises Fail(what); a passed one prints "ok: what"
  sh(*args, ns=...)         a command (in a namespace), bounded in time; rc != 0 -> Fail
  Proc                      a server in a namespace: output collected line by line,
                            wait_for(pattern) and stop() bounded in time
  Bed                       `tools/testbed up NAME` (NAME-a: 10.77.0.1 on NAME-va,
                            NAME-b: 10.77.0.2 on NAME-vb) as a context manager: on the way
                            out, whatever happens, its processes are stopped, the namespaces
                            removed, the hugepage files of its DPDK file prefixes and its
                            scratch files deleted
  parse_args, need_root, run  the `SCRIPT BIN... CASE` entry point: exit 0 pass, 1 fail,
                            2 usage, 77 skip
  stat(STAT, *args), counters(STAT, pid)   tools/crescent-stat (path STAT) bounded in time:
                            its output / a process's integer counters
  wait_until(fn, timeout)   polls fn() until it returns something true, bounded in time
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
TIMEOUT = 30  # seconds, the bound of a single wait unless a caller says otherwise
HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.join(HERE, "..", "..", "tools", "testbed")
IP_A, IP_B = "10.77.0.1", "10.77.0.2"  # NAME-va, NAME-vb (tools/testbed up)


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print(f"ok: {what}", flush=True)


def sh(*args, ns=None, check_rc=True, timeout=TIMEOUT, inp=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=inp)
    if check_rc and r.returncode != 0:
        raise Fail(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def clean_hugefiles(prefix):
    """Remove the /dev/hugepages files (and /var/run/dpdk dir) of DPDK file prefix `prefix`."""
    subprocess.run([TESTBED, "clean-hugefiles", prefix], timeout=TIMEOUT)


class Proc:
    """A process in namespace `ns`; stdout and stderr collected line by line.
    `name` names it in errors."""

    def __init__(self, ns, argv, name):
        self.name = name
        self.lines = []
        self.p = subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in argv],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self):
        return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=TIMEOUT):
        """True once a line matches `pattern`; False after `timeout` s or once the process exited."""
        rx = re.compile(pattern)
        end = time.time() + timeout
        while time.time() < end:
            if any(rx.search(l) for l in self.lines):
                return True
            if self.p.poll() is not None:
                time.sleep(0.2)
                return any(rx.search(l) for l in self.lines)
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM, timeout=TIMEOUT):
        """`sig` (SIGTERM), then its exit status; Fail (after SIGKILL) if it outlives `timeout` s."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
            raise Fail(f"{self.name} did not exit within {timeout}s of {signal.Signals(sig).name}:\n"
                       f"{self.output()[-3000:]}")
        self.t.join(5)
        return rc

    def end(self):
        """Teardown: SIGTERM if still running, SIGKILL after 10 s; never raises."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


class Bed:
    """A testbed named <tag><first 3 letters of case><pid % 100000>, its namespaces
    self.a / self.b, veths self.va / self.vb. self.prefix (<tag><case[:3]><pid>) is the
    stem of the DPDK file prefixes; every prefix in self.hugefiles and every path in
    self.files is removed on exit. `hugepages`: how many 2 MiB pages to reserve."""

    def __init__(self, tag, case, hugepages):
        self.name = f"{tag}{case[:3]}{os.getpid() % 100000}"
        self.a, self.b = self.name + "-a", self.name + "-b"
        self.va, self.vb = self.name + "-va", self.name + "-vb"
        self.prefix = f"{tag}{case[:3]}{os.getpid()}"
        self.hugepages = hugepages
        self.procs = []
        self.hugefiles = []
        self.files = []

    def __enter__(self):
        sh(TESTBED, "bpffs")
        sh(TESTBED, "hugepages", self.hugepages)
        sh(TESTBED, "up", self.name)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.end()
        subprocess.run([TESTBED, "down", self.name], timeout=TIMEOUT)
        for prefix in self.hugefiles:
            clean_hugefiles(prefix)
        for f in self.files:
            try:
                os.unlink(f)
            except OSError:
                pass
        return False

    def serve(self, argv, name, ready=r"engine 0 serving", timeout=TIMEOUT):
        """Start argv in namespace A and wait until a line matches `ready` (Fail if it does not)."""
        p = Proc(self.a, argv, name)
        self.procs.append(p)
        if not p.wait_for(ready, timeout=timeout):
            raise Fail(f"{name} did not come up:\n{p.output()[-3000:]}")
        return p


def parse_args(doc, cases, nbins):
    """argv is BIN x nbins then CASE: returns ([absolute BIN paths], CASE); otherwise prints
    the usage paragraph of `doc` and exits 2."""
    if len(sys.argv) != nbins + 2 or sys.argv[-1] not in cases:
        print(doc.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    return [os.path.abspath(a) for a in sys.argv[1:-1]], sys.argv[-1]


def need_root():
    """None as root, else the reason to skip."""
    return None if os.geteuid() == 0 else "needs root"


def run(case, skip=None):
    """Runs case() unless there is a reason to skip: the exit status (0 pass, 1 fail, 77 skip)."""
    if skip:
        print(f"SKIP: {skip}")
        return SKIP
    try:
        case()
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


# ---- tools/crescent-stat ----------------------------------------------------------------

def stat(binary, *args, rc=0, timeout=20):
    """crescent-stat `binary` run with `args`: its CompletedProcess; Fail unless it exits `rc`
    (None: any exit status)."""
    r = subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if rc is not None and r.returncode != rc:
        raise Fail(f"crescent-stat {' '.join(map(str, args))} -> {r.returncode}"
                   + (f" (wanted {rc})" if rc else "") + f": {r.stderr.strip()}")
    return r


def counters(binary, pid, strict=False, timeout=20):
    """`crescent-stat PID` as {name: int}. A line whose value is not an integer is left out, or
    with `strict` fails the test (every counter line is NAME=INTEGER)."""
    out = {}
    for line in stat(binary, pid, timeout=timeout).stdout.splitlines():
        k, _, v = line.partition("=")
        try:
            out[k] = int(v)
        except ValueError:
            if strict:
                raise Fail(f"crescent-stat {pid}: not NAME=INTEGER: {line!r}") from None
    return out


def wait_until(fn, timeout, step=0.1):
    """fn() every `step` s until it returns something true or `timeout` s pass: its last value."""
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()
