#!/usr/bin/env bash
# demo.sh -- nccltrace in one command, no GPU needed: install the build
# dependencies if missing, build, then run a 4-rank job on the CPU emulator of
# CUDA/NCCL (tests/emu) in which rank 1 calls Broadcast where ranks 0, 2 and 3
# call AllReduce (collective #3).  The job hangs like a real one would; the
# launcher (examples/launch.sh, a tiny torchrun) kills it after a timeout.
# Then `nccltrace analyze` names the faulty rank, communicator, sequence
# number and field, and `nccltrace export --chrome` writes a Perfetto trace.
#
#   ./demo.sh [MESON SETUP OPTIONS]      e.g. ./demo.sh -Dcudahome=/opt/cuda
#
# Reuses ./build when it is configured, else sets up ./build-demo.
# NCCLTRACE_DEMO_BUILDDIR=DIR uses an already built DIR and skips the
# dependency check and the build (the test suite runs the demo that way).
# Exit status: 0 when the verdict is the expected one, 1 otherwise.
set -eu
cd "$(dirname "$0")"
src=$PWD

if [ -n "${NCCLTRACE_DEMO_BUILDDIR:-}" ]; then
  b=$NCCLTRACE_DEMO_BUILDDIR
else
  # shellcheck source=scripts/deps.sh
  . ./scripts/deps.sh
  ntr_install_deps
  b=build
  [ -f build/build.ninja ] || b=build-demo
  log=$(mktemp "${TMPDIR:-/tmp}/nccltrace-demo-build.XXXXXX")
  echo "== building in $b (log: $log)"
  # Only what the demo runs: the command, the interposer, the example, the emulator.
  if ! { { [ -f "$b/build.ninja" ] || meson setup "$b" "$@"; } &&
         ninja -C "$b" tools/nccltrace interpose/libnccltrace.so examples/faults \
           tests/emu/libnccl.so.2 tests/emu/libcudart.so.13 tests/emu/libcuda.so.1; } >"$log" 2>&1; then
    tail -40 "$log"
    echo "demo.sh: the build failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
fi
b=$(cd "$b" && pwd)
nccltrace=$b/tools/nccltrace

out=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-demo.XXXXXX")
dumps=$out/dumps
# The CPU emulator stands in for libcudart/libnccl; the example binary is the
# same one that runs on a GPU machine.
export LD_LIBRARY_PATH=$b/tests/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCLEMU_DEVICES=4 NCCLTRACE_JOB=demo-$$
export UNIQUE_ID_FILE=$out/unique-id
# launch.sh behaves like torchrun: after LAUNCH_TIMEOUT s it SIGTERMs the
# ranks still running, SIGKILLs them LAUNCH_GRACE s later.
export LAUNCH_TIMEOUT=5 LAUNCH_GRACE=2
unset NCCLEMU_FAULT NCCLTRACE_DISABLE NCCLTRACE_COORD

echo
echo "== running 4 ranks: rank 1 calls Broadcast where the others call AllReduce (collective #3)"
echo "   \$ nccltrace run --coord --check async --timeout 2 --dir $dumps \\"
echo "       -- examples/launch.sh 4 $b/examples/faults op --step 3 --rank 1"
# The full output goes to job.log; the lines worth reading are shown live.
# (The job is expected to fail: the launcher's timeout ends it.)
set +e
"$nccltrace" run --coord --check async --timeout 2 --dir "$dumps" --ring-dir "$out/rings" \
  -- "$src/examples/launch.sh" 4 "$b/examples/faults" op --step 3 --rank 1 2>&1 |
  tee "$out/job.log" | grep --line-buffered -E "injecting|coord: mismatch|^nccltrace: timeout: comm .* rank 0 |launch.sh:"
rc=${PIPESTATUS[0]}
set -e
echo "   (job exit status $rc; full output in $out/job.log)"

# Ranks that died without a dump leave their ring behind: turn it into one.
"$nccltrace" collect --rings "$out/rings" --dir "$dumps" >/dev/null 2>&1 || true

echo
echo "== nccltrace analyze $dumps"
# Exit status 1: a fault found (0 healthy, 2 unreadable input, 3 other jobs
# present; docs/analyze.md "Exit status").
arc=0
"$nccltrace" analyze "$dumps" || arc=$?
"$nccltrace" analyze --json "$dumps" >"$out/verdict.json" || [ $? = $arc ]
echo "   (analyze exit status $arc: 1 means a fault was found)"
"$nccltrace" export --chrome "$dumps" -o "$out/trace.json" 2>/dev/null

echo
verdict=$(python3 - "$out/verdict.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))["verdict"]
print("verdict: %s, faulty rank(s) %s, comm %s, seq %s, field %s" % (
    v.get("class"), ",".join(map(str, v.get("ranks", []))), v.get("comm"), v.get("seq"), v.get("field")))
EOF
)
echo "== $verdict"
echo "   dumps:           $dumps/ ($(find "$dumps" -type f | wc -l) files; nccltrace decode FILE shows one)"
echo "   verdict as JSON: $out/verdict.json"
echo "   Perfetto trace:  $out/trace.json (open in https://ui.perfetto.dev or chrome://tracing)"
case $verdict in
  "verdict: collective_mismatch, faulty rank(s) 1, comm "*", seq 3, field op") [ $arc = 1 ] && exit 0 ;;
  *) echo "demo.sh: unexpected verdict (expected collective_mismatch of rank 1 at seq 3, field op)" >&2; exit 1 ;;
esac
