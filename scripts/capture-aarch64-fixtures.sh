#!/usr/bin/env bash
# Regenerates the aarch64 unwinder fixtures in tests/fixtures/aarch64/ on
# any host: builds tests/apps/stack_selfcapture.c with the aarch64 cross
# compiler (static, so the fixture is self-contained) and runs it under
# qemu-aarch64-static, which emulates /proc/self/maps for the guest. Each
# run captures, at a known deep point (main -> outer -> middle -> [inlined
# helper] -> inner -> capture), what a perf sample carries: the user
# registers in PERF_SAMPLE_REGS_USER order, 16 KiB of stack from SP with
# its dyn_size, and the maps; and a second capture (jit/) taken through an
# anonymous-memory JIT trampoline.
#
#   scripts/capture-aarch64-fixtures.sh
#
# Needs (Debian): gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
set -euo pipefail

cd "$(dirname "$0")/.."
out=tests/fixtures/aarch64
src=tests/apps/stack_selfcapture.c
cc=${CC_AARCH64:-aarch64-linux-gnu-gcc}
qemu=${QEMU_AARCH64:-qemu-aarch64-static}

for tool in "$cc" "$qemu"; do
  if ! command -v "$tool" >/dev/null; then
    echo "capture-aarch64-fixtures: $tool not found;" \
         "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static" >&2
    exit 1
  fi
done

# name | compiler flags | qemu cpu
variants=(
  "static|-static|cortex-a57"
  "static-pie|-static-pie|cortex-a57"
  "pac|-static -mbranch-protection=standard|max"
)

work=$(mktemp -d /tmp/jankbpf-fixtures.XXXXXX)
trap 'rm -rf "$work"' EXIT

for v in "${variants[@]}"; do
  IFS='|' read -r name flags cpu <<<"$v"
  dir=$out/$name
  rm -rf "$dir"
  mkdir -p "$dir" "$work/$name"
  # As shipped: optimized, no frame pointers, with line info.
  # shellcheck disable=SC2086
  "$cc" -O2 -g -fomit-frame-pointer -Wall $flags "$src" -o "$work/$name/stack_selfcapture"
  (cd "$work/$name" && "$qemu" -cpu "$cpu" ./stack_selfcapture "$work/$name/capture")
  cp "$work/$name/stack_selfcapture" "$dir/stack_selfcapture"
  cp "$work/$name/capture/regs.txt" "$work/$name/capture/stack.bin" "$work/$name/capture/maps" "$dir/"
  # The same binary through JIT code (frame records, no CFI): jit/ holds
  # that capture and the perf map naming the JIT code.
  (cd "$work/$name" && "$qemu" -cpu "$cpu" ./stack_selfcapture "$work/$name/capture-jit" jit)
  mkdir -p "$dir/jit"
  cp "$work/$name/capture-jit/regs.txt" "$work/$name/capture-jit/stack.bin" \
     "$work/$name/capture-jit/maps" "$work/$name/capture-jit/perf.map" "$dir/jit/"
  {
    echo "source: $src"
    echo "built: $cc -O2 -g -fomit-frame-pointer -Wall $flags"
    echo "compiler: $("$cc" --version | head -1)"
    echo "ran: $qemu -cpu $cpu ($("$qemu" --version | head -1))"
  } >"$dir/README"
  echo "capture-aarch64-fixtures: $dir ($(stat -c %s "$dir/stack_selfcapture") byte binary)"
done
