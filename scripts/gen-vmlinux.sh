#!/usr/bin/env bash
# Regenerate the pinned bpf/vmlinux/<arch>/vmlinux.h that the BPF side is
# compiled against (CO-RE: the header gives the types, libbpf relocates the
# field offsets at load time, so one header per arch serves every kernel).
#
#   scripts/gen-vmlinux.sh x86      (make vmlinux on an x86_64 host)
#   scripts/gen-vmlinux.sh arm64    (make vmlinux ARCH=arm64, on any host)
#
# x86:   `bpftool btf dump file /sys/kernel/btf/vmlinux format c` of the
#        running kernel. Only on an x86_64 host (the BTF must be x86's).
#        The header pinned in the repo came from Linux 6.18 this way.
#
# arm64: the BTF of a real Debian arm64 kernel, taken from a Debian package
#        only, so it can be made on an x86_64 machine and gives the same
#        bytes every time:
#          package  linux-image-6.1.0-56-arm64-unsigned
#          version  6.1.192-2 (bookworm-security, source package `linux`)
#          deb sha256 f8357fc813e879efb7f467f5b8a37e2426e177bb3d683fac644d70a8343e6a49
#        Steps, in a temporary directory that is removed afterwards:
#          1. a private apt state (lists, cache, empty dpkg status) for
#             arm64 over this machine's configured Debian sources, so
#             neither root nor `dpkg --add-architecture arm64` is needed;
#          2. apt-get download of exactly that package version (apt checks
#             it against the signed index), then the sha256 above;
#          3. dpkg-deb extracts only ./boot/vmlinuz-*: on Debian arm64 this
#             is the plain (uncompressed) arm64 Image; gzip/zstd/xz are
#             unpacked if a later kernel ships it compressed;
#          4. the .BTF data is part of the loaded image: find the one BTF
#             blob (magic 0xeB9F, version 1, header: magic u16, version u8,
#             flags u8, hdr_len u32, type_off, type_len, str_off, str_len;
#             must be self-consistent and end inside the file), cut it out
#             to a raw file;
#          5. `bpftool btf dump file RAW format c`, with a provenance
#             comment in front.
#        Another kernel: ARM64_KERNEL_PKG=... ARM64_KERNEL_VERSION=...
#        [ARM64_KERNEL_SHA256=...|skip] scripts/gen-vmlinux.sh arm64, e.g.
#        when Debian has dropped the pinned version from its archive.
#        (If that happens, update the three pins above together.)
#
# VMLINUX_FROM=running makes arm64 use the running kernel instead, on an
# aarch64 host. Output is written atomically (temp file, then rename).
set -euo pipefail

die() { echo "gen-vmlinux: $*" >&2; exit 1; }

arch=${1:-}
case $arch in
  x86|arm64) ;;
  *) die "usage: $0 x86|arm64" ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bpf/vmlinux/$arch/vmlinux.h
host=$(uname -m)

ARM64_KERNEL_PKG=${ARM64_KERNEL_PKG:-linux-image-6.1.0-56-arm64-unsigned}
ARM64_KERNEL_VERSION=${ARM64_KERNEL_VERSION:-6.1.192-2}
if [[ -z ${ARM64_KERNEL_SHA256:-} ]]; then
  if [[ $ARM64_KERNEL_PKG == linux-image-6.1.0-56-arm64-unsigned && $ARM64_KERNEL_VERSION == 6.1.192-2 ]]; then
    ARM64_KERNEL_SHA256=f8357fc813e879efb7f467f5b8a37e2426e177bb3d683fac644d70a8343e6a49
  else
    ARM64_KERNEL_SHA256=skip
  fi
fi

command -v bpftool >/dev/null || die "bpftool not found (make deps)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gen-vmlinux.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Write bpftool's dump of a BTF file to $out via a temp file in its folder.
dump_to_out() { # btf-file [comment]
  local part
  mkdir -p "$(dirname "$out")"
  part=$(mktemp "$out.XXXXXX")
  {
    if [[ -n ${2:-} ]]; then printf '%s\n' "$2"; fi
    bpftool btf dump file "$1" format c
  } > "$part" || { rm -f "$part"; die "bpftool btf dump failed for $1"; }
  chmod 0644 "$part"
  mv -f "$part" "$out"
  echo "gen-vmlinux: wrote $out ($(wc -c < "$out") bytes)" >&2
}

from_running() {
  local want=$1
  [[ $host == "$want" ]] ||
    die "$arch: the running kernel is $host, not $want; its BTF would describe the wrong arch"
  [[ -r /sys/kernel/btf/vmlinux ]] ||
    die "/sys/kernel/btf/vmlinux missing: kernel built without CONFIG_DEBUG_INFO_BTF"
  dump_to_out /sys/kernel/btf/vmlinux
}

if [[ $arch == x86 ]]; then
  from_running x86_64
  exit 0
fi

