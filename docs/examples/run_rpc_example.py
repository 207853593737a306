#!/usr/bin/env python3
"""Run the RPC guide's example (docs/examples/rpc_server.cpp, rpc_client.cpp)
over kernel TCP on loopback: a kernel-only runtime on each side, so no root,
no hugepages and no device.

  run_rpc_example.py RPC_SERVER RPC_CLIENT

Starts the server on a free port, waits for its "listening" line, runs the
client (which checks its own results: exit status 0 iff every call had the
expected outcome), then stops the server with SIGTERM and requires a clean
exit, and neither side may report leaked zbufs. Exit status 0 iff all of
that holds. Bounded: 20 s per step.
"""
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    server_bin, client_bin = sys.argv[1:]
    port = str(free_port())
    env = dict(os.environ, CRESCENT_LOG="warn")
    srv = subprocess.Popen([server_bin, "--kernel", "--port", port], stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 20
        seen = []
        while time.monotonic() < deadline:
            line = srv.stderr.readline()
            if not line:
                break
            seen.append(line.rstrip())
            if "listening on port" in line:
                break
        else:
            line = ""
        if "listening on port" not in line:
            print("FAIL: rpc_server did not start:\n" + "\n".join(seen))
            return 1
        print(line.rstrip())
        cl = subprocess.run([client_bin, "--kernel", "--server", "127.0.0.1", "--port", port],
                            capture_output=True, text=True, timeout=20, env=env)
        sys.stdout.write(cl.stdout)
        sys.stdout.write(cl.stderr)
        if cl.returncode != 0:
            print(f"FAIL: rpc_client exited with status {cl.returncode}")
            return 1
        if "leaked" in cl.stderr:
            print("FAIL: rpc_client left zbufs behind")
            return 1
    finally:
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
        try:
            rc = srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
            rc = srv.wait()
            print("FAIL: rpc_server did not stop within 20 s of SIGTERM")
            return 1
        rest = srv.stderr.read()
        if rest:
            sys.stdout.write(rest)
    if rc != 0:
        print(f"FAIL: rpc_server exited with status {rc} after SIGTERM")
        return 1
    if "leaked" in rest:
        print("FAIL: rpc_server left zbufs behind")
        return 1
    print("PASS: the RPC guide's server and client over kernel TCP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
