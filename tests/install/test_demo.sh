#!/usr/bin/env bash
# test_demo.sh -- demo.sh on an already built tree (no dependency check, no
# build): it must finish, exit 0, and print the verdict naming the faulty
# rank, the communicator, the sequence number and the field, the live
# mismatch line from the coordinator, analyze's exit status 1 (a fault
# found), and where the dumps and trace went.
#   test_demo.sh DEMO_SH BUILD_ROOT        Exit: 0 pass, 1 fail, 77 skip.
set -eu
demo=$1 build=$2
[ -x "$build/examples/faults" ] || { echo "SKIP: $build/examples/faults not built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-demo-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rc=0
TMPDIR=$tmp NCCLTRACE_DEMO_BUILDDIR=$build timeout 80 "$demo" >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
fail=0
[ $rc = 0 ] || { echo "FAIL: demo.sh exited $rc"; fail=1; }
for want in "verdict: collective_mismatch, faulty rank(s) 1, comm [0-9a-f]*, seq 3, field op" \
            "coord: mismatch on comm [0-9a-f]* seq 3 field op: rank 1 Broadcast" \
            "dumps: .*/dumps/" "Perfetto trace: .*/trace.json" "(analyze exit status 1: "; do
  grep -q -- "$want" "$tmp/out" || { echo "FAIL: no line matching '$want'"; fail=1; }
done
f=$(grep -o 'Perfetto trace: *[^ ]*' "$tmp/out" | awk '{print $3}')
[ -s "${f:-/nonexistent}" ] || { echo "FAIL: trace file '${f:-}' missing or empty"; fail=1; }
exit $fail
