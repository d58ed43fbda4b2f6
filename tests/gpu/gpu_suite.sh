#!/usr/bin/env bash
# gpu_suite.sh BUILDDIR -- the `gpu` suite: examples/gpu-check.sh's checks on
# this machine's NVIDIA GPUs with this build.  Without a GPU: skip (77).
# The GPU is looked for without any CUDA call (a call into a wedged driver
# can hang): the device node, then nvidia-smi -L under a timeout.
# Exit: 0 every check passed, 1 a check failed, 77 no GPU or no real NCCL.
set -u
[ $# = 1 ] || { echo "usage: $0 BUILDDIR" >&2; exit 2; }
if [ ! -e /dev/nvidia0 ]; then
  echo "SKIP: no /dev/nvidia0 (no NVIDIA GPU here)"; exit 77
fi
if ! command -v nvidia-smi >/dev/null; then
  echo "SKIP: /dev/nvidia0 but no nvidia-smi"; exit 77
fi
if ! timeout -k 5 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: nvidia-smi -L lists no GPU (or did not answer in 30 s)"; exit 77
fi
exec "$(dirname "$0")/../../examples/gpu-check.sh" --build "$1"
