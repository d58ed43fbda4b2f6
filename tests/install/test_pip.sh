#!/usr/bin/env bash
# test_pip.sh -- what a PyTorch user gets from `pip install <this tree>`: in a
# fresh venv (meson-python from scripts/wheel-deps.sh, no network after that
# script's first run), `pip install` and `pip wheel` of the source tree
# (pyproject.toml, -Dwheel=true; one meson build directory for both, so the
# project compiles once), then:
#   - the wheel holds the nccltrace package (the command in bin/, the library
#     in lib/, executable) and the entry point, and nothing else: no tests,
#     emulator, examples or benchmarks;
#   - `nccltrace` on the venv's PATH is the venv's: --version and --help as
#     the build tree's command prints them;
#   - `python -m nccltrace analyze` of tests/golden/v2 prints what the build
#     tree's command prints, with the same exit status; exit statuses of
#     `nccltrace run` pass through both the entry point and `python -m`;
#   - nccltrace.preload_path() and `python -m nccltrace.preload` name the
#     package's libnccltrace.so, which exports ncclAllReduce and needs only
#     libc.so.6 at exec;
#   - the venv's `nccltrace run` preloads that library, not the one of the
#     configured prefix (a decoy is put there), and starts the job with the
#     ignored signals the build tree's command gives (Python ignores SIGPIPE
#     and SIGXFSZ; an exec would pass that on);
#   - `nccltrace run` from the venv traces a 2-rank job on the emulator:
#     a dump per rank, verdict healthy.
#
#   test_pip.sh SRC_ROOT BUILD_NCCLTRACE HEALTHY EMU_LIBDIR
# Exit: 0 pass, 1 fail.
set -u
[ $# = 4 ] || { echo "usage: $0 SRC BUILD_NCCLTRACE HEALTHY EMU_LIBDIR" >&2; exit 1; }
src=$1 built=$2 healthy=$3 emu=$4
fail=0
no() { echo "FAIL: $*"; fail=1; }
die() { echo "FAIL: $*"; exit 1; }

wheels=$("$src/scripts/wheel-deps.sh") || die "scripts/wheel-deps.sh could not fetch meson-python"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nccltrace-pip.XXXXXX") || die "mktemp -d under ${TMPDIR:-/tmp} failed"
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
export VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
export NCCLTRACE_DIR=$tmp/dumps NCCLTRACE_RING_DIR=$tmp/rings
pip=(python -m pip -q)
"${pip[@]}" install --no-index --find-links "$wheels" meson-python meson >"$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log"; die "pip install meson-python from $wheels failed"; }

# One meson build directory for install and wheel; --prefix names a place
# where a decoy library waits (the configured libdir is a place an installed
# command looks, but never a wheel's command).
decoy=$tmp/decoy
build_args=(--no-index --no-build-isolation --no-deps
  --config-settings=build-dir="$tmp/meson"
  --config-settings=compile-args=-j2
  --config-settings=setup-args=--prefix="$decoy")
"${pip[@]}" install "${build_args[@]}" "$src" >"$tmp/pip.log" 2>&1 ||
  { tail -40 "$tmp/pip.log"; die "pip install $src failed"; }
"${pip[@]}" wheel "${build_args[@]}" -w "$tmp/wheels" "$src" >"$tmp/pip.log" 2>&1 ||
  { tail -40 "$tmp/pip.log"; die "pip wheel $src failed"; }

# The wheel's contents.
whl=$(echo "$tmp"/wheels/nccltrace-*.whl)
[ -f "$whl" ] || die "pip wheel left no nccltrace-*.whl in $tmp/wheels"
python - "$whl" <<'PY' || no "wheel contents (above)"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
pkg = {n for n in names if not n.startswith("nccltrace-")}
want = {"nccltrace/" + f for f in ("__init__.py", "__main__.py", "preload.py", "_version.py",
                                   "bin/nccltrace", "lib/libnccltrace.so")}
bad = 0
if pkg != want:
    print("wheel files outside dist-info: extra %s, missing %s" % (sorted(pkg - want), sorted(want - pkg)))
    bad = 1
for f in ("nccltrace/bin/nccltrace", "nccltrace/lib/libnccltrace.so"):
    if f in names and not (z.getinfo(f).external_attr >> 16) & 0o111:
        print("%s is not executable in the wheel" % f); bad = 1
ep = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
text = z.read(ep[0]).decode() if ep else ""
if "nccltrace = nccltrace.__main__:main" not in text:
    print("entry_points.txt lacks the nccltrace console script: %r" % text); bad = 1
sys.exit(bad)
PY

# The command on PATH is the venv's, and says what the build tree's says.
[ "$(command -v nccltrace)" = "$venv/bin/nccltrace" ] ||
  no "nccltrace on PATH is '$(command -v nccltrace)', want $venv/bin/nccltrace"
for a in --version --help; do
  want=$("$built" $a 2>&1) || no "build tree's nccltrace $a failed"
  got=$(nccltrace $a 2>&1) || no "venv's nccltrace $a failed"
  [ "$got" = "$want" ] || no "venv's nccltrace $a differs from the build tree's: '${got:0:200}'"
done

