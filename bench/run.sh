#!/usr/bin/env bash
# bench/run.sh -- THE benchmark command: runs every benchmark of nccltrace
# (docs/performance.md) on this machine, in one invocation, and prints one
# table: figure | measured | target | PASS/FAIL/INFO.
#
#   bench/run.sh [-C BUILD_DIR] [--quick] [--log FILE]
#
# BUILD_DIR (default: build) is configured here when it is not yet (after
# installing the build dependencies, as run-tests.sh does); the benchmark
# targets are built here first (ninja).  --quick runs smaller sizes (minutes less; the
# figures are then not the documented ones).  Every measured number is
# printed by this run: benchmarks alternate measured and baseline runs
# themselves and report medians; nothing is compared against another run.
# The load average is printed with each benchmark: on a shared machine the
# figures move with it.
#
# Needs: Open MPI (mpicc/mpirun) for the strict-mode baseline (else that row
# is INFO); root for the unreachable-coordinator rows (network namespaces,
# bench/hosts_block.py; else one INFO row says why); about 2 GiB in /tmp for the analyze inputs, which are generated
# once into $NCCLTRACE_BENCH_CACHE (default /tmp/nccltrace-bench-cache) and
# reused (writing 1,024 dumps takes minutes on two cores).
# Exit status: 0 when every benchmark ran (whatever the verdicts), 1 if one
# failed to run.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
quick=0
log=""
while [ $# -gt 0 ]; do
  case $1 in
    -C) build=$(realpath -m "$2"); shift 2 ;;
    --quick) quick=1; shift ;;
    --log) log=$2; shift 2 ;;
    *) echo "usage: bench/run.sh [-C BUILD_DIR] [--quick] [--log FILE]" >&2; exit 2 ;;
  esac
done
if [ ! -f "$build/build.ninja" ]; then
  # A fresh clone: install the build dependencies (Open MPI included, for
  # the strict-mode baseline) and configure the build directory.
  # shellcheck source=scripts/deps.sh
  (cd "$here" && . ./scripts/deps.sh && ntr_install_deps) || exit 1
  meson setup "$build" "$here" >/dev/null ||
    { echo "run.sh: meson setup $build failed" >&2; exit 1; }
fi
b=$build/bench
targets="bench/overhead bench/icount bench/plugin_cost bench/libminrec.so bench/scale/threads bench/scale/strict_bench bench/scale/dump_bench
  bench/scale/analyze_bench bench/scale/coord_bench bench/scale/agg_bench bench/scale/mem_bench
  bench/scale/graph_bench bench/scale/exec_bench
  tools/nccltrace interpose/libnccltrace.so examples/healthy tests/exchange/ntx_xrank"
[ -n "$(ls "$build"/bench/scale/mpi_allgather 2>/dev/null)" ] && targets="$targets bench/scale/mpi_allgather"
# shellcheck disable=SC2086
ninja -C "$build" $targets tests/emu/libnccl.so.2 tests/emu/libcudart.so.13 tests/emu/libcuda.so.1 >/dev/null ||
  { echo "run.sh: build failed" >&2; exit 1; }
lib=$build/interpose/libnccltrace.so
noop=$build/bench/noop
cache=${NCCLTRACE_BENCH_CACHE:-/tmp/nccltrace-bench-cache}
if [ -n "$log" ]; then
  out=$log
  : >"$out"
else
  out=$(mktemp /tmp/nccltrace-bench-run.XXXXXX)
fi
coord_pid=""
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  [ -n "$coord_pid" ] && kill "$coord_pid" 2>/dev/null && wait "$coord_pid" 2>/dev/null
  [ -z "$log" ] && rm -f "$out"
}
trap cleanup EXIT
failed=0

section() { printf '\n== %s (load %s)\n' "$1" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"; }
run() { # run CMD...: its output goes to the screen and the log
  "$@" 2>&1 | tee -a "$out"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "run.sh: '$*' exited $rc" | tee -a "$out"; failed=1; }
}
# overhead: the interposer's benchmark; its "added:" line becomes a row
overhead() { # NAME TARGET_NS RATIO_TARGET|- ENV...
  local name=$1 tgt=$2 rtgt=$3; shift 3
  local txt
  txt=$(env "$@" "$b/overhead" --calls "$calls" --rounds "$rounds" --minrec "$b/libminrec.so" "$lib" "$noop" 2>/dev/null)
  local rc=$?
  printf '%s\n' "$txt" | tee -a "$out"
  local added
  added=$(printf '%s\n' "$txt" | sed -n 's/^added: *\([-0-9.]*\).*/\1/p')
  if [ $rc -ne 0 ] || [ -z "$added" ]; then
    echo "FIGURE|$name|did not run|<= $tgt ns|FAIL" | tee -a "$out"; failed=1; return
  fi
  local v=FAIL
  awk -v a="$added" -v t="$tgt" 'BEGIN { exit !(a <= t) }' && v=PASS
  echo "FIGURE|$name|$added ns|<= $tgt ns|$v" | tee -a "$out"
  local ratio
  ratio=$(printf '%s\n' "$txt" | sed -n 's/^ratio: *\([0-9.]*\).*/\1/p')
  if [ -n "$ratio" ] && [ "$rtgt" != "-" ]; then
    v=FAIL
    awk -v a="$ratio" -v t="$rtgt" 'BEGIN { exit !(a <= t) }' && v=PASS
    echo "FIGURE|$name: x the minimal recorder (same run)|$ratio x|<= $rtgt x|$v" | tee -a "$out"
  fi
}

