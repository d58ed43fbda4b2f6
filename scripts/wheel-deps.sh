#!/usr/bin/env bash
# scripts/wheel-deps.sh -- download the pinned build backend of pyproject.toml
# (meson-python and what it needs: meson, pyproject-metadata, packaging) as
# wheels into .wheel-deps at the top of the tree, the first time and only
# then; run-tests.sh runs it before the tests, and test install_pip runs it
# too.  The test then installs them into a fresh venv with
# `pip install --no-index --find-links .wheel-deps` and builds nccltrace with
# --no-build-isolation: after the first download it needs no network.
#
#   scripts/wheel-deps.sh           download when missing, print the directory
#
# About 1.2 MB.  Nothing is installed here.
# Exit: 0 downloaded (or already there), 1 the download failed (one line why).
set -u
cd "$(dirname "$0")/.." || exit 1
pins="meson-python==0.22.1 meson==1.12.1 pyproject-metadata==0.12.1 packaging==26.4"
dir=$PWD/.wheel-deps
stamp="$dir/.nccltrace-installed"
if [ "$(cat "$stamp" 2>/dev/null)" = "$pins" ]; then
  echo "$dir"; exit 0
fi
py=$(command -v python3) || { echo "wheel-deps: no python3 to run pip with" >&2; exit 1; }
tmp=$(mktemp -d "$PWD/.wheel-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "wheel-deps: downloading $pins into $dir (about 1.2 MB, once)" >&2
# shellcheck disable=SC2086  # $pins is a list of requirements
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" $pins >&2 ||
  { echo "wheel-deps: pip download $pins failed (is PyPI reachable?)" >&2; exit 1; }
echo "$pins" >"$tmp/.nccltrace-installed"
rm -rf "$dir" && mv "$tmp" "$dir" || exit 1
echo "$dir"
