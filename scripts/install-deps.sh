#!/usr/bin/env bash
# Install, from Debian packages only, whatever jankbpf needs to build and test
# that is not installed yet. Idempotent: a second run installs nothing and
# does not touch the network.
#
#   scripts/install-deps.sh [x86|arm64]
#
# arm64 adds the aarch64 cross toolchain and the arm64 multiarch -dev
# packages needed by `make ARCH=arm64`, plus qemu-user-static to run the
# result.
set -euo pipefail

arch=${1:-x86}

# Build and runtime dependencies of the native build, and what `make test`
# and `make bench` drive.
pkgs=(
  make clang llvm gcc g++ pkg-config
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev catch2
  trace-cmd
  python3 python3-pytest
)

if [[ $arch == arm64 ]]; then
  pkgs+=(g++-aarch64-linux-gnu gcc-aarch64-linux-gnu qemu-user-static
         libbpf-dev:arm64 libelf-dev:arm64 libdw-dev:arm64 zlib1g-dev:arm64)
fi

missing=()
for p in "${pkgs[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (sudo make deps) to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
if [[ $arch == arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
