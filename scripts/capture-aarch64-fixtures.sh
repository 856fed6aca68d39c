#!/usr/bin/env bash
# Regenerates the aarch64 unwinder fixtures in tests/fixtures/aarch64/.
#
#   scripts/capture-aarch64-fixtures.sh            qemu-user captures
#   scripts/capture-aarch64-fixtures.sh --kernel   real-kernel captures
#   scripts/capture-aarch64-fixtures.sh --jvm      an arm64 JVM's samples
#
# Default: builds tests/apps/stack_selfcapture.c with the aarch64 cross
# compiler (static, so the fixture is self-contained) and runs it under
# qemu-aarch64-static, which emulates /proc/self/maps for the guest. Each
# run captures, at a known deep point (main -> outer -> middle -> [inlined
# helper] -> inner -> capture), what a perf sample carries: the user
# registers in PERF_SAMPLE_REGS_USER order, 16 KiB of stack from SP with
# its dyn_size, and the maps; and a second capture (jit/) taken through an
# anonymous-memory JIT trampoline.
#
# --kernel: real perf samples from Debian 12's own arm64 kernel, which
# qemu-user is not. Fetches (apt-get download, into $WORK, default
# /var/tmp/jankbpf-arm64-kernel-capture: not under build/, whose *.d the
# Makefile includes) the newest linux-image-6.1.0-*-arm64,
# busybox-static, linux-perf and the libraries perf needs, all :arm64;
# builds tests/apps/stack_vdso_loop.c twice (-O2 -fomit-frame-pointer, and
# again with -mbranch-protection=standard), dynamically linked against
# Debian's libc6:arm64, and tests/apps/stack_perf_sampler.c; boots
# `qemu-system-aarch64 -M virt -cpu max -accel tcg` (pointer
# authentication, BTI, SVE) on an initramfs that runs each target under
# `perf record --call-graph dwarf` (the reference) while stack_perf_sampler
# records what jankbpf's sampler records; results come back base64 on the
# console. Writes tests/fixtures/aarch64/kernel-6.1/{nopac,pac}/: the
# target, samples.bin (the samples taken inside its three CPU tasks, at
# most $KEEP), attr.txt, maps, vdso.so, tasks.txt, perf-chains.txt (perf's
# chains of the same tasks, counted) and README (with the libc build-id the
# replay checks against /usr/lib/aarch64-linux-gnu/libc.so.6).
#
# --jvm: Java frames (issue 29). Fetches (apt-get download, into $WORK,
# default /var/tmp/jankbpf-arm64-jvm-capture) Debian's
# openjdk-17-jre-headless:arm64 and libstdc++6:arm64, builds
# tests/apps/java/hs_capture.c for aarch64 (a native method that takes its
# own thread's sample: under qemu-user there is no ptrace of guest
# registers) and HsCapture.java with the host's javac, runs the arm64 java
# under qemu-aarch64-static, and lets build/jankbpf-unit
# "[hotspot-capture-arm64]" read the JVM's memory (qemu maps the guest at
# the host's addresses) into tests/fixtures/hotspot/jdk17-aarch64.json: a
# sample from compiled frames (one inlined), one from interpreted ones.
#
# Needs (Debian): gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
# (default); qemu-system-arm cpio python3 and apt access to bookworm arm64
# (--kernel; libc6:arm64 comes with `make deps ARCH=arm64`).
set -euo pipefail

