#!/usr/bin/env bash
# run-fuzz.sh FUZZBUILD [SECONDS] [PLAINBUILD] -- run every libFuzzer target
# of the tree for SECONDS each (default 60) and print executions and crashes:
#   fuzz_reader   (tests/tools)     the reader, ntt_image_load_mem
#   fuzz_analyze  (tests/stress)    the analysis past the reader
#   fuzz_wire     (tests/exchange)  the coordinator's frame/message parser
#   fuzz_fast     (tests/tools)     a dump's streaming pass, ntt_fast_load
#   fuzz_shot     (tests/tools)     a dump into a load buffer, ntt_shot_load
#   fuzz_peek     (tests/tools)     a dump's HEADER alone, ntt_peek_dump
#   fuzz_dump     (tests/tools)     a dump's whole-payload path, ntt_load_dump
#   fuzz_fr       (tests/tools)     PyTorch Flight Recorder dumps: pickle decoder, fields
#   fuzz_bundle   (tests/tools)     bundles (nccltrace bundle): tar, zstd, MANIFEST, ntb_read_mem
# FUZZBUILD is a build configured with CC=clang -Dfuzz=true; PLAINBUILD (default:
# FUZZBUILD) provides libnccltrace.so, the emulator and stress_prog to make the
# seed corpus from real dumps of an emulator run.  Crash inputs are kept in
# FUZZBUILD/fuzz-out/<target>/.  Exit 0 when no target crashed.  With
# FUZZ_RUNS=N in the environment, each target runs N inputs instead of
# SECONDS (the `slow` suite's brief run: the same inputs every time).
#
#   CC=clang meson setup build-fuzz -Dfuzz=true && ninja -C build-fuzz
#   tests/stress/run-fuzz.sh build-fuzz 60 build
set -u
fb=$(cd "${1:?usage: run-fuzz.sh FUZZBUILD [SECONDS] [PLAINBUILD]}" && pwd) || exit 2
secs=${2:-60}
pb=$(cd "${3:-$1}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$fb/fuzz-out
work=$(mktemp -d "${TMPDIR:-/tmp}/ntr-fuzz.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
targets="reader:tests/tools/fuzz_reader analyze:tests/stress/fuzz_analyze wire:tests/exchange/fuzz_wire
  fast:tests/tools/fuzz_fast shot:tests/tools/fuzz_shot peek:tests/tools/fuzz_peek dump:tests/tools/fuzz_dump
  fr:tests/tools/fuzz_fr bundle:tests/tools/fuzz_bundle"
for spec in $targets; do
  t=${spec#*:}
  [ -x "$fb/$t" ] || { echo "run-fuzz.sh: $fb/$t not built (configure with CC=clang -Dfuzz=true)" >&2; exit 2; }
done

# ---- seed corpus: real dumps of a 2-rank emulator run, and a killed ring
export LD_LIBRARY_PATH=$pb/tests/emu:$pb/tests/stress NCCLEMU_DEVICES=8
export NCCLTRACE_DIR=$work/dumps NCCLTRACE_RING_DIR=$work/rings NCCLTRACE_RING=256 NCCLTRACE_CHECK=off
mkdir -p "$work/ids" "$work/acks"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LD_PRELOAD=$pb/interpose/libnccltrace.so \
    "$pb/tests/stress/stress_prog" load $r 2 "$work/ids" 2 40 "$work/acks" >/dev/null 2>&1 &
  pids+=($!)
done
wait
pids=()
ls "$work"/dumps/*.zst >/dev/null 2>&1 || { echo "run-fuzz.sh: the seed run left no dump" >&2; exit 2; }
mkdir -p "$out"/{reader,analyze,wire,fast,shot,peek,dump,fr,bundle} \
  "$work"/corpus/{reader,analyze,wire,fast,shot,peek,dump,fr,bundle}
# bundle: the seed dumps as a plain and a zstd bundle
for b in seed.tar seed.tar.zst; do
  "$pb/tools/nccltrace" bundle --no-rings --out "$work/corpus/bundle/$b" "$work/dumps" >/dev/null 2>&1 ||
    { echo "run-fuzz.sh: nccltrace bundle made no $b seed" >&2; exit 2; }
done
python3 - "$work" "$src" <<'PY'
import glob, os, struct, subprocess, sys
w = sys.argv[1]
# fr: the real Flight Recorder dumps of tests/data/torch-fr (torch 2.11),
# with the mode byte: 0 pickle, 1 JSON, +2 a small memory limit
for i, f in enumerate(sorted(glob.glob(os.path.join(sys.argv[2], "tests/data/torch-fr/**/rank_*"), recursive=True))):
    b = open(f, "rb").read()
    form = 1 if b[:1] == b"{" else 0
    for mode in (form, form | 2):
        open(os.path.join(w, "corpus/fr/f%d-%d" % (i, mode)), "wb").write(bytes([mode]) + b)
dumps = sorted(glob.glob(os.path.join(w, "dumps", "*.zst")))
raws = []
for i, f in enumerate(dumps):
    b = open(f, "rb").read()
    for mode in (0, 1):
        open(os.path.join(w, "corpus/reader/d%d-%d" % (i, mode)), "wb").write(bytes([mode]) + b)
    # the dump decoders (tests/tools/fuzz_dump.h): the file as it is, strict,
    # salvaged, and through the path a load buffer takes (bit 3)
    for t in ("fast", "shot", "peek", "dump"):
        for mode in (0, 1, 8):
            open(os.path.join(w, "corpus/%s/d%d-%d" % (t, i, mode)), "wb").write(bytes([mode]) + b)
    pl = subprocess.run(["zstd", "-dc"], input=b[64:], capture_output=True).stdout
    if not pl:
        continue
    pre = bytearray(b[:64])
    struct.pack_into("<QQ", pre, 16, len(pl), len(pl))   # payload_size, compressed_size
    struct.pack_into("<I", pre, 44, struct.unpack_from("<I", pre, 44)[0] | 1)  # flags: raw
    raws.append(bytes(pre) + pl)
for i, r in enumerate(raws):
    open(os.path.join(w, "corpus/reader/raw%d" % i), "wb").write(b"\x01" + r)
    open(os.path.join(w, "corpus/analyze/one%d" % i), "wb").write(b"\x01" + r)
    # sealed: the target recompresses (2) or keeps stored (6) the payload and
    # recomputes sizes and checksum, so mutations pass them
    for t in ("fast", "shot", "peek", "dump"):
        for mode in (2, 6, 7, 10):
            open(os.path.join(w, "corpus/%s/s%d-%d" % (t, i, mode)), "wb").write(bytes([mode]) + r)
if len(raws) >= 2:
    two = b"\x03" + struct.pack("<I", len(raws[0])) + raws[0] + raws[1]
    open(os.path.join(w, "corpus/analyze/two"), "wb").write(two)
# wire: a few frame headers (magic "NX", version 1, type, length) to start from
for t in range(1, 12):
    open(os.path.join(w, "corpus/wire/t%d" % t), "wb").write(b"\x00NX\x01" + bytes([t]) + b"\0\0\0\x08" + b"\0" * 24)
PY

status=0
total_execs=0
if [ -n "${FUZZ_RUNS:-}" ]; then length="-runs=$FUZZ_RUNS -seed=1"; what="$FUZZ_RUNS runs"; else length=-max_total_time=$secs; what="${secs}s"; fi
for spec in $targets; do
  name=${spec%%:*}; bin=$fb/${spec#*:}
  log=$work/$name.log
  # -fork would hide a crash in a child; one process, bounded memory per input
  # shellcheck disable=SC2086  # $length is one or two options
  "$bin" $length -max_len=262144 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$out/$name/" -print_final_stats=1 "$work/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  crashes=$(ls "$out/$name" | grep -c -E '^(crash|leak|timeout|oom)-' )
  [ -z "$execs" ] && execs=0
  total_execs=$((total_execs + execs))
  cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE).*cov:' "$log" | tail -1 | sed -E 's/.*(cov: [0-9]+ ft: [0-9]+).*/\1/')
  echo "fuzz $name: $what, $execs executions, ${cov:-cov: ?}, exit $rc, $crashes crash/leak/timeout input(s) in $out/$name"
  if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
    status=1
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" | head -8
  fi
done
echo "FIGURE fuzz_execs_total=$total_execs"
exit $status
