#!/usr/bin/env bash
# pgo_build: tools/pgo-build keys its profile on the tree the profile was taken
# from (GCC rejects a profile of other sources), so --tree-id must change when
# anything compiled changes (a commit, a staged or unstaged edit, a new file)
# and the training workload changes, and must not change for documentation;
# bad arguments exit 2 with one line naming the problem. Runs the script from a
# scratch git repository (no build).
# Usage: pgo_build_test.sh TOOLS/pgo-build
set -u

src=$1
tmp=$(mktemp -d /tmp/pgo_build_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
ok()   { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }

repo=$tmp/repo
mkdir -p "$repo/tools" "$repo/stack" "$repo/docs"
cp "$src" "$repo/tools/pgo-build"
cd "$repo" || exit 1
git init -q . && git config user.email t@t && git config user.name t
echo 'int f() { return 1; }' >stack/a.cpp
echo '# notes' >README.md
echo 'guide' >docs/guide.md
git add -A && git commit -qm base

id() { tools/pgo-build --tree-id --train "${1:-rpc}"; }
expect_same() { # what, before, after
  if [ "$2" = "$3" ]; then ok; else fail "$1 changed the tree id"; fi
}
expect_new() {
  if [ -n "$3" ] && [ "$2" != "$3" ]; then ok; else fail "$1 left the tree id as it was ($2)"; fi
}

a=$(id)
expect_same "asking twice" "$a" "$(id)"
[ ${#a} -eq 64 ] && ok || fail "tree id '$a' is not a sha256"
expect_new "another training workload" "$a" "$(id beds)"

echo 'more' >>README.md; echo 'more' >>docs/guide.md
expect_same "editing README.md and docs/" "$a" "$(id)"

echo 'int f() { return 2; }' >stack/a.cpp
b=$(id)
expect_new "an unstaged edit of a source" "$a" "$b"
git add stack/a.cpp
c=$(id)
expect_same "staging that edit" "$b" "$c"
git commit -qm edit
expect_same "committing it" "$c" "$(id)"

echo 'int g();' >stack/b.hpp
d=$(id)
expect_new "an untracked source" "$c" "$d"
rm stack/b.hpp
expect_same "removing it again" "$c" "$(id)"

# Bad arguments: exit 2, one stderr line naming what is wrong.
bad() { # expected-substring args...
  local want=$1; shift
  tools/pgo-build "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
  else fail "pgo-build $* -> rc $rc, stderr: $(cat "$tmp/err")"; fi
}
bad "--train takes rpc or beds, not 'fast'" --train fast
bad "--train takes rpc or beds, not ''" --train
bad "one build directory, not 'x' and 'y'" x y
bad "unknown option '--nope'" --nope
tools/pgo-build --help >"$tmp/out" 2>&1 && grep -q "profile-guided" "$tmp/out" && ok || fail "--help"

echo "pgo_build: $checks checks, $fails failed"
[ $fails -eq 0 ]