kernel_capture() {
  local work=${WORK:-/var/tmp/jankbpf-arm64-kernel-capture} keep=${KEEP:-48}
  local out=tests/fixtures/aarch64/kernel-6.1 cc=${CC_AARCH64:-aarch64-linux-gnu-gcc}
  local libc=/usr/lib/aarch64-linux-gnu/libc.so.6
  for tool in "$cc" qemu-system-aarch64 cpio python3 apt-get dpkg-deb readelf; do
    command -v "$tool" >/dev/null || { echo "capture-aarch64-fixtures: $tool not found" >&2; exit 1; }
  done
  [[ -e $libc ]] || { echo "capture-aarch64-fixtures: $libc missing (make deps ARCH=arm64)" >&2; exit 1; }
  mkdir -p "$work/debs"
  work=$(cd "$work" && pwd)
  local kpkg
  kpkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64$' | awk '{print $1}' | sort -V | tail -1)
  [[ -n $kpkg ]] || { echo "capture-aarch64-fixtures: no linux-image-6.1.0-*-arm64 in apt" >&2; exit 1; }
  # perf's libraries (and theirs), as in bookworm; the closure is checked below.
  local pkgs=("$kpkg" busybox-static linux-perf libc6 libbabeltrace1 libcap2 libdw1 libelf1
              liblzma5 libnuma1 libopencsd1 libperl5.36 libpython3.11 libslang2 libunwind8
              libzstd1 zlib1g libglib2.0-0 libuuid1 libpopt0 libbz2-1.0 libcrypt1 libexpat1
              libffi8 libgcc-s1 libstdc++6 libpcre2-8-0 libtinfo6 libssl3 libgdbm6 libdb5.3
              libsqlite3-0 libreadline8 libncursesw6 libgdbm-compat4)
  (cd "$work/debs" && for p in "${pkgs[@]}"; do
     ls "${p}"_*_arm64.deb >/dev/null 2>&1 || apt-get download "$p:arm64" >/dev/null ||
       { echo "capture-aarch64-fixtures: apt-get download $p:arm64 failed" >&2; exit 1; }
   done)
  local sys=$work/sysroot root=$work/initramfs
  rm -rf "$sys" "$root" "$work/kernel"
  mkdir -p "$sys" "$work/kernel" "$root"/{bin,proc,sys,dev,tmp,usr/bin,lib/aarch64-linux-gnu,opt/jank/nopac,opt/jank/pac}
  for d in "$work"/debs/*.deb; do
    case $d in */linux-image-*) dpkg-deb -x "$d" "$work/kernel" ;; *) dpkg-deb -x "$d" "$sys" ;; esac
  done
  cmp -s "$sys/lib/aarch64-linux-gnu/libc.so.6" "$libc" ||
    echo "capture-aarch64-fixtures: note: the guest's libc differs from $libc; the replay will refuse it" >&2
  cp "$sys/bin/busybox" "$root/bin/"
  cp "$sys/usr/bin/perf" "$root/usr/bin/"
  ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/lib/ld-linux-aarch64.so.1"
  local variant
  for variant in nopac pac; do
    local flags=""
    [[ $variant == pac ]] && flags="-mbranch-protection=standard"
    # shellcheck disable=SC2086
    "$cc" -O2 -g -fomit-frame-pointer -Wall $flags tests/apps/stack_vdso_loop.c \
      -o "$root/opt/jank/$variant/stack_vdso_loop"
  done
  "$cc" -O2 -Wall tests/apps/stack_perf_sampler.c -o "$root/opt/jank/stack_perf_sampler"
  # perf 6.1 asks for the SVE VG register (sample_regs_user bit 46) when
  # HWCAP_SVE is set and this kernel refuses the event: hide SVE from perf.
  printf '%s\n' '#define _GNU_SOURCE' '#include <dlfcn.h>' '#include <sys/auxv.h>' \
    'unsigned long getauxval(unsigned long t) {' \
    '  unsigned long (*real)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(RTLD_NEXT, "getauxval");' \
    '  unsigned long v = real(t);' \
    '  return t == AT_HWCAP ? v & ~(1ul << 22) : v;  /* HWCAP_SVE */' '}' >"$work/hidesve.c"
  "$cc" -O2 -shared -fPIC "$work/hidesve.c" -o "$root/opt/jank/hidesve.so" -ldl
  # ld.so, then every NEEDED library of perf and the sampler, from the sysroot.
  local todo=("$sys/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$root/usr/bin/perf" "$root/opt/jank/stack_perf_sampler")
  local seen=" " f n lib
  while ((${#todo[@]})); do
    f=${todo[0]}; todo=("${todo[@]:1}")
    for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $seen == *" $n "* ]] && continue
      seen+="$n "
      lib=""
      for d in lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu; do
        [[ -e $sys/$d/$n ]] && lib=$sys/$d/$n && break
      done
      [[ -n $lib ]] || { echo "capture-aarch64-fixtures: $n (needed by $f) is in no downloaded package" >&2; exit 1; }
      cp -L "$lib" "$root/lib/aarch64-linux-gnu/$n"
      todo+=("$lib")
    done
  done
  cp -L "$sys/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$root/lib/aarch64-linux-gnu/"
  cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
export PATH=/bin:/usr/bin LD_LIBRARY_PATH=/lib/aarch64-linux-gnu
echo "=== uname $(uname -r -v -m)"
for v in nopac pac; do
  d=/tmp/$v
  mkdir -p $d
  LD_PRELOAD=/opt/jank/hidesve.so perf record -e cpu-clock -c 10000000 -k CLOCK_MONOTONIC --call-graph dwarf,16384 \
    -o $d/perf.data -- env -u LD_PRELOAD /opt/jank/$v/stack_vdso_loop 6 400 3 > $d/tasks.txt 2> $d/perf-record.log &
  p=$!
  t=
  while [ -z "$t" ]; do t=$(pidof stack_vdso_loop) || sleep 0.1; done
  /opt/jank/stack_perf_sampler $t $d/cap 10 2> $d/sampler.log &
  s=$!
  wait $p
  wait $s
  # --no-inline: perf would pipe to addr2line, which is not here (SIGPIPE).
  perf script --no-inline --ns -i $d/perf.data -F tid,time,ip,sym,symoff,dso > $d/perf.txt 2> $d/perf-script.log ||
    echo "=== perf script failed: $?"
  rm -f $d/perf.data
  echo "=== $v: $(cat $d/sampler.log)"
  echo "=== BEGIN $v"
  tar c -C /tmp $v | gzip | base64
  echo "=== END $v"
done
poweroff -f
INIT
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initramfs.cpio.gz"
  local vmlinuz
  vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-*)
  echo "capture-aarch64-fixtures: booting $(basename "$vmlinuz") under TCG (a few minutes)"
  timeout 1800 qemu-system-aarch64 -M virt -cpu max -accel tcg -smp 2 -m 2G -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd "$work/initramfs.cpio.gz" \
    -append 'console=ttyAMA0 rdinit=/init quiet' >"$work/console.log" 2>&1 || true
  rm -rf "$work/out"
  mkdir -p "$work/out"
  for variant in nopac pac; do
    awk "/^=== BEGIN $variant/{f=1;next}/^=== END $variant/{f=0}f" "$work/console.log" | tr -d '\r' |
      base64 -d | tar xz -C "$work/out" ||
      { echo "capture-aarch64-fixtures: no $variant results on the console ($work/console.log)" >&2; exit 1; }
  done
  local uname
  uname=$(sed -n 's/^=== uname //p' "$work/console.log" | tr -d '\r')
  for variant in nopac pac; do
    local o=$out/$variant r=$work/out/$variant
    rm -rf "$o"
    mkdir -p "$o"
    cp "$root/opt/jank/$variant/stack_vdso_loop" "$o/"
    cp "$r/cap/attr.txt" "$r/cap/maps" "$r/cap/vdso.so" "$r/tasks.txt" "$o/"
    python3 - "$r" "$o" "$keep" <<'PY'
