#!/bin/sh
# check_symbols.sh NCCL_API_DEF REAL_LIBNCCL EMU_LIBNCCL EMU_LIBCUDART REAL_LIBCUDART EMU_LIBCUDA NEWEST_LIBNCCL
# Acceptance (c): every function design.md section 3 wraps (the rows of
# recorder/nccl_api.def) exists in the real libnccl.so.2 -- the toolkit's
# (REAL_LIBNCCL), or for a function added later the newest release's
# (NEWEST_LIBNCCL, fetched by scripts/nccl-newest.sh); the emulator
# exports the same set plus the extra functions it promises, each as a WEAK
# ncclX and a GLOBAL pncclX at the same address, like the real library; the
# emulator's runtime versions every symbol with node libcudart.so.13 and
# covers the real runtime's version of each function it exports; the
# driver exports both spellings of the versioned names.
def=$1 real=$2 emu=$3 emurt=$4 realrt=$5 emucu=$6 newest=$7
for f in "$def" "$real" "$emu" "$emurt" "$realrt" "$emucu"; do
  [ -e "$f" ] || { echo "SKIP: missing $f"; exit 77; }
done
[ -e "$newest" ] || { echo "FAIL: missing $newest: scripts/nccl-newest.sh fetches it (run-tests.sh runs it)"; exit 1; }
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
objdump -T "$real" > "$tmp/real"
objdump -T "$newest" > "$tmp/newest"
objdump -T "$emu" > "$tmp/emu"
fail=0

wrapped=$(sed -n 's/^NT_\(COLL\|P2P\|GROUP\|LIFE\|COLL_CFG\)(\(nccl[A-Za-z]*\),.*/\2/p' "$def")
[ "$(echo "$wrapped" | wc -w)" -ge 20 ] || { echo "FAIL: could not read the wrapped functions from $def"; exit 1; }
extra="ncclGetVersion ncclGetErrorString ncclGetLastError ncclCommCount ncclCommUserRank ncclCommCuDevice
ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclMemAlloc ncclMemFree ncclCommRegister ncclCommDeregister"

# "ADDR B" of a dynamic .text symbol, B = w (weak) or g (global): objdump
# prints the address, a space, then flag columns "g" / " w".
sym() { awk -v s="$2" '$NF == s && $0 ~ /\.text/ { print $1, (substr($0, 19, 1) == "w" ? "w" : substr($0, 18, 1)) }' "$1"; }

# The real library that has f: the toolkit's, else the newest release's.
model() { if [ -n "$(sym "$tmp/real" "$1")" ]; then echo "$tmp/real"; else echo "$tmp/newest"; fi; }
for f in $wrapped; do
  [ -n "$(sym "$(model "$f")" "$f")" ] || { echo "FAIL: neither real libnccl has $f"; fail=1; }
done
for f in $wrapped $extra; do
  a=$(sym "$tmp/emu" "$f") p=$(sym "$tmp/emu" "p$f")
  m=$(model "$f")
  ra=$(sym "$m" "$f") rp=$(sym "$m" "p$f")
  case "$a" in *" w") ;; *) echo "FAIL: emulator $f is not a weak symbol ('$a')"; fail=1 ;; esac
  case "$p" in *" g") ;; *) echo "FAIL: emulator p$f is not a global symbol ('$p')"; fail=1 ;; esac
  [ "${a% *}" = "${p% *}" ] || { echo "FAIL: emulator $f and p$f differ in address"; fail=1; }
  # The real library is the model: same binding there.
  case "$ra" in *" w") ;; *) echo "FAIL: real $f is not weak ('$ra'): the model changed"; fail=1 ;; esac
  case "$rp" in *" g") ;; *) echo "FAIL: real p$f is not global ('$rp')"; fail=1 ;; esac
done

objdump -T "$emurt" | awk '$0 ~ /\.text/ && $NF ~ /^cuda/ { print $(NF-1), $NF }' > "$tmp/rt"
[ -s "$tmp/rt" ] || { echo "FAIL: emulator runtime exports no cuda* symbols"; fail=1; }
bad=$(awk '$1 != "libcudart.so.13"' "$tmp/rt")
[ -z "$bad" ] || { echo "FAIL: unversioned runtime symbols: $bad"; fail=1; }
objdump -T "$realrt" > "$tmp/realrt"
objdump -T "$emucu" > "$tmp/cu"
for f in $(awk '{ print $2 }' "$tmp/rt"); do
  awk -v s="$f" '$NF == s { found = 1 } END { exit !found }' "$tmp/realrt" ||
    { echo "FAIL: emulator exports $f, which the real libcudart.so.13 lacks"; fail=1; }
done

for f in cuInit cuCtxGetCurrent cuCtxSetCurrent cuStreamGetCtx cuStreamGetCtx_v2 cuStreamIsCapturing \
         cuEventCreate cuEventRecord cuEventQuery cuEventSynchronize cuEventDestroy cuEventDestroy_v2 \
         cuGetErrorString cuEventElapsedTime cuEventElapsedTime_v2 cuStreamSynchronize cuGetProcAddress_v2 \
         cuStreamBeginCapture cuStreamBeginCapture_v2 cuStreamBeginCapture_v2_ptsz cuStreamEndCapture \
         cuStreamEndCapture_ptsz cuStreamIsCapturing_ptsz cuStreamGetCaptureInfo cuStreamGetCaptureInfo_v2 \
         cuStreamGetCaptureInfo_v3 cuStreamGetCaptureInfo_v3_ptsz cuThreadExchangeStreamCaptureMode \
         cuGraphInstantiateWithFlags cuGraphInstantiate_v2 cuGraphLaunch cuGraphLaunch_ptsz cuGraphExecDestroy \
         cuGraphDestroy cuGraphExecUpdate cuGraphExecUpdate_v2 cuGraphGetNodes cuMemAlloc_v2 cuMemFree_v2 \
         cuMemcpy cuMemcpyAsync cuMemsetD8_v2 cuMemsetD8Async; do
  awk -v s="$f" '$NF == s && $0 ~ /\.text/ { found = 1 } END { exit !found }' "$tmp/cu" ||
    { echo "FAIL: emulator libcuda lacks $f"; fail=1; }
done
[ $fail -eq 0 ] && echo "ok: $(echo $wrapped | wc -w) wrapped + $(echo $extra | wc -w) extra NCCL functions, $(wc -l < "$tmp/rt") runtime symbols"
exit $fail