# analyze of the golden dumps: same text, same exit status.
rc_want=0 rc_got=0
"$built" analyze "$src/tests/golden/v2" >"$tmp/want.txt" 2>&1 || rc_want=$?
python -m nccltrace analyze "$src/tests/golden/v2" >"$tmp/got.txt" 2>&1 || rc_got=$?
cmp -s "$tmp/want.txt" "$tmp/got.txt" ||
  { diff "$tmp/want.txt" "$tmp/got.txt" | head -20; no "python -m nccltrace analyze differs from the build tree's"; }
[ $rc_got = $rc_want ] || no "python -m nccltrace analyze exited $rc_got, the build tree's $rc_want"
for cmd in "nccltrace" "python -m nccltrace"; do
  rc=0; $cmd run -- sh -c 'exit 7' || rc=$?
  [ $rc = 7 ] || no "$cmd run -- sh -c 'exit 7' exited $rc, want 7"
done

# The library for LD_PRELOAD.
lib=$(python -c 'import nccltrace; print(nccltrace.preload_path())') || no "nccltrace.preload_path() failed"
lib2=$(python -m nccltrace.preload) || no "python -m nccltrace.preload failed"
[ "${lib:-}" = "${lib2:-}" ] || no "preload_path() '${lib:-}' and python -m nccltrace.preload '${lib2:-}' differ"
case ${lib:-} in
  "$venv"/lib/python*/site-packages/nccltrace/lib/libnccltrace.so) ;;
  *) no "preload_path() is '${lib:-}', want the venv's site-packages/nccltrace/lib/libnccltrace.so" ;;
esac
[ -f "${lib:-/}" ] || no "preload_path() '${lib:-}' is not a file"
nm -D --defined-only "${lib:-/dev/null}" 2>/dev/null | grep -qw ncclAllReduce ||
  no "${lib:-preload_path()} does not export ncclAllReduce"
# Preloaded into every process of the job: it needs nothing but the C
# library at exec (libzstd and libunwind are opened at the first NCCL call).
needed=$(readelf -d "${lib:-/dev/null}" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || no "${lib:-preload_path()} needs '$needed' at exec, want only libc.so.6"

# `nccltrace run` preloads the package's library, not the decoy at the
# configured libdir; the job's ignored signals are the build tree's.  (Not
# SigBlk: the preloaded tracer blocks every signal around the creation of its
# threads (recorder/thread.c), which a reader of /proc sometimes sees.)
libdir=$(python - "$tmp/meson" <<'PY'
import json, subprocess, sys
opts = json.loads(subprocess.check_output(["meson", "introspect", "--buildoptions", sys.argv[1]]))
print(next(o["value"] for o in opts if o["name"] == "libdir"))
PY
) || no "meson introspect of the wheel's build failed"
case $libdir in /*) ;; *) libdir=$decoy/$libdir ;; esac
mkdir -p "$libdir" && cp "$src/README.md" "$libdir/libnccltrace.so"
want=$(cd "$(dirname "${lib:-/}")" && pwd -P)/libnccltrace.so
# shellcheck disable=SC2016  # expanded by the child shell
for cmd in "nccltrace" "python -m nccltrace"; do
  got=$($cmd run -- sh -c 'printf %s "$LD_PRELOAD"') || no "$cmd run failed"
  [ "${got:-}" = "$want" ] || no "$cmd run preloads '${got:-}', want the package's $want"
  sig_want=$("$built" run -- sh -c 'grep ^SigIgn /proc/$$/status')
  sig_got=$($cmd run -- sh -c 'grep ^SigIgn /proc/$$/status')
  [ "$sig_got" = "$sig_want" ] ||
    no "$cmd run starts the job with $sig_got, the build tree's with $sig_want"
done

# A 2-rank job on the emulator, traced by the venv's command.
d=$tmp/job
rc=0
env LD_LIBRARY_PATH="$emu" NCCLEMU_DEVICES=2 UNIQUE_ID_FILE="$d.uid" LAUNCH_TIMEOUT=30 \
  NCCLTRACE_JOB=pip-$$ NCCLTRACE_CHECK=off \
  nccltrace run --dir "$d/dumps" --ring-dir "$d/rings" -- "$src/examples/launch.sh" 2 "$healthy" 2 \
  >"$tmp/job.log" 2>&1 || rc=$?
[ $rc = 0 ] || { cat "$tmp/job.log"; no "venv's nccltrace run -- launch.sh 2 healthy exited $rc"; }
nccltrace collect --rings "$d/rings" --dir "$d/dumps" >/dev/null 2>&1 || true
n=$(find "$d/dumps" -name '*.zst' 2>/dev/null | wc -l)
[ "$n" = 2 ] || no "the traced job left $n dumps, want 2 (one per rank)"
ar=$(nccltrace decode "$d"/dumps/*.zst 2>/dev/null | grep -c AllReduce)
[ "$ar" -gt 0 ] || no "the job's dumps record no AllReduce"
cls=$(nccltrace analyze --json "$d" | python -c 'import json,sys; print(json.load(sys.stdin)["verdict"]["class"])') ||
  no "venv's nccltrace analyze --json failed"
[ "${cls:-}" = healthy ] || no "verdict '${cls:-}' for a healthy job, want healthy"

[ $fail = 0 ] && echo "ok: pip install and pip wheel of $src in a fresh venv; command, python -m, preload_path and run work"
exit $fail
