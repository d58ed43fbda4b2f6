#!/usr/bin/env bash
# gpu-check.sh -- check nccltrace against the REAL NCCL and CUDA driver on a
# GPU machine, in under 5 minutes.  Builds into ./build-gpu, then:
#   1. healthy.c, 1 rank per GPU (up to 4): verdict healthy, and completion
#      tracked by real CUDA events (last_completed == last_enqueued);
#   2. 1-rank faults every machine can run: exit 42 (rank_exit), ncclCommAbort
#      (app_abort), SIGSEGV (rank_crash, with a backtrace);
#   3. with 2+ GPUs: op mismatch between ranks on different GPUs
#      (collective_mismatch, field op) -- on 1 GPU this is skipped: NCCL
#      refuses two ranks of one communicator on the same GPU, so cross-rank
#      faults on 1 GPU are only testable on the emulator (meson test);
#   4. a 1-GPU torchrun job (examples/torch/train.py) when torch is
#      installed: verdict healthy;
#   4b. examples/graph.c, 1 rank per GPU (up to 4): the torch.cuda.graph
#      pattern (eager AllReduces in flight, a global-mode capture of an
#      AllReduce held 300 ms, 50 replays checked) against the real CUDA
#      capture rules: the job passes, the verdict is healthy, and the exit
#      dumps show 50 completed graph replays per rank;
#   5. the per-call overhead of the tracer on the real libnccl
#      (bench/overhead: 1-rank in-place AllReduce, which NCCL completes on
#      the host, so the difference is the tracer's own cost plus its CUDA
#      event record).
# Each check prints PASS, FAIL or SKIP.
#   examples/gpu-check.sh [MESON SETUP OPTIONS]     e.g. -Dcudahome=/usr/local/cuda
#   examples/gpu-check.sh --emulator BUILDDIR       the same checks on the CPU
#       emulator of an existing build, as if it had NCCLEMU_DEVICES (default 2)
#       GPUs: how the test suite keeps this script honest without a GPU
#   examples/gpu-check.sh --build BUILDDIR          the checks on the GPUs with
#       an existing build (meson test --suite gpu runs this)
# Exit: 0 no FAIL, 1 a FAIL, 77 no GPU (or no real libnccl.so.2).
set -eu
cd "$(dirname "$0")/.."
src=$PWD
cuda=${CUDA_HOME:-/usr/local/cuda}
emu=""
prebuilt=""
if [ "${1:-}" = "--build" ]; then
  if [ $# != 2 ] || [ ! -f "$2/build.ninja" ]; then echo "usage: $0 --build BUILDDIR" >&2; exit 2; fi
  prebuilt=$(cd "$2" && pwd)
  shift 2
fi
if [ "${1:-}" = "--emulator" ]; then
  if [ $# != 2 ] || [ ! -d "$2/tests/emu" ]; then echo "usage: $0 --emulator BUILDDIR" >&2; exit 2; fi
  b=$(cd "$2" && pwd)
  emu=$b/tests/emu
  for f in tools/nccltrace interpose/libnccltrace.so examples/healthy examples/faults examples/graph bench/overhead; do
    [ -e "$b/$f" ] || { echo "SKIP: $b/$f is not built"; exit 77; }
  done
  export NCCLEMU_DEVICES=${NCCLEMU_DEVICES:-2}
  ngpu=$NCCLEMU_DEVICES
  nccl_dir=$emu
  echo "== emulator mode: $ngpu emulated GPU(s), NCCL = $emu"
else
  if ! command -v nvidia-smi >/dev/null || ! ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU '); then
    ngpu=0
  fi
  [ "$ngpu" -ge 1 ] || { echo "SKIP: no NVIDIA GPU here (nvidia-smi -L lists none); run meson test for the emulator"; exit 77; }
  # The real NCCL: NCCL_LIB_DIR, the CUDA toolkit, the loader cache, pip's wheel.
  nccl_dir=${NCCL_LIB_DIR:-}
  for d in "$cuda/lib" "$cuda/lib64" \
           "$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}' | xargs -r dirname)" \
           "$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null)"; do
    [ -n "$nccl_dir" ] && break
    [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && nccl_dir=$d
  done
  [ -n "$nccl_dir" ] || { echo "SKIP: no real libnccl.so.2 found (set NCCL_LIB_DIR)"; exit 77; }
  echo "== $ngpu GPU(s); real NCCL in $nccl_dir"
fi

if [ -n "$prebuilt" ]; then
  b=$prebuilt
elif [ -z "$emu" ]; then
  # shellcheck source=scripts/deps.sh
  . ./scripts/deps.sh
  ntr_install_deps
  b=$src/build-gpu
  [ -f "$b/build.ninja" ] || meson setup "$b" "$@" >/dev/null
  ninja -C "$b" tools/nccltrace interpose/libnccltrace.so examples/healthy examples/faults examples/graph \
    bench/overhead >/dev/null
fi
nt=$b/tools/nccltrace
# The NCCL under test first (the real one; the emulator only with --emulator).
# PyTorch keeps the loader path it came with: it brings its own NCCL.
orig_ldpath=${LD_LIBRARY_PATH:-}
if [ -n "$emu" ]; then
  export LD_LIBRARY_PATH=$emu
else
  export LD_LIBRARY_PATH=$nccl_dir:$cuda/lib:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
unset NCCLEMU_FAULT NCCLTRACE_DISABLE
out=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-gpu.XXXXXX")
fails=0

# verdict DIR CLASS [KEY=VALUE...]: analyze --json DIR and compare.
verdict() {
  local d=$1; shift
  "$nt" collect --rings "$d/rings" --dir "$d/dumps" >/dev/null 2>&1 || true
  "$nt" analyze --json "$d/dumps" >"$d/verdict.json" 2>"$d/analyze.err" || true
  python3 - "$d/verdict.json" "$@" <<'EOF'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit("no verdict (%s)" % e)
v = doc["verdict"]
bad = [] if v.get("class") == sys.argv[2] else ["class %s, want %s" % (v.get("class"), sys.argv[2])]
for kv in sys.argv[3:]:
    k, want = kv.split("=", 1)
    if k == "completed":   # every member completed everything it enqueued
        for c in doc.get("comms", []):
            for m in c.get("members", []):
                if m.get("last_completed") != m.get("last_enqueued"):
                    bad.append("comm %s rank %s: last_completed %s != last_enqueued %s" % (
                        c["id"], m["rank"], m.get("last_completed"), m.get("last_enqueued")))
    elif str(v.get(k)) != want:
        bad.append("%s %s, want %s" % (k, v.get(k), want))
print("   " + v.get("summary", ""))
sys.exit("   " + "; ".join(bad) if bad else 0)
EOF
}

# check NAME NRANKS DEADLINE_S CLASS [KEY=VALUE...] -- PROGRAM ARGS: launch
# (the tracer's timeout is 5 s; the launcher kills what is left at DEADLINE_S),
# then the verdict.
check() {
  local name=$1 n=$2 deadline=$3; shift 3
  local want=()
  while [ "$1" != "--" ]; do want+=("$1"); shift; done
  shift
  local d=$out/$name
  mkdir -p "$d"
  echo "== $name ($n rank(s)): $*"
  UNIQUE_ID_FILE=$d/uid LAUNCH_TIMEOUT=$deadline LAUNCH_GRACE=5 NCCLTRACE_JOB=gpu-$name-$$ \
    "$nt" run --timeout 5 --dir "$d/dumps" --ring-dir "$d/rings" -- \
    "$src/examples/launch.sh" "$n" "$@" >"$d/job.log" 2>&1 || true
  if verdict "$d" "${want[@]}"; then echo "   PASS"; else echo "   FAIL (log: $d/job.log)"; fails=$((fails + 1)); fi
}

n=$(( ngpu < 4 ? ngpu : 4 ))
check healthy "$n" 60 healthy completed=1 -- "$b"/examples/healthy 20
check exit42 1 30 rank_exit exit_code=42 ranks=[0] -- "$b"/examples/faults exit42 --rank 0 --step 3
check abort 1 30 app_abort ranks=[0] -- "$b"/examples/faults abort --rank 0 --step 3
check segv 1 30 rank_crash signal=11 ranks=[0] -- "$b"/examples/faults segv --rank 0 --step 3
if [ "$ngpu" -ge 2 ]; then
  # The mismatched Broadcast/AllReduce really hangs on the GPUs; the tracer
  # dumps after 5 s, the launcher kills the ranks after 12 s.
  check op_mismatch "$n" 12 collective_mismatch field=op seq=3 -- "$b"/examples/faults op --rank 1 --step 3
else
  echo "== op_mismatch: SKIP (1 GPU: NCCL refuses two ranks of one communicator on one GPU)"
fi

# CUDA graphs: the capture must survive the tracer, every replay be seen.
check graph "$n" 60 healthy completed=1 -- "$b"/examples/graph 50
reps=0
for f in "$out"/graph/dumps/*exit.zst; do
  [ -e "$f" ] && reps=$((reps + $("$nt" decode "$f" | grep -c 'GraphLaunch(graph .*completed')))
done
if [ "$reps" = $((50 * n)) ]; then echo "   graph replays: $reps completed (50 per rank): PASS"
else echo "   graph replays: $reps completed, want $((50 * n)): FAIL"; fails=$((fails + 1)); fi

echo "== torchrun, 1 GPU: examples/torch/train.py"
if [ -n "$emu" ]; then
  echo "   SKIP: PyTorch does not run on the emulator"
elif python3 -c 'import torch, torch.distributed' 2>/dev/null && command -v torchrun >/dev/null; then
  d=$out/torchrun
  mkdir -p "$d"
  LD_LIBRARY_PATH=$orig_ldpath timeout -k 10 120 "$nt" run --timeout 30 --dir "$d/dumps" --ring-dir "$d/rings" -- \
    torchrun --nproc-per-node 1 --master-port $((29500 + $$ % 300)) "$src/examples/torch/train.py" --steps 20 \
    >"$d/job.log" 2>&1 || echo "   torchrun exited non-zero (log: $d/job.log)"
  if verdict "$d" healthy completed=1; then echo "   PASS"; else echo "   FAIL (log: $d/job.log)"; fails=$((fails + 1)); fi
else
  echo "   SKIP: torch or torchrun not installed"
fi

echo "== overhead on the real NCCL (bench/overhead, 1-rank in-place AllReduce)"
ov=(--calls 20000 --rounds 3)
[ -z "$emu" ] || ov=(--calls 1000 --rounds 1)   # the emulator's NCCL is slow; only the plumbing is checked
if timeout 120 "$b"/bench/overhead "${ov[@]}" "$b/interpose/libnccltrace.so" "$nccl_dir" \
     >"$out/overhead.txt" 2>&1; then
  sed 's/^/   /' "$out/overhead.txt"
else
  sed 's/^/   /' "$out/overhead.txt"; echo "   FAIL"; fails=$((fails + 1))
fi

if [ -n "$emu" ] && [ $fails = 0 ]; then
  rm -rf "$out"   # a test run: nothing to look at
else
  echo "== evidence kept in $out"
fi
[ $fails = 0 ] && echo "gpu-check: all checks passed" && exit 0
echo "gpu-check: $fails check(s) failed"
exit 1
