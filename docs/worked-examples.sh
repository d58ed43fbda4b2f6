#!/usr/bin/env bash
# docs/worked-examples.sh BUILD_DIR [OUT] -- regenerate docs/worked-examples.md
# (or write OUT): run three faults on the CPU emulator (op mismatch, SIGKILL,
# stall) with the tracer and paste `nccltrace analyze`'s text report of each.
#   FAULTS=PROG   the faults program (default BUILD_DIR/examples/faults)
#
# docs/worked-examples.sh --normalize FILE -- print FILE with what differs
# from run to run made uniform, so that two generations compare equal when
# the code's behaviour is the same (tests/docs: docs_worked_examples
# regenerates into a temporary directory and fails when the checked-in page
# differs from it after this).  What is normalized, and why:
#   +1.234567s (evidence times)          -> +T      wall-clock timing
#   16- and 8-hex-digit communicator ids -> COMM, COMM8  derived from random unique ids
#   "pid N", the table's pid column      -> PID     the kernel's pids
#   the table's host column, "pid N on H" -> HOST   the machine's name
#   runs of spaces                       -> one     column widths follow the above
#   the lines of each "evidence" block are sorted: ranks interleave by timing
#   (each rank's own lines keep their order in the page itself).
# Everything else -- verdict text, states, seqs, ops, counts, next steps,
# input counts -- must be identical.
set -eu
if [ "${1:-}" = "--normalize" ]; then
  export LC_ALL=C # sort order and \b as bytes, on every machine
  f=${2:?usage: docs/worked-examples.sh --normalize FILE}
  sed -E -e 's/\+[0-9]+\.[0-9]+s/+T/g' \
         -e 's/\b[0-9a-f]{16}\b/COMM/g' -e 's/comm [0-9a-f]{8}\b/comm COMM8/g' \
         -e 's/\bpid [0-9]+ on [^ ;),]+/pid PID on HOST/g' -e 's/\bpid [0-9]+/pid PID/g' \
         -e 's/^(  [0-9]+ +)[^ ]+ +[0-9]+ /\1HOST PID /' \
         -e 's/  +/ /g' "$f" |
    awk '/^evidence \(oldest first\):$/ { print; ev = 1; n = 0; next }
         ev && $0 == "" { flush(); ev = 0; print; next }
         ev { buf[n++] = $0; next }
         { print }
         function flush(  i, j, t) {  # insertion sort: portable awk, small blocks
           for (i = 1; i < n; i++) { t = buf[i]; for (j = i - 1; j >= 0 && buf[j] > t; j--) buf[j + 1] = buf[j]; buf[j + 1] = t }
           for (i = 0; i < n; i++) print buf[i]
         }
         END { if (ev) flush() }'
  exit 0
fi
B=$(cd "${1:?usage: docs/worked-examples.sh BUILD_DIR [OUT]}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$src/docs/worked-examples.md}
faults=${FAULTS:-$B/examples/faults}
case $faults in /*) ;; *) faults=$PWD/$faults ;; esac # the jobs run in their own directories

run_case() { # name fault-args env: runs the job in a fresh dir, prints the dir
  local name=$1 args=$2 extra=$3 d
  d=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-example.XXXXXX")
  (
    cd "$d"
    export LD_LIBRARY_PATH=$B/tests/emu NCCLTRACE_DIR=$d/dumps NCCLTRACE_RING_DIR=$d/rings
    export NCCLTRACE_TIMEOUT=1 LAUNCH_TIMEOUT=4 NCCLTRACE_JOB=example-$name
    [ -z "$extra" ] || export "${extra?}"
    # shellcheck disable=SC2086
    "$B/tools/nccltrace" run -- "$src/examples/launch.sh" 4 "$faults" $args >job.log 2>&1 || true
    "$B/tools/nccltrace" collect --rings rings --dir dumps >collect.log 2>&1 || true
    "$B/tools/nccltrace" analyze dumps >analyze.txt 2>&1 || true
  )
  echo "$d"
}

section() { # title text commands dir
  printf '## %s\n\n%s\n\n```\n%s\nnccltrace analyze dumps/\n```\n\n```\n' "$1" "$2" "$3"
  sed -e "s#$4#.#g" "$4/analyze.txt"
  printf '```\n\n'
  rm -rf "$4"
}

d1=$(run_case op_mismatch "op --step 3 --rank 1" "")
d2=$(run_case sigkill "sigkill --step 3 --rank 2" "")
d3=$(run_case stall "none --step 5" "NCCLEMU_FAULT=stall:3")
{
  cat <<'HDR'
# Worked examples: three `nccltrace analyze` reports

Each report below was produced by the current code on the CPU emulator
(`tests/emu`) by `docs/worked-examples.sh BUILD_DIR`, which runs the commands
shown (`B` is the build directory; `examples/faults` is `examples/faults.c`).
They are the faults the scenario tests assert (`tests/scenarios/meson.build`:
`op_mismatch`, `sigkill`, `stall`). The test `docs_worked_examples`
(`tests/docs/`, suite `fast`) regenerates this page and fails when it differs
from this copy in anything but pids, host names, communicator ids, times and
the interleaving of ranks (the script's `--normalize` says how). Common setup:

```
export LD_LIBRARY_PATH=$B/tests/emu NCCLTRACE_DIR=$PWD/dumps NCCLTRACE_RING_DIR=$PWD/rings
export NCCLTRACE_TIMEOUT=1 LAUNCH_TIMEOUT=4      # short watchdog; the launcher kills after 4 s like torchrun
```

HDR
  section "A collective mismatch" \
    "Rank 1 calls Broadcast where the others call AllReduce (collective #3). The job hangs; the watchdog dumps after 1 s; the launcher SIGTERMs everyone at 4 s. The verdict names the rank, the communicator, the seq and the field; the SIGTERMs are listed as what they are, effects." \
    'nccltrace run -- examples/launch.sh 4 $B/examples/faults op --step 3 --rank 1' "$d1"
  section "A rank killed with SIGKILL" \
    "Rank 2 SIGKILLs itself at step 3, as the OOM killer would: no handler runs, no dump is written. Its ring file survives in NCCLTRACE_RING_DIR and \`nccltrace collect\` turns it into a dump. The verdict: rank 2 vanished, and the others then waited for it." \
    "nccltrace run -- examples/launch.sh 4 \$B/examples/faults sigkill --step 3 --rank 2
nccltrace collect --rings rings --dir dumps" "$d2"
  section "A stall" \
    "Every rank issues the same AllReduce #3 and it never completes (\`NCCLEMU_FAULT=stall:3\`, standing for a stuck kernel or a dead link). Nobody disagrees and nobody died: a stall at seq 3 on every rank." \
    'NCCLEMU_FAULT=stall:3 nccltrace run -- examples/launch.sh 4 $B/examples/faults none --step 5' "$d3"
} >"$out"
echo "wrote $out"
