#!/usr/bin/env python3
"""The Prometheus endpoint of a running crescent process (issue 12, observability item 3).

Usage: metrics_test.py KNB CASE
  KNB   the knb binary
  CASE  load

  load  over knb's veth bed (tools/knb-bed, as in knb_test.py): knb server --stack crescent
        --metrics-port 9464 (the runtime's log line names the URL), a knb client under load for
        4 s, meanwhile GET http://127.0.0.1:9464/metrics with curl inside the server's namespace
        twice: HTTP 200 with Content-Type text/plain; version=0.0.4 and a Content-Length equal
        to the body; every line is a comment or `name{labels} value` per the text format 0.0.4
        (names [a-zA-Z_:][a-zA-Z0-9_:]*, labels name="value" pairs, value a number), each
        family's "# HELP" and "# TYPE" come before its first sample and a family's samples are
        contiguous; crescent_rx_packets{engine="0"} and crescent_tx_packets rise between the two
        scrapes, crescent_connections_by_state shows an ESTABLISHED connection and the LISTEN
        socket, zbuf families per size class present, counter/gauge types as documented;
        crescent_rpc_requests_total{engine="0",method="knb.echo"} rises, no RPC errors, the
        crescent_rpc_latency_seconds histogram cumulative up to le="+Inf" == _count;
        GET /other is 404, POST /metrics 405; after the server exits the port is closed.
Exit: 0 pass, 1 fail, 77 skip (not root).
"""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib  # noqa: E402
from nslib import Fail, check  # noqa: E402
import knb_test  # noqa: E402

KNB = None
PORT = 9464
NAME_RX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SAMPLE_RX = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                       r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?,?)\})? '
                       r'([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf))(?: -?[0-9]+)?$')
LABEL_RX = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')


