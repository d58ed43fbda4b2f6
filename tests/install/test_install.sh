#!/usr/bin/env bash
# test_install.sh -- `meson install --destdir` puts the library, the header,
# nccltrace.pc, the command and the man page in the prefix; the installed
# `nccltrace run` preloads the INSTALLED library (not the build tree's) and
# traces an example on the emulator; the build tree's `nccltrace run` preloads
# the build tree's library; pkg-config finds the package and a program built
# with its flags links and calls the marker API.
#
#   test_install.sh BUILD_ROOT SRC_ROOT PREFIX LIBDIR INCLUDEDIR MANDIR HEALTHY EMU_LIBDIR
# Exit: 0 pass, 1 fail, 77 skip (meson or pkg-config missing).
set -eu
[ $# = 8 ] || { echo "usage: $0 BUILD SRC PREFIX LIBDIR INCLUDEDIR MANDIR HEALTHY EMU_LIBDIR" >&2; exit 1; }
build=$1 src=$2 prefix=$3 libdir=$4 incdir=$5 mandir=$6 healthy=$7 emu=$8
command -v meson >/dev/null || { echo "SKIP: meson not on PATH"; exit 77; }
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config not on PATH"; exit 77; }
# Relative dirs are under the prefix; absolute ones stand alone.
under() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }

dest=$tmp/dest
meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }
P=$dest$prefix L=$dest$(under "$libdir") I=$dest$(under "$incdir") M=$dest$(under "$mandir")
for f in "$P/bin/nccltrace" "$L/libnccltrace.so" "$I/nccltrace.h" "$M/man1/nccltrace.1" \
         "$L/pkgconfig/nccltrace.pc"; do
  [ -f "$f" ] || no "not installed: ${f#"$dest"}"
done
[ -f "$L/pkgconfig/nccltrace.pc" ] ||
  echo "     (nccltrace.pc comes from install/meson.build: the top-level meson.build needs subdir('install'))"
[ $fail = 0 ] || exit 1

# Which library does `nccltrace run` preload?
# shellcheck disable=SC2016  # $LD_PRELOAD is expanded by the child shell
preloaded() { "$1" run -- sh -c 'printf %s "$LD_PRELOAD"'; }
want=$(cd "$L" && pwd -P)/libnccltrace.so
got=$(preloaded "$P/bin/nccltrace") || no "installed nccltrace run failed"
[ "$got" = "$want" ] || no "installed nccltrace run preloads '$got', want the installed '$want'"
want=$(cd "$build/interpose" && pwd -P)/libnccltrace.so
got=$(preloaded "$build/tools/nccltrace") || no "build-tree nccltrace run failed"
[ "$got" = "$want" ] || no "build-tree nccltrace run preloads '$got', want '$want'"

# A healthy 2-rank job under each `nccltrace run`: evidence left, verdict healthy.
for exe in "$P/bin/nccltrace" "$build/tools/nccltrace"; do
  d=$(mktemp -d "$tmp/run.XXXXXX")
  rc=0
  env LD_LIBRARY_PATH="$emu" NCCLEMU_DEVICES=2 UNIQUE_ID_FILE="$d/uid" LAUNCH_TIMEOUT=30 \
    NCCLTRACE_JOB=install-$$ NCCLTRACE_CHECK=off \
    "$exe" run --dir "$d/dumps" --ring-dir "$d/rings" -- "$src/examples/launch.sh" 2 "$healthy" 2 \
    >"$d/job.log" 2>&1 || rc=$?
  [ $rc = 0 ] || { cat "$d/job.log"; no "$exe run -- launch.sh 2 healthy exited $rc"; continue; }
  "$exe" collect --rings "$d/rings" --dir "$d/dumps" >/dev/null 2>&1 || true
  cls=$("$exe" analyze --json "$d" | python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"]["class"])') ||
    no "$exe analyze --json failed"
  [ "${cls:-}" = healthy ] || no "$exe: verdict '${cls:-}' for a healthy job, want healthy"
done

# pkg-config (PKG_CONFIG_SYSROOT_DIR maps the .pc's /usr/local-style paths into DESTDIR).
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(pkg-config --cflags --libs nccltrace) || no "pkg-config --cflags --libs nccltrace failed"
case " ${flags:-} " in *" -I$I "*) ;; *) no "pkg-config --cflags lacks -I$I: '${flags:-}'" ;; esac
case " ${flags:-} " in *" -lnccltrace "*) ;; *) no "pkg-config --libs lacks -lnccltrace: '${flags:-}'" ;; esac
cat >"$tmp/use.c" <<'EOF'
#include <nccltrace.h>
#include <stdio.h>
int main(void) {
  nccltrace_mark("install-test", 1);
  printf("%s\n", nccltrace_version());
  return 0;
}
EOF
# shellcheck disable=SC2086  # pkg-config output is a list of flags
if ${CC:-cc} -o "$tmp/use" "$tmp/use.c" ${flags:-} 2>"$tmp/cc.log"; then
  v=$(NCCLTRACE_RING_DIR=$tmp/rings NCCLTRACE_DIR=$tmp/dumps LD_LIBRARY_PATH=$L "$tmp/use") || no "program linked with -lnccltrace failed"
  [ -n "${v:-}" ] || no "nccltrace_version() returned nothing"
else
  cat "$tmp/cc.log"; no "cc \$(pkg-config --cflags --libs nccltrace) failed"
fi
[ $fail = 0 ] && echo "ok: installed into $prefix under DESTDIR; run, analyze and pkg-config work"
exit $fail
