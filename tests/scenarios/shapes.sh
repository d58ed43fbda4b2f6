#!/bin/sh
# shapes.sh SHAPE NRANKS PROG LAUNCH NCCLTRACE LIB EMU_LIBDIR
# Acceptance (#18): a program in the shape of NVIDIA's NCCL examples runs on
# the emulator untraced and traced with the same output (lines sorted:
# ranks are processes or threads printing concurrently), and its evidence
# analyzes as healthy.  SHAPE multidev|pthread run as one process; mpi under
# mpirun (Debian's openmpi); the rest under launch.sh, one device per rank.
# Exit 0 pass, 1 fail, 77 skip (mpi without mpirun).
shape=$1 n=$2 prog=$3 launch=$4 ntr=$5 lib=$6 emu=$7
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
run() { # $1: plain|traced
  if [ "$1" = traced ]; then set -- LD_PRELOAD="$lib" NCCLTRACE_DIR="$tmp/dumps" NCCLTRACE_RING_DIR="$tmp/rings" \
    NCCLTRACE_JOB="shape-$shape"; else set --; fi
  case $shape in
  multidev|pthread) env "$@" LD_LIBRARY_PATH="$emu" timeout 60 "$prog" "$shape" "$n" ;;
  mpi) env "$@" LD_LIBRARY_PATH="$emu" timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$n" \
         -x LD_LIBRARY_PATH ${1:+-x LD_PRELOAD -x NCCLTRACE_DIR -x NCCLTRACE_RING_DIR -x NCCLTRACE_JOB} "$prog" ;;
  *) env "$@" LD_LIBRARY_PATH="$emu" LAUNCH_TIMEOUT=60 "$launch" "$n" "$prog" "$shape" ;;
  esac
}
if [ "$shape" = mpi ]; then
  command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
fi
run plain > "$tmp/plain.out" 2> "$tmp/plain.err" || { echo "FAIL: untraced:"; cat "$tmp/plain.out" "$tmp/plain.err"; exit 1; }
run traced > "$tmp/traced.out" 2> "$tmp/traced.err" || { echo "FAIL: traced:"; cat "$tmp/traced.out" "$tmp/traced.err"; exit 1; }
sort "$tmp/plain.out" > "$tmp/a"; sort "$tmp/traced.out" > "$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: outputs differ"; diff "$tmp/a" "$tmp/b"; exit 1; }
[ "$(grep -c ': ok (' "$tmp/a")" -eq "$n" ] || { echo "FAIL: want $n ok lines"; cat "$tmp/a"; exit 1; }
"$ntr" analyze --json "$tmp/dumps" > "$tmp/v.json" 2> "$tmp/v.err" || { echo "FAIL: analyze"; cat "$tmp/v.err"; exit 1; }
grep -q '"class": *"healthy"' "$tmp/v.json" || { echo "FAIL: not healthy"; "$ntr" analyze "$tmp/dumps"; exit 1; }
cat "$tmp/a"
echo "ok: $shape, $n ranks, untraced and traced alike, healthy"
