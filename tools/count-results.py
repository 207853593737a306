#!/usr/bin/env python3
"""Sum meson testlog.json files and plain result files into 'N passed, N failed'.

Each *.json in the results folder is a meson testlog (one JSON object per line).
Each *.txt holds lines 'PASS name' / 'FAIL name' / 'SKIP name' from scripts
(out-of-tree build, fuzz runs). Exit status is 1 when anything failed.
"""
import json
import pathlib
import sys

def main(folder: str) -> int:
    passed = failed = skipped = 0
    failures = []
    for path in sorted(pathlib.Path(folder).glob("*.json")):
        tag = path.stem
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            res = rec.get("result", "")
            name = f"{tag}:{rec.get('name', '?')}"
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                skipped += 1
            else:
                failed += 1
                failures.append(f"{name} ({res})")
    for path in sorted(pathlib.Path(folder).glob("*.txt")):
        for line in path.read_text().splitlines():
            word, _, name = line.partition(" ")
            if word == "PASS":
                passed += 1
            elif word == "FAIL":
                failed += 1
                failures.append(f"{path.stem}:{name}")
            elif word == "SKIP":
                skipped += 1
    for f in failures:
        print(f"FAILED: {f}")
    if skipped:
        print(f"({skipped} skipped)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build-ci/results"))
