#!/bin/sh
# icount.sh -- instructions the calling thread executes per ncclAllReduce,
# counted by callgrind (deterministic: the same on every run of the same
# build), for the untraced program, the minimal recorder (bench/minrec.c)
# and nccltrace in its configurations.  "added" is the count minus the
# untraced one; "x minrec" its ratio to the minimal recorder's added count.
#
#   icount.sh ICOUNT NOOP_DIR LIBNCCLTRACE LIBMINREC [--calls N]
#             [--budget I] [--budget-stacks I] [--plugin PLUGIN_COST]
#             [--metrics BOUND]
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
#
# With --metrics BOUND, two more rows, check off: NCCLTRACE_METRICS on a
# free loopback port with icount's scraper thread GETting /metrics every
# second, until 3 scrapes came during the counted calls (icount --scrape),
# and the same number of calls in the same chunks without the endpoint
# (icount --chunked); a FIGURE line for the difference per call, exit 1
# when its absolute value exceeds BOUND.  The scraper and the endpoint are
# other threads: only what scraping costs the calling thread is counted.
set -u
[ $# -ge 4 ] || { echo "usage: icount.sh ICOUNT NOOP_DIR LIBNCCLTRACE LIBMINREC [--calls N] [--budget I] [--budget-stacks I]" >&2; exit 2; }
prog=$1 noop=$2 lib=$3 minrec=$4; shift 4
calls=20000 budget="" budget_stacks="" plugin="" metrics=""
while [ $# -gt 0 ]; do
  case $1 in
    --calls) calls=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --budget-stacks) budget_stacks=$2; shift 2 ;;
    --plugin) plugin=$2; shift 2 ;;
    --metrics) metrics=$2; shift 2 ;;
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
  # shellcheck disable=SC2086  # $vgopts and $args are word lists
  env LD_LIBRARY_PATH="$noop" NCCLTRACE_RING_DIR="$tmp/run/rings" NCCLTRACE_DIR="$tmp/run/dumps" \
    ${pre:+LD_PRELOAD=$pre} "$@" \
    valgrind ${vgopts:-} --tool=callgrind --collect-atstart=no --separate-threads=yes \
    --callgrind-out-file="$tmp/run/cg.out" "$prog" $args >"$tmp/run/out" 2>&1 ||
    { echo "icount.sh: $name: run failed" >&2; sed 's/^/  /' "$tmp/run/out" >&2; return 1; }
  ir=$(sed -n 's/^summary: *//p' "$tmp/run/cg.out-01" 2>/dev/null)
  [ -n "$ir" ] || { echo "icount.sh: $name: no callgrind summary" >&2; return 1; }
  awk -v i="$ir" -v n="$calls" -v p="${prec:-1}" 'BEGIN { printf "%.*f\n", p, i / n }'
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
if [ -n "$metrics" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
    port=$((20000 + $$ % 20000))
  # the call count is known after the run: count the total (calls=1), divide below
  # fair scheduling: else the calling thread can starve the endpoint's and
  # the scraper's threads under valgrind for minutes
  saved=$calls args="--scrape $port 3 $calls" calls=1 prec=0 vgopts=--fair-sched=yes
  on=$(count "nccltrace, metrics scraped" "$lib" NCCLTRACE_CHECK=off NCCLTRACE_METRICS="127.0.0.1:$port") || exit 1
  got=$(sed -n 's/^calls \([0-9]*\) scrapes \([0-9]*\)$/\1 \2/p' "$tmp/run/out")
  # shellcheck disable=SC2086  # "C S" into $1 $2
  set -- $got
  [ $# -eq 2 ] || { echo "icount.sh: metrics: no 'calls N scrapes S' line" >&2; exit 1; }
  mcalls=$1 scrapes=$2
  on=$(awk -v i="$on" -v n="$mcalls" 'BEGIN { printf "%.3f", i / n }')
  # the off run: the same calls in the same chunks
  calls=$mcalls args="--chunked $mcalls" prec=3
  off=$(count "nccltrace, metrics off" "$lib" NCCLTRACE_CHECK=off) || exit 1
  calls=$saved args="" prec="" vgopts=""
  d=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a - b }')
  echo "ICOUNT|nccltrace, check off, $mcalls calls in chunks|$off|$(awk -v a="$off" -v b="$base" 'BEGIN { printf "%.1f", a - b }')|-"
  echo "ICOUNT|  same, NCCLTRACE_METRICS scraped every 1 s ($scrapes scrapes)|$on|$(awk -v a="$on" -v b="$base" 'BEGIN { printf "%.1f", a - b }')|-"
  verdict=PASS
  awk -v d="$d" -v t="$metrics" 'BEGIN { exit !(d <= t && -d <= t) }' || { verdict=FAIL; rc=1; }
  echo "FIGURE|instructions per call added by scraping /metrics every second|$d|within +-$metrics|$verdict"
fi
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
