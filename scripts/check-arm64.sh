#!/usr/bin/env bash
# Check that the arm64 cross build is real: build/arm64/jankbpf exists, is an
# ARM aarch64 ELF executable (with an arm64 BPF object next to it), and runs
# `--version` under qemu-user against the arm64 libraries of this machine.
#
#   scripts/check-arm64.sh [--no-build] [--unit] [BINARY]
#
# By default it first runs `make ARCH=arm64` (incremental) so the check is of
# the current sources; --no-build checks BINARY (default build/arm64/jankbpf)
# as it is. --unit also builds the arm64 unit-test binary and runs, under
# qemu, the tests of pure userspace logic (tags in $UNIT_TAGS), where the
# arm64 tables are the host's; tests that need a live kernel, perf or
# tracefs are not meaningful under qemu-user and are left out.
# Exit 0 and one "check-arm64: ok ..." line on success; exit 1 with
# "check-arm64: FAIL: <reason>" otherwise. It never skips: a machine without
# the cross toolchain or qemu fails, naming `make deps ARCH=arm64` (root).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

build=1
unit=0
bin=build/arm64/jankbpf
UNIT_TAGS=${UNIT_TAGS:-[arch],[cli],[config],[output],[record],[quota],[elf],[proc],[v8],[hotspot]}
for a in "$@"; do
  case $a in
    --no-build) build=0 ;;
    --unit) unit=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    -*) echo "check-arm64: FAIL: unknown option $a" >&2; exit 1 ;;
    *) bin=$a ;;
  esac
done

fail() { echo "check-arm64: FAIL: $*" >&2; exit 1; }
sysroot=/usr/aarch64-linux-gnu
qemu=qemu-aarch64-static
hint="install the cross set with: sudo make deps ARCH=arm64"

command -v aarch64-linux-gnu-g++ >/dev/null || fail "aarch64-linux-gnu-g++ not found; $hint"
command -v "$qemu" >/dev/null || fail "$qemu not found; $hint"
command -v file >/dev/null || fail "file not found; $hint"
[[ -e $sysroot/lib/ld-linux-aarch64.so.1 ]] || fail "$sysroot/lib/ld-linux-aarch64.so.1 missing; $hint"

if (( build )); then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  if ! make --no-print-directory ARCH=arm64 all > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "make ARCH=arm64 failed (last lines above)"
  fi
fi

[[ -f $bin ]] || fail "$bin does not exist (make ARCH=arm64)"
desc=$(file -b "$bin")
[[ $desc == *"ELF 64-bit"*"ARM aarch64"* ]] || fail "$bin is not an ARM aarch64 ELF: $desc"
[[ $desc == *executable* ]] || fail "$bin is not an executable: $desc"

# The BPF side of an arm64 build is compiled with -D__TARGET_ARCH_arm64
# against bpf/vmlinux/arm64/vmlinux.h; its objects sit next to the binary.
objs=("$(dirname "$bin")"/*.bpf.o)
[[ -e ${objs[0]} ]] || fail "no BPF object next to $bin"
for o in "${objs[@]}"; do
  [[ $(file -b "$o") == *"eBPF"* ]] || fail "$o is not an eBPF object: $(file -b "$o")"
done

out=$(timeout 60 "$qemu" -L "$sysroot" "$bin" --version 2>&1)
rc=$?
(( rc == 0 )) || fail "'$qemu -L $sysroot $bin --version' exited $rc: $out"
first=${out%%$'\n'*}
[[ $first =~ ^jankbpf\ [^[:space:]]+ ]] || fail "--version printed '$out', expected 'jankbpf <version>'"

msg="$bin is ARM aarch64, runs under qemu: $first"

if (( unit )); then
  ubin=$(dirname "$bin")/jankbpf-unit
  if (( build )); then
    if ! make --no-print-directory ARCH=arm64 unit-bin > "$log" 2>&1; then
      tail -n 40 "$log" >&2
      fail "make ARCH=arm64 unit-bin failed (last lines above)"
    fi
  fi
  [[ -f $ubin ]] || fail "$ubin does not exist (make ARCH=arm64 unit-bin)"
  # Started through the arm64 ld.so rather than with -L: -L makes qemu map
  # every absolute path into the sysroot when it exists there, "/" included,
  # so the tests that walk real paths component by component would walk the
  # sysroot instead of this machine's /tmp.
  uout=$(timeout 300 "$qemu" "$sysroot/lib/ld-linux-aarch64.so.1" \
           --library-path "$sysroot/lib:/usr/lib/aarch64-linux-gnu" "$ubin" "$UNIT_TAGS" 2>&1)
  rc=$?
  if (( rc != 0 )) || [[ $uout != *"All tests passed"* ]]; then
    printf '%s\n' "$uout" | tail -n 40 >&2
    fail "arm64 unit tests $UNIT_TAGS under qemu: exit $rc (output above)"
  fi
  msg+="; unit ${UNIT_TAGS}: ${uout##*All tests passed }"
fi

echo "check-arm64: ok: $msg"
