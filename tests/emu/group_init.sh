#!/bin/sh
# group_init.sh PROG EMU_LIBDIR TRACER_LIB NCCLTRACE
# nccl-tests' -g shape (group_init.c): four inits of one communicator from
# one thread inside one group.  Untraced and traced, blocking and
# nonblocking, it must finish (within the test's timeout: the emulator
# once joined each init at once and hung) with correct sums; traced, the
# evidence holds one communicator of 4 ranks in one process, healthy.
prog=$1 emu=$2 lib=$3 nccltrace=$4
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$emu NCCLEMU_DEVICES=8
unset NCCLEMU_FAULT NCCLTRACE_CHECK
fail=0
for mode in blocking nonblocking; do
  if timeout 30 "$prog" 4 "$mode" >"$tmp/u.out" 2>&1 && grep -q "4 ranks ok" "$tmp/u.out"; then
    echo "ok: untraced $mode"
  else
    echo "FAIL: untraced $mode"; sed 's/^/  | /' "$tmp/u.out"; fail=1
  fi
  d=$tmp/$mode
  if timeout 30 env LD_PRELOAD="$lib" NCCLTRACE_DIR="$d/dumps" NCCLTRACE_RING_DIR="$d/rings" \
       NCCLTRACE_JOB="group-init-$$-$mode" "$prog" 4 "$mode" >"$tmp/t.out" 2>&1 && grep -q "4 ranks ok" "$tmp/t.out"; then
    echo "ok: traced $mode"
  else
    echo "FAIL: traced $mode"; sed 's/^/  | /' "$tmp/t.out"; fail=1
  fi
  "$nccltrace" analyze --json "$d/dumps" >"$tmp/v.json" 2>"$tmp/v.err"
  if python3 - "$tmp/v.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["comms"]
ok = j["verdict"]["class"] == "healthy" and len(c) == 1 and c[0]["nranks"] == 4 \
    and sorted(m["rank"] for m in c[0]["members"]) == [0, 1, 2, 3] and len({m["pid"] for m in c[0]["members"]}) == 1
print("   verdict %s, comms %s" % (j["verdict"]["class"], [(x["nranks"], [m["rank"] for m in x["members"]]) for x in c]))
sys.exit(0 if ok else 1)
PY
  then echo "ok: traced $mode: one comm of 4 ranks in one process, healthy"
  else echo "FAIL: traced $mode evidence"; cat "$tmp/v.err"; fail=1
  fi
done
exit $fail
