#!/usr/bin/env bash
# scripts/torch-env.sh -- install the pinned PyTorch CUDA wheel into the
# project's venv (.torch-venv at the top of the tree), the first time and
# only then; run-tests.sh runs it before the tests (suite 'torch').
#
#   scripts/torch-env.sh            install when missing, print the venv's python
#   NCCLTRACE_TORCH_VENV=DIR        another place for the venv
#
# The pin: torch 2.11.0 is the release whose PyPI wheel is built for CUDA 13
# (it loads libcudart.so.13, like the emulator's runtime) against NCCL
# 2.28.9, the NCCL of the toolkit here and of the emulator; torch 2.12 and
# later are built against NCCL 2.29+, 2.10 and earlier against CUDA 12.
# The first install downloads about 2.8 GB (torch and the nvidia-* wheels)
# and takes about 2 minutes here; the venv then uses about 4.7 GB.
# Exit: 0 installed (or already there), 1 the install failed (one line why).
set -u
cd "$(dirname "$0")/.." || exit 1
pin="torch==2.11.0"
venv=${NCCLTRACE_TORCH_VENV:-$PWD/.torch-venv}
stamp="$venv/.nccltrace-installed"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
  echo "$venv/bin/python"; exit 0
fi
py=$(command -v python3) || { echo "torch-env: no python3 to make the venv with" >&2; exit 1; }
echo "torch-env: installing $pin (CUDA 13 build) and numpy into $venv (about 2.8 GB, once)" >&2
"$py" -m venv "$venv" >&2 || { echo "torch-env: '$py -m venv $venv' failed" >&2; exit 1; }
"$venv/bin/pip" install -q --disable-pip-version-check "$pin" numpy >&2 ||
  { echo "torch-env: pip install $pin failed (is PyPI reachable?)" >&2; exit 1; }
"$venv/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' ||
  { echo "torch-env: $pin installed but not importable" >&2; exit 1; }
echo "$pin" >"$stamp"
echo "$venv/bin/python"
