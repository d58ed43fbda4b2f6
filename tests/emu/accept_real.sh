#!/bin/sh
# accept_real.sh PROG EMU_LIBDIR [NRANKS]
# Acceptance (a): a program linked against the REAL libcudart/libnccl runs
# as NRANKS processes on the emulator (LD_LIBRARY_PATH) with correct data,
# resolves both libraries to the emulator, and the loader prints no
# "no version information available" warning.
prog=$1 libdir=$2 n=${3:-4}
[ -x "$prog" ] || { echo "FAIL: no program $prog"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$libdir"

for lib in libnccl.so.2 libcudart.so.13; do
  where=$(ldd "$prog" | awk -v l="$lib" '$1 == l { print $3 }')
  case "$where" in
    "$libdir"/*) ;;
    *) echo "FAIL: $lib resolves to '$where', not the emulator in $libdir"; exit 1 ;;
  esac
done

pids=
r=0
while [ $r -lt "$n" ]; do
  # Bounded: a hang must fail this test, not stall the suite.
  timeout -s KILL 60 "$prog" $r "$n" "$tmp/id" >"$tmp/out.$r" 2>"$tmp/err.$r" &
  pids="$pids $!"
  r=$((r + 1))
done
fail=0
r=0
for p in $pids; do
  if ! wait "$p"; then echo "FAIL: rank $r exited non-zero"; fail=1; fi
  r=$((r + 1))
done
cat "$tmp"/out.* "$tmp"/err.*
if grep -q "no version information" "$tmp"/err.*; then
  echo "FAIL: loader warned about missing version information"
  fail=1
fi
[ "$(cat "$tmp"/out.* | grep -c ': ok$')" -eq "$n" ] || { echo "FAIL: not every rank said ok"; fail=1; }
[ $fail -eq 0 ] && echo "ok: $n ranks of a real-linked program on the emulator"
exit $fail
