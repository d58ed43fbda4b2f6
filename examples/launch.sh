#!/usr/bin/env bash
# launch.sh N CMD [ARGS...] -- a tiny torchrun: start N ranks of CMD with
# RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and a fresh UNIQUE_ID_FILE,
# then behave like torchrun's fail-fast: when one rank fails (non-zero exit or
# signal), SIGTERM the survivors; after LAUNCH_TIMEOUT seconds SIGTERM
# everyone still running; LAUNCH_GRACE seconds after a SIGTERM, SIGKILL.
# No rank is ever left running when this script returns.
#
#   LAUNCH_TIMEOUT=60  LAUNCH_GRACE=3
#   RANKENV_<r>="VAR=value ..."   extra environment for rank r only
#
# Exit status: 0 when every rank exited 0; the first failing rank's exit code
# (128+signal for a signal); 124 when the timeout fired first.
set -u
if [ $# -lt 2 ] || ! [ "$1" -ge 1 ] 2>/dev/null; then
  echo "usage: launch.sh N CMD [ARGS...]" >&2
  exit 2
fi
n=$1; shift
timeout_s=${LAUNCH_TIMEOUT:-60}
grace_s=${LAUNCH_GRACE:-3}
own_id=0
if [ -z "${UNIQUE_ID_FILE:-}" ]; then
  UNIQUE_ID_FILE=$(mktemp -u "${TMPDIR:-/tmp}/nccl-uid.XXXXXXXX")
  own_id=1
fi
export UNIQUE_ID_FILE WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n

pids=()
alive=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ $own_id = 1 ] && rm -f "$UNIQUE_ID_FILE"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ((r = 0; r < n; r++)); do
  extra_var="RANKENV_$r"
  # shellcheck disable=SC2086  # word splitting of VAR=value pairs is intended
  env RANK=$r LOCAL_RANK=$r ${!extra_var:-} "$@" &
  pids[r]=$!
  alive[r]=1
done

# A child has exited when /proc shows it gone or a zombie (kill -0 still
# succeeds on a zombie, so it cannot tell).
exited() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [ -z "$st" ] || [ "$st" = Z ]
}

status=0
first_fail=""
term_at=""
deadline=$(( $(date +%s%N) / 1000000 + timeout_s * 1000 ))
running=$n
while [ $running -gt 0 ]; do
  now=$(( $(date +%s%N) / 1000000 ))
  for ((r = 0; r < n; r++)); do
    [ "${alive[r]}" = 1 ] || continue
    exited "${pids[r]}" || continue
    wait "${pids[r]}"; rc=$?
    alive[r]=0; running=$((running - 1))
    if [ $rc -ne 0 ] && [ -z "$first_fail" ] && [ -z "$term_at" ]; then
      first_fail=$r; status=$rc
      if [ $rc -gt 128 ]; then
        echo "launch.sh: rank $r (pid ${pids[r]}) died of signal $((rc - 128)); stopping the others" >&2
      else
        echo "launch.sh: rank $r (pid ${pids[r]}) exited with code $rc; stopping the others" >&2
      fi
    fi
  done
  [ $running -gt 0 ] || break
  if [ -z "$term_at" ] && { [ -n "$first_fail" ] || [ "$now" -ge "$deadline" ]; }; then
    if [ -z "$first_fail" ]; then
      echo "launch.sh: timeout after ${timeout_s}s: sending SIGTERM to $running rank(s)" >&2
      status=124
    fi
    for ((r = 0; r < n; r++)); do [ "${alive[r]}" = 1 ] && kill -TERM "${pids[r]}" 2>/dev/null; done
    term_at=$now
  fi
  if [ -n "$term_at" ] && [ "$now" -ge $((term_at + grace_s * 1000)) ]; then
    for ((r = 0; r < n; r++)); do [ "${alive[r]}" = 1 ] && kill -KILL "${pids[r]}" 2>/dev/null; done
  fi
  sleep 0.05
done
exit $status
