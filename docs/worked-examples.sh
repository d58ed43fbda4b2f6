#!/usr/bin/env bash
# docs/worked-examples.sh BUILD_DIR -- regenerate docs/worked-examples.md:
# run three faults on the CPU emulator (op mismatch, SIGKILL, stall) with the
# tracer and paste `nccltrace analyze`'s text report of each.
set -eu
B=$(cd "${1:?usage: docs/worked-examples.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
out=$src/docs/worked-examples.md

run_case() { # name fault-args env: runs the job in a fresh dir, prints the dir
  local name=$1 args=$2 extra=$3 d
  d=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-example.XXXXXX")
  (
    cd "$d"
    export LD_LIBRARY_PATH=$B/tests/emu NCCLTRACE_DIR=$d/dumps NCCLTRACE_RING_DIR=$d/rings
    export NCCLTRACE_TIMEOUT=1 LAUNCH_TIMEOUT=4 NCCLTRACE_JOB=example-$name
    [ -z "$extra" ] || export "${extra?}"
    # shellcheck disable=SC2086
    "$B/tools/nccltrace" run -- "$src/examples/launch.sh" 4 "$B/examples/faults" $args >job.log 2>&1 || true
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
`op_mismatch`, `sigkill`, `stall`). Common setup:

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
