#!/bin/sh
# shapes.sh SHAPE NRANKS PROG LAUNCH NCCLTRACE LIB EMU_LIBDIR [FAULT]
# Acceptance: a program in the shape of NVIDIA's NCCL examples runs on
# the emulator untraced and traced with the same output (lines sorted:
# ranks are processes or threads printing concurrently), and its evidence
# analyzes as healthy.  SHAPE multidev|pthread run as one process; mpi under
# mpirun (Debian's openmpi); the rest under launch.sh, one device per rank.
# multidev and pthread are one process holding every rank (one process,
# many ranks): the dump is named by the ranks it holds (-r0..N-1-), decode
# and analyze say that one pid holds them.  FAULT (multidev only), run under
# `nccltrace run`: kill (the process is SIGKILLed holding all its ranks:
# every one of them is named, with the signal nccltrace run saw) or
# mismatch (device 2's AllReduce differs: rank 2 is named, as one of the
# ranks of that process).
# Exit 0 pass, 1 fail, 77 skip (mpi without mpirun).
shape=$1 n=$2 prog=$3 launch=$4 ntr=$5 lib=$6 emu=$7 fault=${8:-}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
last=$((n - 1))
# json_check EXPR MESSAGE: EXPR (Python, over the analyze --json document d) holds
json_check() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
    "$tmp/v.json" "$1" || { echo "FAIL: $2"; cat "$tmp/v.json"; exit 1; }
}
if [ -n "$fault" ]; then
  # the process ends holding all its ranks; `nccltrace run` sees how
  NCCLTRACE_LIB="$lib" NCCLTRACE_TIMEOUT=1 NCCLTRACE_JOB="shape-$fault" LD_LIBRARY_PATH="$emu" \
    timeout -s TERM 3 "$ntr" run --dir "$tmp/dumps" --ring-dir "$tmp/rings" -- "$prog" "$shape" "$n" "$fault" \
    > "$tmp/out" 2> "$tmp/err"
  rc=$?
  "$ntr" analyze "$tmp" > "$tmp/v.txt" 2>&1
  arc=0; "$ntr" analyze --json "$tmp" > "$tmp/v.json" 2> "$tmp/v.err" || arc=$?
  # 1: a fault found (docs/analyze.md "Exit status")
  [ $arc = 1 ] || { echo "FAIL: analyze exited $arc, want 1"; cat "$tmp/v.err"; exit 1; }
  cat "$tmp/v.txt"
  grep -q "one process: pid [0-9]* on .* holds ranks 0-$last" "$tmp/v.txt" || { echo "FAIL: no 'holds ranks' row"; exit 1; }
  grep -q 'rank -1' "$tmp/v.txt" && { echo "FAIL: 'rank -1' in the report"; exit 1; }
  case $fault in
  kill)
    [ "$rc" = 137 ] || { echo "FAIL: nccltrace run exited $rc, want 137 (SIGKILL passed on)"; cat "$tmp/err"; exit 1; }
    json_check "d['verdict']['class'] == 'rank_killed' and sorted(d['verdict']['ranks']) == list(range($n))" \
      "want rank_killed naming comm ranks 0-$last"
    json_check "d['verdict'].get('signal') == 9 and d['ranks'][0]['run_status'] == {'signal': 9}" \
      "want the SIGKILL nccltrace run saw"
    json_check "'holds ranks 0-$last of comm' in d['verdict']['summary']" "want the summary to say the process holds ranks 0-$last" ;;
  mismatch)
    json_check "d['verdict']['class'] == 'collective_mismatch' and d['verdict']['ranks'] == [2] and d['verdict']['field'] == 'count'" \
      "want collective_mismatch on count naming rank 2"
    json_check "'rank 2 is one of ranks 0-$last of comm' in d['verdict']['summary']" "want the summary to say rank 2 shares its process" ;;
  esac
  echo "ok: $shape $fault, $n ranks in one process, all named"
  exit 0
fi
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
case $shape in
multidev|pthread)
  # one process holds every rank: its dump, decode and analyze say so
  set -- "$tmp"/dumps/nccltrace-*-r0..$last-*-exit.zst
  [ -f "$1" ] || { echo "FAIL: no dump named -r0..$last-:"; ls "$tmp/dumps"; exit 1; }
  "$ntr" decode "$1" | grep -q "^holds: *ranks 0-$last of comm" || { echo "FAIL: decode does not say ranks 0-$last"; "$ntr" decode "$1" | head; exit 1; }
  "$ntr" analyze "$tmp/dumps" > "$tmp/v.txt"
  grep -q "one process: pid [0-9]* on .* holds ranks 0-$last" "$tmp/v.txt" || { echo "FAIL: analyze does not say ranks 0-$last"; cat "$tmp/v.txt"; exit 1; }
  json_check "len(d['ranks']) == 1 and [h['ranks'] for h in d['ranks'][0]['comm_ranks']] == [list(range($n))]" \
    "want one process holding comm ranks 0-$last"
  json_check "'holds ranks 0-$last of comm' in d['ranks'][0]['label']" "want the process label to say ranks 0-$last" ;;
esac
cat "$tmp/a"
echo "ok: $shape, $n ranks, untraced and traced alike, healthy"
