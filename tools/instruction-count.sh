# Sourced by tools/bench-tcp-instructions, tools/bench-rpc-instructions and
# tools/code-footprint: what they do the same way — the `--max N` option that
# turns a count into a check (the perf test suite), the valgrind requirement,
# bench_rpc and its arguments, the scratch directory, one callgrind run's
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

# ic_bench_rpc BUILD: sets `bin` to BUILD's bench_rpc, or exits naming what to build.
ic_bench_rpc() {
  bin=$1/tests/bench/bench_rpc
  [ -x "$bin" ] || { echo "$tool: $bin not built (ninja -C $1 tests/bench/bench_rpc)" >&2; exit 1; }
}

# ic_check_rpc_args N1 N2 SIZE DEPTH: bench_rpc's counted calls N1..N2, its data
# size and depth, or exit 2 naming the bad one.
ic_check_rpc_args() {
  [[ "$4" =~ ^[1-9][0-9]*$ ]] || { echo "$tool: DEPTH must be a positive integer, not '$4'" >&2; exit 2; }
  [[ "$3" =~ ^[1-9][0-9]*$ ]] && [ "$3" -ge 8 ] && [ "$3" -le 1048576 ] \
    || { echo "$tool: SIZE must be 8..1048576 bytes, not '$3'" >&2; exit 2; }
  [[ "$1" =~ ^[1-9][0-9]*$ ]] && [[ "$2" =~ ^[1-9][0-9]*$ ]] && [ "$2" -gt "$1" ] \
    || { echo "$tool: N1 and N2 must be positive, N2 larger ($1, $2)" >&2; exit 2; }
}

# ic_tmpdir: sets `tmp` to a new directory for callgrind's files, removed on exit.
ic_tmpdir() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
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