if [ $quick = 1 ]; then
  calls=500000; rounds=3; mcalls=10000000; mrounds=3; trounds=3; tcalls=300000; scalls=500; srounds=3
  ana="--ranks 16,64,256 --recs 2048 --big-ranks 256 --big-recs 65536 --reps 1"
  coordsecs=2; aggsecs=2; memrounds=1; glaunches=5000; grounds=3; brounds=5
else
  calls=2000000; rounds=7; mcalls=20000000; mrounds=5; trounds=5; tcalls=1000000; scalls=2000; srounds=5
  ana="--ranks 64,256,1024 --recs 4096 --big-ranks 1024 --big-recs 65536 --reps 3"
  coordsecs=4; aggsecs=4; memrounds=3; glaunches=20000; grounds=5; brounds=11
fi

printf 'nccltrace benchmarks on %s: %s CPUs, %s, %s\n' "$(hostname)" "$(nproc)" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(date -u '+%F %T UTC')" | tee -a "$out"

section "per-call overhead, check off (bench/overhead, no-op NCCL)"
overhead "added ns per collective call, check off" 25 1.5
section "per-call overhead, async check on (standalone coordinator)"
port=$((20000 + RANDOM % 20000))
NCCLTRACE_SECRET=nccltrace-bench-secret "$build/tools/nccltrace" coord --listen "127.0.0.1:$port" --quiet \
  >/dev/null 2>&1 &
coord_pid=$!
sleep 0.5
overhead "added ns per collective call, async check on" 40 1.5 NCCLTRACE_CHECK=async \
  NCCLTRACE_COORD="127.0.0.1:$port" NCCLTRACE_SECRET=nccltrace-bench-secret
kill "$coord_pid" 2>/dev/null; wait "$coord_pid" 2>/dev/null; coord_pid=""
section "per-call overhead, NCCLTRACE_STACKS=1"
overhead "added ns per collective call, NCCLTRACE_STACKS=1" 300 - NCCLTRACE_STACKS=1
section "per-call ns, NCCLTRACE_METRICS scraped every second vs off (bench/overhead --metrics, alternating)"
metrics_row() { # its "ratio:" line becomes a row; each child lives seconds, so it is scraped
  local txt r v=FAIL mport=$((20000 + RANDOM % 20000))
  txt=$("$b/overhead" --metrics "$mport" --calls "$mcalls" --rounds "$mrounds" "$lib" "$noop" 2>&1)
  local rc=$?
  printf '%s\n' "$txt" | tee -a "$out"
  r=$(printf '%s\n' "$txt" | sed -n 's/^ratio: *\([0-9.]*\).*/\1/p')
  if [ $rc -ne 0 ] || [ -z "$r" ]; then
    echo "FIGURE|ns per call, metrics scraped every 1 s / off (same run)|did not run|<= 1.05 x|FAIL" | tee -a "$out"; failed=1; return
  fi
  awk -v a="$r" 'BEGIN { exit !(a <= 1.05) }' && v=PASS
  echo "FIGURE|ns per call, metrics scraped every 1 s / off (same run)|$r x|<= 1.05 x|$v" | tee -a "$out"
}
metrics_row

section "instructions per call, calling thread (callgrind; bench/icount.sh)"
if command -v valgrind >/dev/null 2>&1; then
  "$here/bench/icount.sh" "$b/icount" "$noop" "$lib" "$b/libminrec.so" --budget 100 --budget-stacks 400 \
    --plugin "$b/plugin_cost" --metrics 0.5 2>&1 |
    tee -a "$out" | grep '^ICOUNT|' | awk -F'|' '{ printf "  %-40s %8s per call, %7s added, %5s x minrec\n", $2, $3, $4, $5 }'
else
  echo "FIGURE|instructions added per collective|valgrind missing|<= 100|INFO" | tee -a "$out"
fi

