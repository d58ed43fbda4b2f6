#!/bin/sh
# icount.sh -- instructions the calling thread executes per ncclAllReduce,
# counted by callgrind (deterministic: the same on every run of the same
# build), for the untraced program, the minimal recorder (bench/minrec.c)
# and nccltrace in its configurations.  "added" is the count minus the
# untraced one; "x minrec" its ratio to the minimal recorder's added count.
#
#   icount.sh ICOUNT NOOP_DIR LIBNCCLTRACE LIBMINREC [--calls N]
#             [--budget I] [--budget-stacks I] [--plugin PLUGIN_COST]
#
# With --plugin (bench/plugin_cost), the profiler plugin too: its loops run
# in one preloaded process each (the no-op's own call, the preload's
# wrapper, one proxy step through ncclProfiler_v5: start, state, stop), and
# rows give the preload's added count per call and the plugin's per step
# and per event, "x minrec" as above.
#
# Prints one "ICOUNT|config|per call|added|x minrec" line per configuration
# and, with a budget, a FIGURE line each: exit 1 when nccltrace's added
# count (check off and async; NCCLTRACE_STACKS=1) exceeds its budget.
# Exit 77 when valgrind is missing.  The async row points the exchange at a
# port nobody listens on: the calling thread's work is the same as with a
# coordinator (the hot path only writes the ring).
set -u
[ $# -ge 4 ] || { echo "usage: icount.sh ICOUNT NOOP_DIR LIBNCCLTRACE LIBMINREC [--calls N] [--budget I] [--budget-stacks I]" >&2; exit 2; }
prog=$1 noop=$2 lib=$3 minrec=$4; shift 4
calls=20000 budget="" budget_stacks="" plugin=""
while [ $# -gt 0 ]; do
  case $1 in
    --calls) calls=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --budget-stacks) budget_stacks=$2; shift 2 ;;
    --plugin) plugin=$2; shift 2 ;;
    *) echo "icount.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null 2>&1 || { echo "icount.sh: valgrind not installed (scripts/deps.sh)"; exit 77; }
tmp=$(mktemp -d /tmp/nccltrace-icount.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT

count() { # NAME PRELOAD ENV... : Ir of thread 1 inside the timed loop, per call ($args: the program's)
  name=$1 pre=$2; shift 2
  [ -n "${args:-}" ] || args="$calls"
  rm -rf "$tmp/run"; mkdir -p "$tmp/run"
  env LD_LIBRARY_PATH="$noop" NCCLTRACE_RING_DIR="$tmp/run/rings" NCCLTRACE_DIR="$tmp/run/dumps" \
    ${pre:+LD_PRELOAD=$pre} "$@" \
    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
    --callgrind-out-file="$tmp/run/cg.out" "$prog" $args >"$tmp/run/out" 2>&1 ||
    { echo "icount.sh: $name: run failed" >&2; sed 's/^/  /' "$tmp/run/out" >&2; return 1; }
  ir=$(sed -n 's/^summary: *//p' "$tmp/run/cg.out-01" 2>/dev/null)
  [ -n "$ir" ] || { echo "icount.sh: $name: no callgrind summary" >&2; return 1; }
  awk -v i="$ir" -v n="$calls" 'BEGIN { printf "%.1f\n", i / n }'
}

base=$(count untraced "") || exit 1
mr=$(count minrec "$minrec") || exit 1
mr_added=$(awk -v a="$mr" -v b="$base" 'BEGIN { printf "%.1f", a - b }')
echo "ICOUNT|untraced|$base|0|-"
echo "ICOUNT|minimal recorder (bench/minrec.c)|$mr|$mr_added|1.00"
rc=0
row() { # NAME BUDGET ENV...
  name=$1 bud=$2; shift 2
  v=$(count "$name" "$lib" "$@") || { rc=1; return; }
  added=$(awk -v a="$v" -v b="$base" 'BEGIN { printf "%.1f", a - b }')
  ratio=$(awk -v a="$added" -v m="$mr_added" 'BEGIN { printf "%.2f", (m > 0 ? a / m : 0) }')
  echo "ICOUNT|$name|$v|$added|$ratio"
  [ -n "$bud" ] || return
  verdict=PASS
  awk -v a="$added" -v t="$bud" 'BEGIN { exit !(a <= t) }' || { verdict=FAIL; rc=1; }
  echo "FIGURE|instructions added per collective, $name|$added|<= $bud|$verdict"
}
row "nccltrace, check off" "$budget" NCCLTRACE_CHECK=off
row "nccltrace, async check" "$budget" NCCLTRACE_CHECK=async NCCLTRACE_COORD=127.0.0.1:9 NCCLTRACE_SECRET=icount
row "nccltrace, NCCLTRACE_STACKS=1" "$budget_stacks" NCCLTRACE_CHECK=off NCCLTRACE_STACKS=1
if [ -n "$plugin" ]; then
  prog=$plugin
  pc() { args="--icount $1 $calls"; count "plugin_cost $1" "$lib" NCCLTRACE_CHECK=off; }
  pu=$(pc untraced) && pp=$(pc preload) && ps=$(pc plugin) || exit 1
  xm() { awk -v a="$1" -v m="$mr_added" 'BEGIN { printf "%.2f", (m > 0 ? a / m : 0) }'; }
  padd=$(awk -v a="$pp" -v b="$pu" 'BEGIN { printf "%.1f", a - b }')
  pev=$(awk -v a="$ps" 'BEGIN { printf "%.1f", a / 3 }')
  echo "ICOUNT|plugin_cost: the no-op's own call|$pu|0|-"
  echo "ICOUNT|plugin_cost: the preload's wrapper, check off|$pp|$padd|$(xm "$padd")"
  echo "ICOUNT|plugin: one proxy step (start, state, stop)|$ps|$ps|$(xm "$ps")"
  echo "ICOUNT|plugin: per event|$pev|$pev|$(xm "$pev")"
fi
exit $rc
