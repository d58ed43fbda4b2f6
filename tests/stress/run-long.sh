#!/usr/bin/env bash
# run-long.sh BUILDDIR [TRIALS] -- the long reliability runs of tests/stress:
# TRIALS (default 200) SIGKILL trials of a traced 4-rank, 3-thread run, then
# the fast stress suite once more, and print the figures (FIGURE lines) that
# docs/reliability.md reports.  Exit 0 when every run passed.
#
#   tests/stress/run-long.sh build            # ~5 min on 2 cores
#   STRESS_SEED=42 tests/stress/run-long.sh build 50
set -u
b=${1:?usage: run-long.sh BUILDDIR [TRIALS]}
trials=${2:-200}
src=$(cd "$(dirname "$0")/../.." && pwd)
b=$(cd "$b" && pwd) || exit 2
export STRESS_LIB=$b/interpose/libnccltrace.so STRESS_TOOL=$b/tools/nccltrace \
  STRESS_EMU=$b/tests/emu STRESS_PROG=$b/tests/stress/stress_prog \
  STRESS_DL_LIB=$b/tests/stress/libstress_dl.so STRESS_SANITIZE=none STRESS_SRC=$src
export STRESS_SEED=${STRESS_SEED:-$(date +%s)}
ninja -C "$b" >/dev/null || { echo "run-long.sh: build failed" >&2; exit 2; }
echo "== $trials SIGKILL trials (seed $STRESS_SEED)"
start=$(date +%s)
python3 "$src/tests/stress/stress.py" kill "$trials"; rc=$?
echo "== took $(( $(date +%s) - start )) s, exit $rc"
echo "== fast stress suite"
meson test -C "$b" --no-rebuild --suite stress --print-errorlogs || rc=1
exit $rc