section "dlopen with and without the preload (bench/dlopen_cost, alternating processes)"
dlopen_row() { # medians of 5 alternating rounds; INFO: dlopen is never on a collective's path
  local d i u t uo un to tn
  d=$(mktemp -d /tmp/nccltrace-dlopen-cost.XXXXXX) || { failed=1; return; }
  uo=""; un=""; to=""; tn=""
  for i in 1 2 3 4 5; do
    u=$(env LD_LIBRARY_PATH="$build/tests/emu" "$b/dlopen_cost" --calls "$((calls / 50))" 2>/dev/null)
    t=$(env LD_LIBRARY_PATH="$build/tests/emu" LD_PRELOAD="$lib" NCCLTRACE_CHECK=off NCCLTRACE_RING_DIR="$d" \
      NCCLTRACE_DIR="$d" "$b/dlopen_cost" --calls "$((calls / 50))" 2>/dev/null)
    uo="$uo $(printf '%s\n' "$u" | sed -n 's/^other: //p')"; un="$un $(printf '%s\n' "$u" | sed -n 's/^nccl: //p')"
    to="$to $(printf '%s\n' "$t" | sed -n 's/^other: //p')"; tn="$tn $(printf '%s\n' "$t" | sed -n 's/^nccl: //p')"
  done
  rm -rf "$d"
  med() { printf '%s\n' $1 | sort -g | sed -n 3p; }
  if [ -z "$(med "$tn")" ] || [ -z "$(med "$un")" ]; then
    echo "FIGURE|ns per dlopen+dlclose|did not run|-|FAIL" | tee -a "$out"; failed=1; return
  fi
  echo "FIGURE|ns per dlopen+dlclose of libm, untraced / traced|$(med "$uo") / $(med "$to") ns|-|INFO" | tee -a "$out"
  echo "FIGURE|ns per dlopen+dlclose of libnccl, untraced / traced|$(med "$un") / $(med "$tn") ns|-|INFO" | tee -a "$out"
}
dlopen_row

section "profiler plugin per event beside the preload per call (bench/plugin_cost, one process)"
plugin_row() { # its "added:", "plugin event:" and "ratio:" lines become rows (INFO: no target yet)
  local txt a e r d
  d=$(mktemp -d /tmp/nccltrace-plugin-cost.XXXXXX) || { failed=1; return; }
  txt=$(env LD_LIBRARY_PATH="$noop" LD_PRELOAD="$lib" NCCLTRACE_CHECK=off NCCLTRACE_RING_DIR="$d" NCCLTRACE_DIR="$d" \
    "$b/plugin_cost" --calls "$((calls / 4))" 2>/dev/null)
  rm -rf "$d"
  printf '%s\n' "$txt" | tee -a "$out"
  a=$(printf '%s\n' "$txt" | sed -n 's/^added: *\([-0-9.]*\).*/\1/p')
  e=$(printf '%s\n' "$txt" | sed -n 's/^plugin event: *\([-0-9.]*\).*/\1/p')
  r=$(printf '%s\n' "$txt" | sed -n 's/^ratio: *\([-0-9.]*\).*/\1/p')
  if [ -z "$e" ]; then
    echo "FIGURE|ns per profiler-plugin event|did not run|-|FAIL" | tee -a "$out"; failed=1; return
  fi
  echo "FIGURE|ns per profiler-plugin event (proxy step: start, state, stop / 3)|$e ns|-|INFO" | tee -a "$out"
  echo "FIGURE|  beside: preload added ns per call, same run|$a ns|-|INFO" | tee -a "$out"
  echo "FIGURE|  plugin event / preload call, same run|$r x|-|INFO" | tee -a "$out"
}
plugin_row

section "Python call sites (bench/pysites.py: ctypes, drop-in, no-op NCCL)"
py_row() { # the "added known/new" lines of pysites.py become rows
  local txt k n v=FAIL
  txt=$(python3 "$here/bench/pysites.py" "$lib" "$noop" --calls "$((calls / 10))" --rounds "$rounds" 2>&1)
  printf '%s\n' "$txt" | tee -a "$out"
  k=$(printf '%s\n' "$txt" | sed -n 's/^added known: *\([-0-9.]*\).*/\1/p')
  n=$(printf '%s\n' "$txt" | sed -n 's/^added new: *\([-0-9.]*\).*/\1/p')
  if [ -z "$k" ]; then
    echo "FIGURE|added ns per call, Python call sites, known site|did not run|<= 150 ns|FAIL" | tee -a "$out"; failed=1; return
  fi
  awk -v a="$k" 'BEGIN { exit !(a <= 150) }' && v=PASS
  echo "FIGURE|added ns per call, Python call sites, known site|$k ns|<= 150 ns|$v" | tee -a "$out"
  echo "FIGURE|added ns per call, Python call sites, new site|$n ns|once per site|INFO" | tee -a "$out"
}
command -v python3 >/dev/null && py_row

section "CUDA graph launches, with and without NCCL calls in the graph (emulator; callgrind)"
run "$b/scale/graph_bench" --launches "$glaunches" --rounds "$grounds" --callgrind "$lib" "$build/tests/emu"