if [[ ${VMLINUX_FROM:-package} == running ]]; then
  from_running aarch64
  exit 0
fi

# --- arm64 from the Debian kernel package ---------------------------------
for t in apt-get dpkg-deb python3 sha256sum; do
  command -v $t >/dev/null || die "$t not found"
done

apt_dir=$tmp/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/state"
: > "$apt_dir/status"
apt_opts=(
  -q -o Dir::State="$apt_dir/state" -o Dir::State::Lists="$apt_dir/lists"
  -o Dir::State::status="$apt_dir/status" -o Dir::Cache="$apt_dir/cache"
  -o APT::Architecture=arm64 -o APT::Architectures::=arm64
  -o Debug::NoLocking=1
)
# As root apt drops to _apt, which cannot write into our private 0700 dir.
if [[ $(id -u) -eq 0 ]]; then apt_opts+=(-o APT::Sandbox::User=root); fi

echo "gen-vmlinux: fetching arm64 package lists" >&2
apt-get "${apt_opts[@]}" update >&2 || die "apt-get update (private arm64 lists) failed"
available=$(apt-cache "${apt_opts[@]}" madison "$ARM64_KERNEL_PKG" 2>/dev/null | awk '{print $3}' | sort -u | xargs echo)
if ! grep -qx -- "$ARM64_KERNEL_VERSION" <<< "${available// /$'\n'}"; then
  die "$ARM64_KERNEL_PKG $ARM64_KERNEL_VERSION (arm64) is not in the configured Debian archive (any more)
  versions of $ARM64_KERNEL_PKG there: ${available:-none}
  linux-image-arm64 now: $(apt-cache "${apt_opts[@]}" madison linux-image-arm64 2>/dev/null | awk '{print $3}' | xargs echo)
  rerun with ARM64_KERNEL_PKG=linux-image-<abi>-arm64-unsigned ARM64_KERNEL_VERSION=<version>, then update the pins at the top of $0"
fi

echo "gen-vmlinux: downloading $ARM64_KERNEL_PKG $ARM64_KERNEL_VERSION (arm64)" >&2
(cd "$tmp" && apt-get "${apt_opts[@]}" download "$ARM64_KERNEL_PKG=$ARM64_KERNEL_VERSION" >&2) ||
  die "apt-get download $ARM64_KERNEL_PKG=$ARM64_KERNEL_VERSION failed"
deb=$(ls "$tmp"/*.deb)
if [[ $ARM64_KERNEL_SHA256 != skip ]]; then
  echo "$ARM64_KERNEL_SHA256  $deb" | sha256sum --quiet -c - ||
    die "$deb: sha256 differs from the pinned $ARM64_KERNEL_SHA256"
fi

mkdir "$tmp/x"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards './boot/vmlinuz-*' ||
  die "no ./boot/vmlinuz-* in $deb"
image=$(ls "$tmp"/x/boot/vmlinuz-*)

# Unpack the image if it is compressed (Debian's 6.1 arm64 Image is not).
case $(head -c 4 "$image" | od -An -tx1 | tr -d ' \n') in
  1f8b*)    gzip -dc "$image" > "$tmp/Image" ;;
  28b52ffd) zstd -dcq "$image" > "$tmp/Image" ;;
  fd377a58) xz -dc "$image" > "$tmp/Image" ;;
  *)        mv "$image" "$tmp/Image" ;;
esac

python3 - "$tmp/Image" "$tmp/vmlinux.btf" <<'EOF' || die "no BTF blob found in the arm64 Image"
import struct, sys
data = open(sys.argv[1], 'rb').read()
found = []
i = data.find(b'\x9f\xeb\x01\x00')          # magic 0xeB9F (LE), version 1
while i >= 0:
    if i + 24 <= len(data):
        _, _, _, hdr_len, toff, tlen, soff, slen = struct.unpack_from('<HBBIIIII', data, i)
        end = i + hdr_len + max(toff + tlen, soff + slen)
        if (hdr_len == 24 and toff == 0 and soff == tlen and tlen > 0 and slen > 0
                and end <= len(data) and data[i + hdr_len + soff] == 0 and data[end - 1] == 0):
            found.append((i, end))
    i = data.find(b'\x9f\xeb\x01\x00', i + 1)
if len(found) != 1:
    sys.exit(f"expected one BTF blob, found {len(found)}: {found}")
start, end = found[0]
open(sys.argv[2], 'wb').write(data[start:end])
print(f"gen-vmlinux: BTF at image offset {start:#x}, {end - start} bytes", file=sys.stderr)
EOF

bpftool_ver=$(bpftool version | head -1)
dump_to_out "$tmp/vmlinux.btf" \
  "/* Generated by scripts/gen-vmlinux.sh arm64 from the BTF in Debian's $ARM64_KERNEL_PKG $ARM64_KERNEL_VERSION (arm64) with $bpftool_ver. Do not edit. */"
