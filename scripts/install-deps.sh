#!/usr/bin/env bash
# Install, from Debian packages only, whatever jankbpf needs to build and test
# that is not installed yet. Idempotent: a second run installs nothing and
# does not touch the network.
#
#   scripts/install-deps.sh [x86|arm64|kernels]
#
# arm64 adds the aarch64 cross toolchain and the arm64 multiarch -dev
# packages needed by `make ARCH=arm64`, plus qemu-user-static to run the
# result. kernels adds to that what the kernel lane (make kernels) boots
# with: qemu-system for x86_64 and arm64, busybox-static, binutils
# (readelf), e2fsprogs (mkfs.ext4: the guest's disk for causes fault and
# io). The lane itself fetches, without installing, the guest kernels
# and the arm64 guest tools (apt-get download into build/kernel-lane/cache).
set -euo pipefail

arch=${1:-x86}

# Build and runtime dependencies of the native build, and what `make test`
# and `make bench` drive. sys/sdt.h (systemtap-sdt-dev) and GLib
# (libglib2.0-dev) build the marker test targets.
pkgs=(
  make clang llvm gcc g++ pkg-config
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev catch2
  trace-cmd
  python3 python3-pytest nodejs
  systemtap-sdt-dev libglib2.0-dev
  # The Wayland test client (tests/apps/wayland/wl_frames.c): libwayland-client,
  # wayland-scanner and the xdg-shell and presentation-time protocols.
  libwayland-dev libwayland-bin wayland-protocols
  # The libFuzzer targets (make fuzz): clang's fuzzer, ASan and UBSan
  # runtimes are in Debian's libclang-rt-14-dev, not in clang itself.
  libclang-rt-14-dev
  # Running as a service: `make deb` (debhelper, lintian), the unit and
  # rotation checks (systemd-analyze, logrotate, man), the schema and OTel
  # recipe tests (python3-jsonschema, python3-yaml), the unit's sandbox
  # rebuilt as seccomp (python3-seccomp), and the metrics test's real
  # Prometheus scraping a real redis-server.
  debhelper lintian systemd logrotate man-db
  python3-jsonschema python3-yaml python3-seccomp
  prometheus redis-server redis-tools
)

# arm64 (make ARCH=arm64): the cross compilers (they pull in the arm64 libc
# and libstdc++ under /usr/aarch64-linux-gnu); the libraries jankbpf links,
# as arm64 multiarch packages (headers in /usr/include, which the Debian
# cross gcc searches, libraries in /usr/lib/aarch64-linux-gnu); pkgconf:arm64
# for aarch64-linux-gnu-pkg-config; qemu-user-static and file for
# scripts/check-arm64.sh, which runs the result on this machine; GLib and
# sys/sdt.h as arm64 too, for the test targets (make ARCH=arm64 apps). On an
# arm64 host ARCH=arm64 is the native build and needs none of this.
native=$(dpkg --print-architecture)
if [[ $arch == kernels ]]; then
  pkgs+=(qemu-system-x86 qemu-system-arm busybox-static binutils file e2fsprogs)
  arch=arm64
fi
if [[ $arch == arm64 && $native != arm64 ]]; then
  pkgs+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static file
         libbpf-dev:arm64 libelf-dev:arm64 libdw-dev:arm64 zlib1g-dev:arm64
         pkgconf:arm64 libglib2.0-dev:arm64 systemtap-sdt-dev:arm64)
fi

# Installed means "install ok installed" for the wanted architecture: the
# native one (or "all") for a plain name, the given one for name:arch. A
# plain name must not match only its :arm64 twin, and with both installed
# dpkg-query prints one status per architecture.
installed() {
  local name=${1%%:*} want=$native
  [[ $1 == *:* ]] && want=${1#*:}
  dpkg-query -W -f='${Architecture} ${Status}\n' "$name" 2>/dev/null |
    grep -Eqx "($want|all) install ok installed"
}

missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
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
if [[ $arch == arm64 && $native != arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
. "$(dirname "$0")/apt-install.sh"
apt_install "${missing[@]}"
