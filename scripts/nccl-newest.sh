#!/usr/bin/env bash
# scripts/nccl-newest.sh -- fetch the newest NCCL release the tests compare
# against (PyPI's nvidia-nccl-cu13, pinned) into .nccl-newest at the top of
# the tree, the first time and only then; run-tests.sh runs it before the
# tests (test symbol_agreement and emu_symbols read its export list).
#
#   scripts/nccl-newest.sh          fetch when missing, print the library's path
#
# Only the library and its nccl.h are kept (190 MB; the 200 MB wheel is
# deleted after unpacking; a few seconds from pip's cache).  Nothing is
# installed: the tests only read the library's dynamic symbols.
# Exit: 0 fetched (or already there), 1 the fetch failed (one line why).
set -u
cd "$(dirname "$0")/.." || exit 1
pin="nvidia-nccl-cu13==2.32.6"
dir=$PWD/.nccl-newest
stamp="$dir/.nccltrace-installed"
if [ -e "$dir/lib/libnccl.so.2" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
  echo "$dir/lib/libnccl.so.2"; exit 0
fi
py=$(command -v python3) || { echo "nccl-newest: no python3 to run pip with" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "nccl-newest: fetching $pin into $dir (about 200 MB, once)" >&2
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" "$pin" >&2 ||
  { echo "nccl-newest: pip download $pin failed (is PyPI reachable?)" >&2; exit 1; }
rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/include" || exit 1
"$py" - "$tmp" "$dir" <<'PY' || { echo "nccl-newest: the wheel of $pin lacks libnccl.so.2 or nccl.h" >&2; exit 1; }
import glob, shutil, sys, zipfile
tmp, out = sys.argv[1:]
wheels = glob.glob(tmp + "/*.whl")
with zipfile.ZipFile(wheels[0]) as z:
    for member, dest in (("nvidia/nccl/lib/libnccl.so.2", "/lib/libnccl.so.2"),
                         ("nvidia/nccl/include/nccl.h", "/include/nccl.h")):
        with z.open(member) as src, open(out + dest, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
echo "$pin" >"$stamp"
echo "$dir/lib/libnccl.so.2"
