#!/usr/bin/env bash
# suite-counts.sh -- how many tests each meson suite holds, against the
# committed tests/suite-counts, so that a test or a suite that quietly stops
# being declared fails the run (run-tests.sh checks before it runs a suite).
#
#   scripts/suite-counts.sh CONFIG BUILDDIR   check one configured build
#   scripts/suite-counts.sh --update          rewrite tests/suite-counts from
#       the three configurations of run-tests.sh, configuring (not building)
#       build, build-asan and build-tsan where they are not configured yet
#
# CONFIG is one of the configurations below.  Per suite, the count is the
# number of tests that `meson introspect --tests` lists with that suite; the
# pseudo-suite @run is the number of tests the configuration's `meson test`
# runs (`meson test --list` with its arguments).
# Output: one "suite-counts: FAIL CONFIG SUITE: ..." line per suite whose
# count differs (run-tests.sh counts each as a failure), else one ok line.
# Exit: 0 all counts agree, 1 a count differs, 2 usage or meson error.
set -u
here=$PWD
cd "$(dirname "$0")/.." || exit 2
counts=tests/suite-counts

# config : build directory, CC, meson setup options, meson test options
# (the same as run-tests.sh's run_suite calls).
config_dir() { case $1 in default) echo build ;; sanitize) echo build-asan ;; tsan) echo build-tsan ;; *) return 1 ;; esac; }
config_cc() { case $1 in tsan) echo clang ;; *) echo "${CC:-}" ;; esac; } # empty: meson's choice
config_setup() {
  case $1 in
    sanitize) echo "-Db_sanitize=address,undefined -Db_lundef=false" ;;
    tsan) echo "-Db_sanitize=thread -Db_lundef=false" ;;
  esac
}
config_test() { case $1 in sanitize) echo "--suite sanitize" ;; tsan) echo "--suite tsan" ;; esac; }
configs="default sanitize tsan"

# measure CONFIG BUILDDIR: "CONFIG SUITE COUNT" lines, sorted by suite.
count_py='
import collections, json, sys
config, run = sys.argv[1], int(sys.argv[2])
n = collections.Counter()
for t in json.load(sys.stdin):
    for s in t["suite"]:
        n[s.split(":", 1)[-1]] += 1
print("%s @run %d" % (config, run))
for s in sorted(n):
    print("%s %s %d" % (config, s, n[s]))
'
measure() {
  local config=$1 dir=$2 list
  # Reconfigure first when a meson.build changed (builds nothing else):
  # introspection reads what the last configure wrote.
  ninja -C "$dir" build.ninja >/dev/null || { echo "suite-counts: reconfiguring $dir failed" >&2; return 2; }
  # shellcheck disable=SC2046
  list=$(meson test -C "$dir" --no-rebuild --list $(config_test "$config") 2>/dev/null) ||
    { echo "suite-counts: meson test -C $dir --list failed" >&2; return 2; }
  meson introspect --tests "$dir" | python3 -c "$count_py" "$config" "$(grep -c ' / ' <<<"$list")" ||
    { echo "suite-counts: meson introspect --tests $dir failed" >&2; return 2; }
}

if [ "${1:-}" = "--update" ]; then
  [ $# = 1 ] || { echo "usage: $0 --update" >&2; exit 2; }
  new=$(mktemp)
  trap 'rm -f "$new"' EXIT
  cat >"$new" <<'EOF'
# tests/suite-counts -- how many tests each meson suite holds in each build
# configuration of run-tests.sh (default: build, sanitize: build-asan with
# ASan+UBSan, tsan: build-tsan with clang and TSan).  @run is how many tests
# that configuration's `meson test` runs.  run-tests.sh fails a suite whose
# count differs.  After adding or removing a test, regenerate this file:
#   scripts/suite-counts.sh --update
# and commit it with the test.
# config suite tests
EOF
  for c in $configs; do
    d=$(config_dir "$c")
    if [ ! -f "$d/build.ninja" ]; then
      cc=$(config_cc "$c")
      # shellcheck disable=SC2046
      env ${cc:+CC=$cc} meson setup "$d" $(config_setup "$c") >"$d.setup.log" 2>&1 ||
        { cat "$d.setup.log"; echo "suite-counts: meson setup $d failed" >&2; exit 2; }
    fi
    measure "$c" "$d" >>"$new" || exit 2
  done
  cp "$new" "$counts"
  echo "suite-counts: wrote $counts"
  exit 0
fi

if [ $# != 2 ] || ! config_dir "$1" >/dev/null; then
  echo "usage: $0 CONFIG BUILDDIR | --update  (CONFIG: $configs)" >&2; exit 2
fi
config=$1
dir=$(cd "$here" && cd "$2" && pwd) || exit 2
[ -f "$counts" ] || { echo "suite-counts: FAIL $config: no $counts (scripts/suite-counts.sh --update)"; exit 1; }
have=$(measure "$config" "$dir") || exit 2
want=$(grep -v '^#' "$counts" | awk -v c="$config" '$1 == c')
python3 - "$config" "$have" "$want" <<'EOF'
import sys
config = sys.argv[1]
def table(text):
    return {f[1]: int(f[2]) for f in (l.split() for l in text.splitlines()) if len(f) == 3}
have, want = table(sys.argv[2]), table(sys.argv[3])
bad = 0
for s in sorted(set(have) | set(want)):
    h, w = have.get(s, 0), want.get(s, 0)
    if h != w:
        what = "fewer" if h < w else "more"
        print("suite-counts: FAIL %s %s: %d tests, tests/suite-counts says %d (%d %s; "
              "scripts/suite-counts.sh --update after adding or removing a test)" % (config, s, h, w, abs(h - w), what))
        bad += 1
if not bad:
    print("suite-counts: %s ok (%d suites, %d tests run)" % (config, len(have) - 1, have.get("@run", 0)))
sys.exit(1 if bad else 0)
EOF
