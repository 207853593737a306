#!/usr/bin/env bash
# knb_plot: tools/knb-plot draws every figure from a sweep document (each a PNG of more
# than 10 KB), draws only what a single run can show (the others skipped with one stderr
# line each), and refuses bad input with exit 2 and one stderr line naming the file.
# Usage: knb_plot_test.sh TOOLS/knb-plot SWEEP.json
# Exits 77 (meson's skip) when /usr/bin/python3 cannot import matplotlib.
set -u

plot=$1
sweep=$2
py=/usr/bin/python3

if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "knb_plot: SKIP: $py cannot import matplotlib (tools/install-deps installs python3-matplotlib)"
  exit 77
fi

tmp=$(mktemp -d /tmp/knb_plot_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
ok()   { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }

# Runs knb-plot (at most 120 s) with stdout/stderr into $tmp/out, $tmp/err; sets rc.
run() {
  timeout 120 "$py" "$plot" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# A PNG: the 8 magic bytes and more than 10 KB.
check_png() {
  local f=$1
  if [ ! -f "$f" ]; then fail "$f not written"; return; fi
  ok
  local magic
  magic=$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')
  [ "$magic" = "89504e470d0a1a0a" ] && ok || fail "$f is not a PNG (starts with $magic)"
  local size
  size=$(stat -c %s "$f")
  [ "$size" -gt 10240 ] && ok || fail "$f is only $size bytes"
}

# 1. The sweep: all five figures, each path printed, nothing on stderr.
figures="throughput_vs_size throughput_vs_iodepth latency_cdf zero_copy_vs_copy latency_vs_size"
run --out "$tmp/sweep" --title "knb_plot test" "$sweep"
[ "$rc" -eq 0 ] && ok || fail "sweep: exit $rc (want 0); stderr: $(cat "$tmp/err")"
for f in $figures; do
  check_png "$tmp/sweep/$f.png"
  grep -qx "$tmp/sweep/$f.png" "$tmp/out" && ok || fail "sweep: $f.png not printed on stdout"
done
[ "$(wc -l <"$tmp/out")" -eq 5 ] && ok || fail "sweep: stdout has $(wc -l <"$tmp/out") lines (want 5)"
[ ! -s "$tmp/err" ] && ok || fail "sweep: unexpected stderr: $(cat "$tmp/err")"

# 2. One run document (the sweep's first run): only the CDF can be drawn; each other
#    figure is skipped with exactly one stderr line naming it; default --out is the
#    file's directory.
mkdir -p "$tmp/one"
"$py" -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["runs"][0], open(sys.argv[2], "w"))' \
  "$sweep" "$tmp/one/run.json"
run "$tmp/one/run.json"
[ "$rc" -eq 0 ] && ok || fail "one run: exit $rc (want 0); stderr: $(cat "$tmp/err")"
check_png "$tmp/one/latency_cdf.png"
[ "$(cat "$tmp/out")" = "$tmp/one/latency_cdf.png" ] && ok || fail "one run: stdout is '$(cat "$tmp/out")'"
for f in throughput_vs_size throughput_vs_iodepth zero_copy_vs_copy latency_vs_size; do
  [ ! -e "$tmp/one/$f.png" ] && ok || fail "one run: $f.png written without the data"
  [ "$(grep -c "^knb-plot: $f.png skipped: " "$tmp/err")" -eq 1 ] && ok || fail "one run: no single skip line for $f.png"
done
[ "$(wc -l <"$tmp/err")" -eq 4 ] && ok || fail "one run: stderr has $(wc -l <"$tmp/err") lines (want 4): $(cat "$tmp/err")"

# 3. Rounds (knb sweep --repeat): every run three times. Saying their round, a point's
#    runs are its rounds (the median drawn, no note); without, they are duplicates
#    (the later drawn, one note on stderr).
for kind in rounds dups; do
  "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
runs = []
for r in range(1, 4):
    for x in d["runs"]:
        y = json.loads(json.dumps(x))
        y["result"]["rps"] = x["result"]["rps"] * r
        if sys.argv[3] == "rounds":
            y = {"round": r, **y}
        runs.append(y)
d["runs"] = runs
json.dump(d, open(sys.argv[2], "w"))' "$sweep" "$tmp/$kind.json" "$kind"
  run --out "$tmp/$kind" "$tmp/$kind.json"
  [ "$rc" -eq 0 ] && ok || fail "$kind: exit $rc (want 0); stderr: $(cat "$tmp/err")"
  check_png "$tmp/$kind/throughput_vs_size.png"
  if [ "$kind" = rounds ]; then
    [ ! -s "$tmp/err" ] && ok || fail "rounds: unexpected stderr: $(cat "$tmp/err")"
  else
    grep -q "duplicate point(s) (same variant, size, iodepth): the later run is drawn" "$tmp/err" && ok ||
      fail "dups: no duplicate note: $(cat "$tmp/err")"
  fi
done

# 4. Bad input: exit 2, one stderr line naming the file, nothing written.
printf '{"knb":1,"kind":"sweep","runs":[' >"$tmp/trunc.json"
printf '{"hello":"world"}\n' >"$tmp/other.json"
printf '{"knb":1,"kind":"run","config":{"stack":"crescent"},"result":{"ok":true}}\n' >"$tmp/norun.json"
for bad in "$tmp/missing.json" "$tmp/trunc.json" "$tmp/other.json" "$tmp/norun.json"; do
  rm -rf "$tmp/badout"
  run --out "$tmp/badout" "$sweep" "$bad"
  [ "$rc" -eq 2 ] && ok || fail "$(basename "$bad"): exit $rc (want 2)"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && ok || fail "$(basename "$bad"): stderr has $(wc -l <"$tmp/err") lines: $(cat "$tmp/err")"
  grep -qF "$bad" "$tmp/err" && ok || fail "$(basename "$bad"): stderr does not name the file: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] && [ ! -e "$tmp/badout" ] && ok || fail "$(basename "$bad"): wrote output anyway"
  echo "bad input $(basename "$bad"): $(cat "$tmp/err")"
done

echo "knb_plot: $((checks - fails))/$checks checks passed"
[ "$fails" -eq 0 ]
