#!/usr/bin/env bash
# run-tests.sh -- install build dependencies if missing, build, run the whole
# test suite, print "N passed, N failed" last.  Before a configuration's
# tests run, the number of tests in each of its suites is checked against
# tests/suite-counts (scripts/suite-counts.sh): each suite that differs is
# one failure, so a test that stops being declared fails the run.
#   ./run-tests.sh              default build + full suite
#   ./run-tests.sh --sanitizers also the fast suite under ASan+UBSan and TSan
# With CI set: the sanitizers, and a release build (build only).
# Exit status: 0 when everything passed.
set -u
cd "$(dirname "$0")" || exit 1
. ./scripts/deps.sh
ntr_install_deps || exit 1

sanitizers=0
[ "${1:-}" = "--sanitizers" ] && sanitizers=1
[ -n "${CI:-}" ] && sanitizers=1

passed=0; failed=0
run_suite() { # config (of tests/suite-counts), builddir, meson setup args..., then -- meson test args
  local config=$1 dir=$2; shift 2
  local setup=() testargs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  testargs=("$@")
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "${setup[@]}" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; failed=$((failed+1)); return; }
  fi
  local counts rc
  counts=$(scripts/suite-counts.sh "$config" "$dir" 2>&1); rc=$?
  echo "$counts"
  if [ $rc = 1 ]; then
    failed=$((failed + $(grep -c '^suite-counts: FAIL' <<<"$counts")))
  elif [ $rc != 0 ]; then
    failed=$((failed+1))
  fi
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    tail -50 "$dir.build.log"; echo "BUILD FAILED: $dir"; failed=$((failed+1)); return
  fi
  meson test -C "$dir" --print-errorlogs "${testargs[@]}" 2>&1 | tee "$dir.test.log" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' 
  local ok fl to
  ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$dir.test.log" | tail -1)
  fl=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$dir.test.log" | tail -1)
  to=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$dir.test.log" | tail -1)
  [ -z "$ok" ] && [ -z "$fl" ] && { echo "no test summary from $dir"; failed=$((failed+1)); return; }
  # A failure's own log (--print-errorlogs) is what CI keeps: show its tail.
  if [ "${fl:-0}" != 0 ] || [ "${to:-0}" != 0 ]; then
    grep -vE '^ *[0-9]+/[0-9]+ ' "$dir.test.log" | tail -150
  fi
  passed=$((passed + ${ok:-0})); failed=$((failed + ${fl:-0} + ${to:-0}))
}

# Build only, once: the optimized build (-O3) warns where -O0 cannot see,
# and -Werror makes that a failure; a packager builds this type.
build_only() { # builddir, meson setup args...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; failed=$((failed+1)); return; }
  fi
  if ninja -C "$dir" >"$dir.build.log" 2>&1; then
    passed=$((passed+1)); echo "build $dir: ok"
  else
    tail -50 "$dir.build.log"; echo "BUILD FAILED: $dir"; failed=$((failed+1))
  fi
}

# The pinned PyTorch CUDA wheel for suite 'torch' (once: scripts/torch-env.sh).
# A failed install is a failure here, and every torch test fails saying why.
scripts/torch-env.sh >/dev/null || { echo "torch-env: FAILED: the torch suite cannot run"; failed=$((failed+1)); }
# The newest NCCL release, whose exports symbol_agreement and emu_symbols
# compare against (once: scripts/nccl-newest.sh); a failed fetch fails them.
scripts/nccl-newest.sh >/dev/null || { echo "nccl-newest: FAILED: the symbol tests cannot run"; failed=$((failed+1)); }
# meson-python for `pip install` of this tree in a fresh venv (once:
# scripts/wheel-deps.sh; test install_pip); a failed fetch fails that test.
scripts/wheel-deps.sh >/dev/null || { echo "wheel-deps: FAILED: install_pip cannot run"; failed=$((failed+1)); }

mkdir -p build
run_suite default build --
[ -n "${CI:-}" ] && build_only build-release --buildtype=release
if [ $sanitizers = 1 ]; then
  # The same options and suites as scripts/suite-counts.sh's configurations.
  run_suite sanitize build-asan -Db_sanitize=address,undefined -Db_lundef=false -- --suite sanitize
  CC=clang run_suite tsan build-tsan -Db_sanitize=thread -Db_lundef=false -- --suite tsan
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