import struct, sys
src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
tasks = [tuple(map(int, l.split()[1:3])) for l in open(f"{src}/tasks.txt") if l.startswith("task ")]
inside = lambda t: any(b <= t <= e for b, e in tasks)
data = open(f"{src}/cap/samples.bin", "rb").read()
recs, off = [], 0
while off + 8 <= len(data):
    size = struct.unpack_from("<H", data, off + 6)[0]
    if size == 0:
        break
    t = struct.unpack_from("<Q", data, off + 16)[0]  # header, pid/tid, time
    if inside(t):
        recs.append(data[off:off + size])
    off += size
step = max(1.0, len(recs) / keep)
kept = [recs[int(i * step)] for i in range(min(keep, len(recs)))]
open(f"{dst}/samples.bin", "wb").write(b"".join(kept))
# perf script: "tid time:" then one "ip sym+off (dso)" line per frame, leaf first.
chains, cur, t = {}, [], None
def flush():
    if cur and t is not None and inside(t):
        key = ";".join(cur)
        chains[key] = chains.get(key, 0) + 1
for line in open(f"{src}/perf.txt", errors="replace"):
    line = line.rstrip("\n")
    if not line.strip():
        flush(); cur, t = [], None
    elif not line.startswith("\t"):
        flush(); cur = []
        f = line.split()
        t = round(float(f[1].rstrip(":")) * 1e9) if len(f) > 1 else None
    elif not line.endswith("([kernel.kallsyms])"):
        f = line.split(None, 1)
        sym = f[1].rsplit(" (", 1)[0] if len(f) > 1 else "[unknown]"
        cur.append(sym.split("+0x")[0])