section "coordinator unreachable (blackhole route) from another host: NCCL call latency traced vs untraced (bench/hosts_block.py, namespaces, alternating)"
block_row() { # its "ratio" lines become rows; without root one line says why
  local txt rc r c v
  txt=$(python3 "$here/bench/hosts_block.py" "$lib" "$build/tests/emu" "$build/tests/exchange/ntx_xrank" \
    --rounds "$brounds" --calls 1000 2>&1)
  rc=$?
  printf '%s\n' "$txt" | tee -a "$out"
  if [ $rc -eq 3 ]; then
    echo "FIGURE|call latency, coordinator black-holed / untraced|$(printf '%s\n' "$txt" | sed -n 's/^cannot run: //p'): not run|<= 1.1 x|INFO" |
      tee -a "$out"
    return
  fi
  for c in strict async; do
    r=$(printf '%s\n' "$txt" | sed -n "s/^ratio $c \([0-9.]*\).*/\1/p")
    if [ $rc -ne 0 ] || [ -z "$r" ]; then
      echo "FIGURE|call latency, $c, coordinator black-holed / untraced|did not run|<= 1.1 x|FAIL" | tee -a "$out"
      failed=1; continue
    fi
    v=FAIL
    awk -v a="$r" 'BEGIN { exit !(a <= 1.1) }' && v=PASS
    echo "FIGURE|call latency, $c, coordinator black-holed / untraced (same run)|$r x|<= 1.1 x|$v" | tee -a "$out"
  done
  r=$(printf '%s\n' "$txt" | sed -n 's/^ratio off \([0-9.]*\).*/\1/p')
  [ -n "$r" ] && echo "FIGURE|  beside: check off / untraced, same calls|$r x|(info: the recorder alone)|INFO" | tee -a "$out"
}
if command -v python3 >/dev/null; then block_row; else
  echo "FIGURE|call latency, coordinator black-holed / untraced|python3 missing: not run|<= 1.1 x|INFO" | tee -a "$out"
fi

section "threads: 8 threads on their own communicators vs 1"
run "$b/scale/threads" --calls "$tcalls" --rounds "$trounds" "$lib"

section "strict mode, 8 local ranks, vs MPI_Allgather"
mpi=()
[ -x "$b/scale/mpi_allgather" ] && command -v mpirun >/dev/null && mpi=(--mpi-bin "$b/scale/mpi_allgather")
run "$b/scale/strict_bench" --calls "$scalls" --rounds "$srounds" "${mpi[@]}" "$lib" "$noop"

section "dump of a full default ring"
run "$b/scale/dump_bench"

section "analyze at scale"
# shellcheck disable=SC2086
run "$b/scale/analyze_bench" --nccltrace "$build/tools/nccltrace" --cache "$cache" $ana \
  --mem-cap-gib 6 --time-cap-s 120

section "coordinator throughput, 1,024 simulated ranks x 1,000 collectives/s"
run "$b/scale/coord_bench" --ranks 1024 --rate 1000 --seconds "$coordsecs"

section "node aggregators, 4,096 simulated ranks x 100 collectives/s, 8 ranks per host"
run "$b/scale/agg_bench" --ranks 4096 --per-host 8 --rate 100 --seconds "$aggsecs" --poll-ms 5
section "node aggregators, 4,096 simulated ranks x 100 collectives/s, 64 ranks per host"
run "$b/scale/agg_bench" --ranks 4096 --per-host 64 --rate 100 --seconds "$aggsecs" --poll-ms 5 --no-direct

section "exec of a program that never calls NCCL, with and without the preload"
run "$b/scale/exec_bench" --execs 500 --rounds "$srounds" "$lib"

section "memory per traced process"
run "$b/scale/mem_bench" --rounds "$memrounds" "$lib" "$noop" "$build/tests/emu" "$build/examples/healthy" 600

printf '\n== summary (load at the end %s)\n\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
grep '^FIGURE|' "$out" | awk -F'|' '
  { n++; f[n] = $2; m[n] = $3; t[n] = $4; v[n] = $5
    if (length($2) > wf) wf = length($2); if (length($3) > wm) wm = length($3); if (length($4) > wt) wt = length($4) }
  END {
    fmt = "| %-" wf "s | %-" wm "s | %-" wt "s | %-4s |\n"
    printf fmt, "figure", "measured", "target", "pass"
    sep = "|"; for (i = 0; i < wf + 2; i++) sep = sep "-"; sep = sep "|"
    for (i = 0; i < wm + 2; i++) sep = sep "-"; sep = sep "|"
    for (i = 0; i < wt + 2; i++) sep = sep "-"; sep = sep "|------|"
    print sep
    for (i = 1; i <= n; i++) printf fmt, f[i], m[i], t[i], v[i]
  }'
exit $failed
