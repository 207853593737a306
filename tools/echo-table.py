#!/usr/bin/env python3
"""Print echo-load JSON lines from echo-compare as a side-by-side table."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {r["label"]: r for r in rows}

def cell(stack, test, key, fmt):
    r = by.get(f"{stack} {test}")
    if not r or not r.get("ok"):
        return "FAILED"
    return fmt.format(r[key])

lines = [
    ("round trips/s, 64 B", "rr 64B", "rps", "{:,.0f}"),
    ("p50 latency, 64 B (us)", "rr 64B", "p50_us", "{:.1f}"),
    ("p99 latency, 64 B (us)", "rr 64B", "p99_us", "{:.1f}"),
    ("round trips/s, 4 KiB", "rr 4KiB", "rps", "{:,.0f}"),
    ("p50 latency, 4 KiB (us)", "rr 4KiB", "p50_us", "{:.1f}"),
    ("p99 latency, 4 KiB (us)", "rr 4KiB", "p99_us", "{:.1f}"),
    ("streaming echo (Mbit/s)", "stream", "mbit_s", "{:,.0f}"),
]
print()
print(f"{'':28} {'kernel TCP':>14} {'crescent':>14} {'ratio':>8}")
for name, test, key, fmt in lines:
    k = by.get(f"kernel {test}")
    c = by.get(f"crescent {test}")
    ratio = ""
    if k and c and k.get("ok") and c.get("ok") and k[key]:
        ratio = f"{c[key] / k[key]:.2f}x"
    print(f"{name:28} {cell('kernel', test, key, fmt):>14} {cell('crescent', test, key, fmt):>14} {ratio:>8}")
print("\nSame busy-polling kernel client (echo-load) in namespace B for both; servers in namespace A;"
      " one veth pair; every echoed byte verified.")
ok = all(r.get("ok") for r in rows)
sys.exit(0 if ok else 1)
