# scripts/deps.sh -- sourced by run-tests.sh and demo.sh: install what the
# build needs from Debian when it is missing (apt-get; sudo when not root).
ntr_deps="meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev libzstd-dev libunwind-dev libxxhash-dev libjansson-dev openmpi-bin libopenmpi-dev valgrind python3 python3-venv libpython3-dev iproute2 util-linux"
ntr_install_deps() {
  local missing=() p
  for p in $ntr_deps; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} = 0 ] && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "nccltrace: could not install ${missing[*]} (apt-get failed); install them and rerun" >&2; return 1; }
}
