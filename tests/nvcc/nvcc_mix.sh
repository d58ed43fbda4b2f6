#!/bin/sh
# nvcc_mix.sh NVCC SRC CACHE_DIR EMU_LIBDIR LIBNCCLTRACE NCCLTRACE_EXE NCCL_LIBDIR
# A program built by the real nvcc (`-cudart shared`) with kernels of its
# own and NCCL calls runs on the emulator untraced and traced, prints the
# same lines both ways, and its evidence analyzes as healthy.  The binary is
# cached in CACHE_DIR (nvcc takes seconds) and rebuilt when SRC is newer.
# Exit 0 pass, 1 fail, 77 skip (no nvcc, or no host C++ compiler for it).
nvcc=$1 src=$2 cache=$3 emu=$4 lib=$5 ntr=$6 nccldir=$7
[ -x "$nvcc" ] || { echo "SKIP: no nvcc at $nvcc"; exit 77; }
command -v g++ >/dev/null || { echo "SKIP: no g++ (nvcc's host compiler)"; exit 77; }
mkdir -p "$cache" || exit 1
bin=$cache/mix
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
  "$nvcc" -cudart shared -o "$bin.tmp" "$src" -L"$nccldir" -lnccl > "$cache/nvcc.log" 2>&1 ||
    { echo "FAIL: nvcc:"; tail -5 "$cache/nvcc.log"; exit 1; }
  mv "$bin.tmp" "$bin" || exit 1
fi
objdump -p "$bin" | grep -q 'NEEDED.*libcudart.so' ||
  { echo "FAIL: $bin does not use the shared runtime"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH=$emu NCCLEMU_DEVICES=2 timeout 60 "$bin" > "$tmp/plain" 2> "$tmp/plain.err" ||
  { echo "FAIL: untraced run:"; cat "$tmp/plain" "$tmp/plain.err"; exit 1; }
LD_LIBRARY_PATH=$emu NCCLEMU_DEVICES=2 LD_PRELOAD=$lib NCCLTRACE_DIR=$tmp/dumps \
  NCCLTRACE_RING_DIR=$tmp/rings NCCLTRACE_JOB=nvcc-mix timeout 60 "$bin" > "$tmp/traced" 2> "$tmp/traced.err" ||
  { echo "FAIL: traced run:"; cat "$tmp/traced" "$tmp/traced.err"; exit 1; }
cmp -s "$tmp/plain" "$tmp/traced" || { echo "FAIL: outputs differ"; diff "$tmp/plain" "$tmp/traced"; exit 1; }
grep -q '^mix ok$' "$tmp/plain" || { echo "FAIL: no 'mix ok'"; cat "$tmp/plain"; exit 1; }
"$ntr" analyze --json "$tmp/dumps" > "$tmp/verdict.json" 2> "$tmp/analyze.err" ||
  { echo "FAIL: analyze"; cat "$tmp/analyze.err"; exit 1; }
grep -q '"class": *"healthy"' "$tmp/verdict.json" ||
  { echo "FAIL: not healthy:"; head -c 2000 "$tmp/verdict.json"; exit 1; }
cat "$tmp/plain"
echo "ok: nvcc-built program, untraced and traced alike, healthy"
