#!/bin/sh
# expect_end.sh STATUS PATTERN... -- COMMAND...: runs COMMAND, prints its output, and
# passes when its exit status is STATUS ("fail": any non-zero) and every PATTERN
# (grep -E) matches a line of the output: one pattern per image whose message must
# appear, so "a named error on every image" is checked, not just on one.
want=$1; shift
pats=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    pats="$pats$1
"; shift
done
[ "$1" = "--" ] || { echo "expect_end.sh: usage: STATUS PATTERN... -- COMMAND..." >&2; exit 2; }
shift
echo "expecting exit status $want and output matching each of:"; printf '%s' "$pats" | sed 's/^/  /'
out=$("$@" 2>&1); st=$?
printf '%s\n' "$out"; echo "exit status $st"
case $want in
    fail) [ $st -ne 0 ] || { echo "FAIL: exit status 0"; exit 1; } ;;
    *) [ $st -eq "$want" ] || { echo "FAIL: exit status $st, not $want"; exit 1; } ;;
esac
printf '%s' "$pats" | { while IFS= read -r p; do
    printf '%s\n' "$out" | grep -Eq -- "$p" || { echo "FAIL: no line matches: $p"; exit 1; }
done; }
