#!/usr/bin/env bash
# run_all.sh -- every case of faults.py under torchrun with nccltrace, on a
# machine with 3 or more GPUs, each checked against the verdict its comment
# in faults.py promises (`nccltrace analyze --json`).  About 5 minutes: the
# hanging cases end at PyTorch's watchdog (30 s) or, for lazy_skip, at this
# script's deadline (60 s).
#
#   examples/torch/run_all.sh [CASE...]
#   NCCLTRACE=build/tools/nccltrace NPROC=4 examples/torch/run_all.sh op skip
#   WRAP=build/tests/emu/emu-run examples/torch/run_all.sh   # on the CPU emulator
#
# WRAP is a command that runs its arguments on another CUDA (the emulator's
# launcher preloads its libraries, docs/emulator.md); OUT keeps the evidence
# there instead of a new temporary directory.  PG_TIMEOUT (default 30) is
# PyTorch's work timeout, DEADLINE (60) the scheduler's for each case, in
# seconds; TIMEOUT (10) is nccltrace's, below PG_TIMEOUT.
# Exit: 0 all as expected, 1 a verdict differed, 77 no torch or < 3 GPUs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nccltrace=${NCCLTRACE:-nccltrace}
command -v "$nccltrace" >/dev/null || { echo "no nccltrace command (set NCCLTRACE=path)" >&2; exit 1; }
command -v torchrun >/dev/null || { echo "SKIP: torchrun not found"; exit 77; }
wrap=${WRAP:-}
# shellcheck disable=SC2086  # WRAP may be a command with arguments
ngpu=$($wrap python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
nproc=${NPROC:-$(( ngpu < 4 ? ngpu : 4 ))}
[ "$nproc" -ge 3 ] || { echo "SKIP: $ngpu GPU(s); the fault cases need 3 (NPROC)"; exit 77; }

# case  class[|alternative]  field  seq  ranks   ("-": not checked)
expect='
healthy    healthy                  -      -  -
op         collective_mismatch      op     2  1
shape      collective_mismatch      count  2  1
order      collective_mismatch      op     2  1
skip       missing_collective       -      2  1
lazy_skip  init_hang                -      -  1
exit42     rank_exit                -      -  1
app_error  rank_exit|app_abort      -      -  1
abort      app_abort                -      -  1
'
cases=${*:-$(echo "$expect" | awk 'NF {print $1}')}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-torch.XXXXXX")}
pg_timeout=${PG_TIMEOUT:-30} deadline=${DEADLINE:-60} trace_timeout=${TIMEOUT:-10}

# torchrun starts each worker in a session of its own: a worker the
# deadline orphaned outlives the launcher.  Each case's processes carry a
# tag in their environment, and whatever still carries it is ended.
end_case() { # tag
  for e in /proc/[0-9]*/environ; do
    if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "NCCLTRACE_RUN_ALL_TAG=$1"; then
      p=${e#/proc/}; kill -KILL "${p%/environ}" 2>/dev/null || true
    fi
  done
}
fail=0
for c in $cases; do
  line=$(echo "$expect" | awk -v c="$c" '$1 == c')
  [ -n "$line" ] || { echo "unknown case $c" >&2; exit 1; }
  d=$out/$c
  mkdir -p "$d"
  # A free MASTER_PORT whose +17 (nccltrace's coordinator) is free too: a
  # fixed port collides with whatever else this machine runs.
  port=$(python3 -c '
import socket
for _ in range(200):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    try:
        b = socket.socket(); b.bind(("127.0.0.1", p + 17)); b.close(); a.close(); print(p); break
    except OSError:
        a.close()
' 2>/dev/null) || port=$((29600 + RANDOM % 2000))
  echo "== $c"
  # The deadline plays the job scheduler: it ends what the watchdog does not
  # (lazy_skip waits in communicator init, which no work timeout covers).
  # shellcheck disable=SC2086
  tag=$$-$c
  # PyTorch's Flight Recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE or
  # TORCH_FR_BUFFER_SIZE): its dumps of this case go next to ours.
  if [ -n "${TORCH_NCCL_TRACE_BUFFER_SIZE:-}${TORCH_FR_BUFFER_SIZE:-}" ]; then
    mkdir -p "$d/torch-fr"
    export TORCH_FR_DUMP_TEMP_FILE="$d/torch-fr/rank_"
  fi
  NCCLTRACE_RUN_ALL_TAG=$tag timeout -k 10 "$deadline" "$nccltrace" run --timeout "$trace_timeout" \
    --dir "$d/dumps" --ring-dir "$d/rings" -- \
    $wrap torchrun --nproc-per-node "$nproc" --master-port "$port" --rdzv-id "nccltrace-$tag" "$here/faults.py" "$c" --pg-timeout "$pg_timeout" \
    >"$d/job.log" 2>&1 || true
  end_case "$tag"
  "$nccltrace" collect --rings "$d/rings" --dir "$d/dumps" >/dev/null 2>&1 || true
  "$nccltrace" analyze --json "$d/dumps" >"$d/verdict.json" 2>"$d/analyze.err" || true
  # shellcheck disable=SC2086  # $line is five words
  if python3 - "$d/verdict.json" $line <<'EOF'
import json, sys
f, case, cls, field, seq, ranks = sys.argv[1:]
try:
    v = json.load(open(f))["verdict"]
except Exception as e:
    sys.exit("   no verdict: %s" % e)
bad = []
if v.get("class") not in cls.split("|"): bad.append("class %s, want %s" % (v.get("class"), cls))
if field != "-" and v.get("field") != field: bad.append("field %s, want %s" % (v.get("field"), field))
if seq != "-" and v.get("seq") != int(seq): bad.append("seq %s, want %s" % (v.get("seq"), seq))
if ranks != "-" and v.get("ranks") != [int(r) for r in ranks.split(",")]:
    bad.append("ranks %s, want %s" % (v.get("ranks"), ranks))
print("   " + v.get("summary", ""))
sys.exit("   FAIL: " + "; ".join(bad) if bad else 0)
EOF
  then echo "   ok"; else fail=1; echo "   (log: $d/job.log)"; fi
done
echo "evidence kept in $out"
exit $fail