flush()
with open(f"{dst}/perf-chains.txt", "w") as out:
    for k, n in sorted(chains.items(), key=lambda kv: -kv[1]):
        out.write(f"{n} {k}\n")
print(f"{dst}: {len(kept)} of {len(recs)} task samples kept, {sum(chains.values())} perf samples")
PY
    {
      echo "source: tests/apps/stack_vdso_loop.c (three 400 ms tasks), sampled by tests/apps/stack_perf_sampler.c"
      echo "built: $cc -O2 -g -fomit-frame-pointer -Wall$([[ $variant == pac ]] && echo ' -mbranch-protection=standard')"
      echo "compiler: $("$cc" --version | head -1)"
      echo "kernel: $kpkg ($uname)"
      echo "ran: qemu-system-aarch64 -M virt -cpu max -accel tcg -smp 2 ($(qemu-system-aarch64 --version | head -1))"
      echo "libc: $(dpkg-deb -f "$(ls "$work"/debs/libc6_*_arm64.deb)" Version) build-id $(readelf -n "$sys/lib/aarch64-linux-gnu/libc.so.6" | sed -n 's/.*Build ID: //p')"
      echo "reference: perf record -e cpu-clock -c 10000000 -k CLOCK_MONOTONIC --call-graph dwarf,16384 in the same VM (perf-chains.txt)"
    } >"$o/README"
  done
}

jvm_capture() {
  local work=${WORK:-/var/tmp/jankbpf-arm64-jvm-capture} cc=${CC_AARCH64:-aarch64-linux-gnu-gcc}
  local jdk=/usr/lib/jvm/java-17-openjdk-amd64
  for tool in "$cc" qemu-aarch64-static javac apt-get dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "capture-aarch64-fixtures: $tool not found" >&2; exit 1; }
  done
  [[ -x build/jankbpf-unit ]] || { echo "capture-aarch64-fixtures: build/jankbpf-unit missing (make unit-bin)" >&2; exit 1; }
  mkdir -p "$work/debs" "$work/root" "$work/classes"
  work=$(cd "$work" && pwd)
  (cd "$work/debs" && for p in openjdk-17-jre-headless libstdc++6; do
     ls "${p}"_*_arm64.deb >/dev/null 2>&1 || apt-get download "$p:arm64" >/dev/null ||
       { echo "capture-aarch64-fixtures: apt-get download $p:arm64 failed" >&2; exit 1; }
   done) || exit 1
  for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$work/root"; done
  "$cc" -O1 -Wall -shared -fPIC -I"$jdk/include" -I"$jdk/include/linux" tests/apps/java/hs_capture.c \
    -o "$work/libhscapture.so"
  javac -g -d "$work/classes" tests/apps/java/HsCapture.java
  JANKBPF_ARM64_JAVA=$work/root/usr/lib/jvm/java-17-openjdk-arm64/bin/java \
  JANKBPF_ARM64_LIBS=$work/root/usr/lib/aarch64-linux-gnu \
  JANKBPF_ARM64_CAPTURE_LIB=$work/libhscapture.so JANKBPF_ARM64_CLASSES=$work/classes \
    build/jankbpf-unit "[hotspot-capture-arm64]"
  echo "capture-aarch64-fixtures: tests/fixtures/hotspot/jdk17-aarch64.json" \
       "($(dpkg-deb -f "$(ls "$work"/debs/openjdk-17-jre-headless_*_arm64.deb)" Version))"
}

cd "$(dirname "$0")/.."
if [[ ${1:-} == --kernel ]]; then
  kernel_capture
  exit 0
fi
if [[ ${1:-} == --jvm ]]; then
  jvm_capture
  exit 0
fi
if [[ ${1:-} == --kernel ]]; then
  exec "$(dirname "$0")/capture-aarch64-kernel-fixtures.sh"
fi
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
