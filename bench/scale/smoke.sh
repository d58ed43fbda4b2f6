#!/bin/sh
# smoke.sh BENCH [ARGS...] -- run a benchmark with tiny sizes: it must exit 0
# and print at least one FIGURE line.  The figures of a smoke run mean
# nothing (tiny sizes, a busy test machine): no target is enforced here.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "smoke: exit status $rc" >&2; exit 1; }
printf '%s\n' "$out" | grep -q '^FIGURE|' || { echo "smoke: no FIGURE line" >&2; exit 1; }
exit 0
