# Sourced by tools/bench-tcp-instructions and tools/bench-rpc-instructions:
# what both do the same way — the `--max N` option that turns a count into a
# check (the perf test suite), the valgrind requirement, one callgrind run's
# instruction total, and the per-operation difference of two runs.
# Callers set `tool` (their name, for messages) before sourcing.

# --max N, if first: sets `max` (empty otherwise) and `ic_rest` (the other
# arguments). Use: ic_parse_max "$@"; set -- "${ic_rest[@]}"
ic_parse_max() {
  max=""
  if [ "${1:-}" = --max ]; then
    max=${2:-}
    [[ "$max" =~ ^[1-9][0-9]*$ ]] || { echo "$tool: --max needs a positive instruction count, not '$max'" >&2; exit 2; }
    shift 2
  fi
  ic_rest=("$@")
}

ic_need_valgrind() {
  command -v valgrind >/dev/null && return
  echo "$tool: valgrind not installed" >&2
  [ -n "$max" ] && exit 77  # a check without its tool: meson reports it SKIPPED
  exit 1
}

# ic_callgrind DIR CMD... -> the instructions (Ir) CMD ran, its output dropped.
# A caller may set ic_valgrind_opts (an array) to pass callgrind more options.
ic_valgrind_opts=()
ic_callgrind() {
  local dir=$1 ir
  shift
  valgrind --tool=callgrind "${ic_valgrind_opts[@]}" --callgrind-out-file="$dir/cg.out" "$@" >/dev/null 2>"$dir/log" \
    || { cat "$dir/log" >&2; exit 1; }
  ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$dir/log" | tail -1)
  [ -n "$ir" ] || { echo "$tool: no instruction count in callgrind's output" >&2; cat "$dir/log" >&2; exit 1; }
  echo "$ir"
}

# ic_per I1 I2 N1 N2 DECIMALS -> (I2 - I1) / (N2 - N1)
ic_per() {
  awk -v a="$1" -v b="$2" -v n1="$3" -v n2="$4" -v d="$5" 'BEGIN { printf "%.*f", d, (b - a) / (n2 - n1) }'
}

# ic_over PER: whether a check is on and PER exceeds its budget.
ic_over() {
  [ -n "$max" ] && awk -v p="$1" -v m="$max" 'BEGIN { exit !(p > m) }'
}
