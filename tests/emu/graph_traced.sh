#!/bin/sh
# graph_traced.sh LAUNCH PROG EMU_LIBDIR TRACER_LIB [RANKS]
# The torch.cuda.graph pattern (examples/graph.c) on the emulator, which
# enforces CUDA's capture-interaction rules: it must pass untraced, and
# traced with the default settings (libnccltrace.so preloaded, a coordinator
# found through MASTER_ADDR/MASTER_PORT, so the async check is on).  A tracer
# thread that makes a potentially unsafe CUDA call in global mode during the
# 300 ms capture invalidates it: the program then exits 1.
launch=$1 prog=$2 emu=$3 lib=$4 n=${5:-3}
for f in "$launch" "$prog" "$lib"; do
  [ -e "$f" ] || { echo "SKIP: missing $f"; exit 77; }
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$emu NCCLEMU_DEVICES=8 LAUNCH_TIMEOUT=60 LAUNCH_GRACE=2
unset NCCLEMU_FAULT NCCLTRACE_CHECK
fail=0
run() {   # run NAME [ENV...]: launch the ranks, check every rank's last line
  name=$1; shift
  env "$@" "$launch" "$n" "$prog" > "$tmp/$name.out" 2> "$tmp/$name.err"
  rc=$?
  ok=$(grep -c "replays checked" "$tmp/$name.out")
  if [ $rc -ne 0 ] || [ "$ok" -ne "$n" ]; then
    echo "FAIL: $name: launcher exit $rc, $ok of $n ranks done"
    sed 's/^/  | /' "$tmp/$name.err" | tail -20
    fail=1
  else
    echo "ok: $name: $n ranks, capture held 300 ms, replays checked"
  fi
}
run untraced
port=$(( 20000 + $$ % 20000 ))
run traced LD_PRELOAD="$lib" NCCLTRACE_DIR="$tmp/dumps" NCCLTRACE_RING_DIR="$tmp/rings" \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NCCLTRACE_JOB="graph-traced-$$"
exit $fail
