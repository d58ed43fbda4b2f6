#!/usr/bin/env bash
# make.sh MKFIX NCCLTRACE [DIR] -- write the golden files of the current
# format version (DIR, default v2 beside this script): two ranks' dumps and a
# ring file from the synthetic fixture (tests/tools/fixture.h), and what
# `nccltrace` says of them (decode, decode --json, analyze, export --chrome).
# test_golden.py checks that every reader still says exactly that.  Rerun it
# only for a new format version, into a new directory: the files of an old
# version stay as they are, since they are what old dumps look like.
# The ring's pid (4194400) is above the largest pid_max (2^22), so it never reads as alive.
set -eu
mkfix=${1:?usage: make.sh MKFIX NCCLTRACE [DIR]}
ntt=${2:?usage: make.sh MKFIX NCCLTRACE [DIR]}
dir=${3:-$(dirname "$0")/v2}
mkdir -p "$dir"
cd "$dir"
"$mkfix" dump r0.zst --pid 4242 --host golden --rank 0 --trigger 1
"$mkfix" dump r1.zst --pid 4243 --host golden --rank 1 --trigger 1
"$mkfix" ring r0.ring --pid 4194400 --host golden --rank 0 --slots 64
for f in r0.zst r1.zst r0.ring; do
  "$ntt" decode "$f" >"$f.decode"
  "$ntt" decode --json "$f" >"$f.json"
done
"$ntt" analyze r0.zst r1.zst >analyze.txt
"$ntt" export --chrome r0.zst r1.zst -o export.json
