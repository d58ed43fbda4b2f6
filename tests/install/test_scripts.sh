#!/usr/bin/env bash
# test_scripts.sh -- the user-facing shell scripts parse (bash -n), and pass
# shellcheck when it is installed.   test_scripts.sh SRC_ROOT   Exit 0 or 1.
set -eu
cd "$1"
fail=0
for f in demo.sh examples/gpu-check.sh examples/torch/run_all.sh; do
  [ -f "$f" ] || { echo "FAIL: $f missing"; fail=1; continue; }
  bash -n "$f" || { echo "FAIL: bash -n $f"; fail=1; }
  if command -v shellcheck >/dev/null; then
    shellcheck -x -S warning "$f" || { echo "FAIL: shellcheck $f"; fail=1; }
  fi
done
exit $fail