def curl(ns, path, *extra):
    """(status, headers dict (lower-case names), body) of one request from inside `ns`."""
    r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", "-S", "-i", "--max-time", "5", *extra,
                        f"http://127.0.0.1:{PORT}{path}"], capture_output=True, timeout=15)
    if r.returncode != 0:
        raise Fail(f"curl {path} -> {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
    head, sep, body = r.stdout.partition(b"\r\n\r\n")
    check(sep != b"", f"curl {path}: a header block ended by CRLF CRLF")
    lines = head.decode().split("\r\n")
    m = re.match(r"^HTTP/1\.[01] (\d{3}) ", lines[0])
    check(m is not None, f"curl {path}: a status line ({lines[0]!r})")
    hdr = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdr[k.strip().lower()] = v.strip()
    return int(m.group(1)), hdr, body


def need(cond, what):
    """check() without the "ok:" line: for the per-line checks of an exposition."""
    if not cond:
        raise Fail(what)


def parse(text):
    """{(name, frozenset(labels)): value} and {family: type}, checking every line of the format."""
    samples, types, helps, done = {}, {}, {}, set()
    current = None
    need(text.endswith("\n"), "the exposition ends with a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            m = re.match(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$", line)
            need(m is not None, f"line {n}: a comment is '# HELP name text' or '# TYPE name type': {line!r}")
            kind, fam, rest = m.groups()
            need(fam not in done and fam != current, f"line {n}: {kind} of {fam} after its samples")
            if kind == "HELP":
                need(fam not in helps and rest.strip() != "", f"line {n}: one non-empty HELP for {fam}")
                helps[fam] = rest
            else:
                need(fam not in types and rest in ("counter", "gauge", "histogram", "summary", "untyped"),
                      f"line {n}: one TYPE for {fam}, a known type: {rest!r}")
                types[fam] = rest
            continue
        m = SAMPLE_RX.match(line)
        need(m is not None, f"line {n}: not `name{{labels}} value`: {line!r}")
        name, labels, value = m.groups()
        fam = name
        if fam not in types:
            for suf in ("_bucket", "_sum", "_count"):
                if name.endswith(suf) and name[: -len(suf)] in types:
                    fam = name[: -len(suf)]
        need(fam in helps and fam in types, f"line {n}: {name} has HELP and TYPE before its first sample")
        if fam != current:
            need(fam not in done, f"line {n}: the samples of {fam} are not contiguous")
            if current:
                done.add(current)
            current = fam
        lab = frozenset(LABEL_RX.findall(labels or ""))
        key = (name, lab)
        need(key not in samples, f"line {n}: sample {name}{{{labels}}} appears twice")
        samples[key] = float(value)
    return samples, types


def scrape(ns):
    st, hdr, body = curl(ns, "/metrics")
    check(st == 200, f"GET /metrics -> {st}")
    check(hdr.get("content-type", "").startswith("text/plain; version=0.0.4"),
          f"Content-Type {hdr.get('content-type')!r} is the text format 0.0.4")
    check(int(hdr.get("content-length", "-1")) == len(body), f"Content-Length {hdr.get('content-length')} "
          f"== {len(body)} body bytes")
    return parse(body.decode())


def get(samples, name, **labels):
    want = frozenset(labels.items())
    for (n, lab), v in samples.items():
        if n == name and want <= lab:
            return v
    raise Fail(f"no sample {name} with {labels}")


def case_load():
    knb_test.KNB = KNB
    with knb_test.Bed() as b:
        ns = b.a
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, timeout=10)
        srv = b.server([KNB, "server", "--stack", "crescent", "--cpus", "0", "--metrics-port", PORT] +
                       knb_test.crescent_dev("a"), "knb server")
        check(f"metrics on http://127.0.0.1:{PORT}/metrics" in srv.output(),
              f"the runtime's log line names the URL:\n{srv.output()[-1500:]}")
        result = {}

        def load():
            result["r"] = b.client(["--stack", "crescent"] + knb_test.crescent_dev("b") +
                                   ["--duration", "4", "--warmup", "0.5", "--iodepth", "4"])

        t = threading.Thread(target=load)
        t.start()
        try:
            time.sleep(1.5)  # the client's EAL start and warm-up
            s1, types = scrape(ns)
            time.sleep(0.5)
            s2, _ = scrape(ns)
            for name in ("crescent_rx_packets", "crescent_tx_packets", "crescent_rx_bytes", "crescent_loops",
                         "crescent_tcp_segs_in"):
                v1, v2 = get(s1, name, engine="0"), get(s2, name, engine="0")
                check(types[name] == "counter" and v2 > v1 > 0,
                      f"{name}{{engine=\"0\"}} is a counter and rose between the scrapes ({v1:.0f} -> {v2:.0f})")
            for name in ("crescent_connections", "crescent_listeners", "crescent_timers_pending",
                         "crescent_zbuf_live", "crescent_zbuf_capacity"):
                check(types[name] == "gauge", f"{name} is a gauge")
            check(get(s2, "crescent_connections", engine="0") >= 1 and
                  get(s2, "crescent_listeners", engine="0") >= 1, "a connection and a listener on engine 0")
            est = get(s2, "crescent_connections_by_state", engine="0", state="ESTABLISHED")
            lis = get(s2, "crescent_connections_by_state", engine="0", state="LISTEN")
            check(est >= 1 and lis >= 1, f"connections by state: ESTABLISHED {est:.0f}, LISTEN {lis:.0f}")
            check(get(s2, "crescent_zbuf_capacity", size="2048") > 0 and
                  types["crescent_zbuf_alloc_failed_total"] == "counter",
                  "zbuf families per size class (2048: capacity > 0, alloc_failed a counter)")
            r1 = get(s1, "crescent_rpc_requests_total", engine="0", method="knb.echo")
            r2 = get(s2, "crescent_rpc_requests_total", engine="0", method="knb.echo")
            check(types["crescent_rpc_requests_total"] == "counter" and r2 > r1 > 0,
                  f"crescent_rpc_requests_total{{method=\"knb.echo\"}} rose between the scrapes ({r1:.0f} -> {r2:.0f})")
            check(get(s2, "crescent_rpc_errors_total", engine="0", method="knb.echo") == 0, "no RPC errors counted")
            check(types["crescent_rpc_latency_seconds"] == "histogram", "crescent_rpc_latency_seconds is a histogram")
            bk = sorted(((float(dict(lab)["le"]), v) for (n, lab), v in s2.items()
                         if n == "crescent_rpc_latency_seconds_bucket" and ("method", "knb.echo") in lab))
            cnt = get(s2, "crescent_rpc_latency_seconds_count", engine="0", method="knb.echo")
            lat_sum = get(s2, "crescent_rpc_latency_seconds_sum", engine="0", method="knb.echo")
            check(len(bk) >= 10 and bk[-1][0] == float("inf") and bk[-1][1] == cnt > 0 and
                  all(a[1] <= b[1] for a, b in zip(bk, bk[1:])) and bk[-2][1] > 0 and 0 < lat_sum / cnt < 0.1,
                  f"the knb.echo latency histogram: {len(bk)} cumulative buckets up to +Inf == _count {cnt:.0f}, "
                  f"mean {lat_sum / max(cnt, 1) * 1e6:.3f} us")
            print(f"  {len(s2)} samples in {len(types)} families parsed")
            st, _, body = curl(ns, "/other")
            check(st == 404, f"GET /other -> {st} (404)")
            st, _, _ = curl(ns, "/metrics", "-X", "POST", "-d", "x")
            check(st == 405, f"POST /metrics -> {st} (405)")
        finally:
            t.join(60)
        rc, out, d = result.get("r", (1, "no result", None))
        knb_test.sane(rc, out, d, "the knb client under observation")
        check(srv.stop() == 0, "the server exited 0 on SIGTERM")
        r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", "--max-time", "3",
                            f"http://127.0.0.1:{PORT}/metrics"], capture_output=True, timeout=15)
        check(r.returncode == 7, f"after exit the port is closed (curl exit {r.returncode}, 7 = refused)")


CASES = {"load": case_load}


def main():
    global KNB
    (KNB,), case = nslib.parse_args(__doc__, CASES, 1)
    return nslib.run(CASES[case], nslib.need_root())


if __name__ == "__main__":
    sys.exit(main())
