#!/usr/bin/env bash
# jankbpf benchmarks (issue 5): `sudo make bench` runs this. It
#   0. asks bench/jankbench whether the selection is valid and the tree may
#      be measured: a full run (no BENCH_ONLY/BENCH_SKIP, not BENCH_QUICK)
#      measures one commit, so it refuses a tree with uncommitted changes
#      (the bench's own outputs, bench/results/ and RESULTS.md, aside);
#   1. installs the bench-only Debian packages that are missing (a step of
#      its own, so `make test` stays lean): redis-server, redis-tools,
#      bpftrace, bpfcc-tools + python3-bpfcc, and kernel headers for BCC;
#   2. builds the bench programs (bench/*.c) into build/bench/;
#   3. runs bench/jankbench (`python3 -m jankbench`), which builds jankbpf,
#      the test apps, the unit binary (and the fuzzers when they are
#      selected) from this tree with make, measures the selected scenarios
#      in this order, stores each one's data with its provenance (the build
#      it measured: commit, uncommitted changes, jankbpf's version, build-id
#      and hash) in bench/results/<scenario>.json, and renders
#      bench/RESULTS.md from every stored result:
#        startup accuracy throughput tax hooks footprint stacks python v8 node
#        hotspot jvm
#        where      perf record -a of redis SET and ping-pong per tool (~2 min)
#        lane_tax   the tax on Debian 12's 6.1 kernel under qemu (~2 min)
#        lane_idle  the first task after an attach, 6.1 x86_64 lane (~5 min)
#        frames     a Wayland client's frames under weston (~2 min)
#        causes     each planted cause 20 times on this kernel (~5 min)
#        lane_causes  the same in one boot of each 6.1 lane kernel (~10 min)
#        curve      1 to 10,000 watched processes (~4 min)
#        fuzz       every libFuzzer target of the Makefile, FUZZ_BENCH_RUNS
#                   executions each, FUZZ_JOBS at a time (about an hour)
#        soak       20 processes, 10 janks a second, SOAK_MINUTES (30)
#
#   BENCH_ONLY=tax,hooks  measure only these scenarios; the others keep what
#                       is stored, and RESULTS.md is rendered from all of it
#   BENCH_SKIP=fuzz,soak  measure all but these
#   BENCH_QUICK=1       a smoke run (fewer rounds, 10 s windows, 100,000 fuzz
#                       executions, a 2-minute soak), stored in
#                       build/bench/results-quick/ and rendered, over the
#                       stored results, to build/bench/RESULTS-quick.md: never
#                       into the committed files
#   BENCH_RESULTS=FILE  render there instead; BENCH_RESULTS_DIR=DIR store there
#   FUZZ_BENCH_RUNS=N, SOAK_MINUTES=M   the fuzz and soak sizes
#   FUZZ_JOBS=N                         fuzz targets run at a time (one per CPU)
#   FUZZ_BENCH_SECONDS=S                a target stops after S s, short of its executions
#   FUZZ_BENCH_MINUTES=M                the fuzz section's time box: targets run shortest
#                                       first and none past M minutes; the rest are resumed
#                                       by the next run on the same binaries
#
# `python3 -m jankbench --render` (from bench/, no root) renders what is
# stored without measuring anything.
#
# Fails (non-zero) if a tool cannot be installed or fails to attach, the
# build fails, a fuzz target crashes or misses its executions, or the soak
# misses a goal (in a smoke run only errors fail); exit 2: a bad selection,
# or a full run of a dirty tree. Leaves nothing behind: the bench's
# processes are stopped, kernel.bpf_stats_enabled is restored, the
# temporary headers tree is removed.
set -euo pipefail

cd "$(dirname "$0")/.."
# The build of this tree, which the bench (re)builds itself.
BUILD=build
if [[ -n ${JANKBPF_BUILD:-} && $(realpath -m "$JANKBPF_BUILD") != $(realpath -m build) ]]; then
  echo "bench: JANKBPF_BUILD=$JANKBPF_BUILD: the bench measures the build of the tree it runs in (build/), which it builds" >&2
  exit 2
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "bench: needs root (sudo make bench)" >&2
  exit 1
fi

# --- 0. may this tree be measured, is the selection valid? ---------------------
(cd bench && /usr/bin/python3 -m jankbench --check) || exit $?

# --- 1. bench-only packages ---------------------------------------------------
bench_pkgs=(redis-server redis-tools bpftrace bpfcc-tools python3-bpfcc bpftool gcc linux-perf)
# BCC compiles its programs against kernel headers at startup. Use the
# running kernel's when it has them; otherwise Debian's current ones (see
# the BCC_KERNEL_SOURCE step below).
if [[ ! -e /lib/modules/$(uname -r)/build/include/linux/kconfig.h ]]; then
  bench_pkgs+=(linux-headers-amd64)
  [[ $(dpkg --print-architecture) == arm64 ]] && bench_pkgs[-1]=linux-headers-arm64
fi
missing=()
for p in "${bench_pkgs[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "bench: installing ${missing[*]}" >&2
  . scripts/apt-install.sh  # waits for another apt or dpkg run instead of failing
  if ! apt_install "${missing[@]}"; then
    echo "bench: FAILED: could not install ${missing[*]}" >&2
    exit 1
  fi
fi
for tool in redis-server redis-benchmark redis-cli bpftrace bpftool perf; do
  command -v "$tool" >/dev/null || { echo "bench: FAILED: $tool not found after install" >&2; exit 1; }
done
/usr/bin/python3 -c 'import bcc' || { echo "bench: FAILED: python3-bpfcc does not import" >&2; exit 1; }

# --- cleanup, whatever happens ---------------------------------------------------
tmp=$(mktemp -d /tmp/jankbpf-bench.XXXXXX)
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
py_pid=
cleanup() {
  local rc=$?
  # jankbench stops its own children on SIGINT/SIGTERM; wait for it.
  if [[ -n $py_pid ]] && kill -0 "$py_pid" 2>/dev/null; then
    kill -TERM "$py_pid" 2>/dev/null || true
    wait "$py_pid" 2>/dev/null || true
  fi
  echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# BCC_KERNEL_SOURCE: one tree holding both halves of Debian's split headers
# package (the arch-independent -common and the per-flavour generated files):
# symlinks under $tmp, with real directories only where both halves have the
# same one (include/, arch/x86/include/, ...), so a few hundred links.
merge_tree() {  # DST A B: B wins where both have a file
  local dst=$1 a=$2 b=$3 e n
  mkdir -p "$dst"
  for e in "$a"/* "$b"/*; do
    n=${e##*/}
    [[ -e $dst/$n || -L $dst/$n ]] && continue
    if [[ -d $a/$n && -d $b/$n && ! -L $a/$n && ! -L $b/$n ]]; then
      merge_tree "$dst/$n" "$a/$n" "$b/$n"
    elif [[ -e $b/$n ]]; then
      ln -s "$b/$n" "$dst/$n"
    else
      ln -s "$a/$n" "$dst/$n"
    fi
  done
}
if [[ ! -e /lib/modules/$(uname -r)/build/include/linux/kconfig.h ]]; then
  flavour=$(compgen -G '/usr/src/linux-headers-*-amd64' ; compgen -G '/usr/src/linux-headers-*-arm64') || true
  flavour=$(sort -V <<<"$flavour" | tail -1)
  common=${flavour%-*}-common
  if [[ -z $flavour || ! -d $common ]]; then
    echo "bench: FAILED: no kernel headers for BCC under /usr/src" >&2
    exit 1
  fi
  merge_tree "$tmp/kheaders" "$common" "$flavour"
  export BCC_KERNEL_SOURCE=$tmp/kheaders
fi

# --- 2. bench programs --------------------------------------------------------------
mkdir -p "$BUILD/bench"
for src in bench/*.c; do
  bin=$BUILD/bench/$(basename "$src" .c)
  if [[ ! -x $bin || $src -nt $bin ]]; then
    gcc -O2 -g -Wall -o "$bin" "$src"
  fi
done

# --- 3. run ---------------------------------------------------------------------------
# How the run was asked for, kept in each stored result's provenance.
knobs=()
for v in BENCH_QUICK BENCH_ONLY BENCH_SKIP FUZZ_BENCH_RUNS FUZZ_BENCH_SECONDS FUZZ_BENCH_MINUTES FUZZ_JOBS SOAK_MINUTES; do
  if [[ -n ${!v:-} ]]; then knobs+=("$v=${!v}"); fi
done
if [[ -n ${MAKELEVEL:-} ]]; then
  BENCH_COMMAND="make bench${knobs[*]:+ ${knobs[*]}}"
else
  BENCH_COMMAND="${knobs[*]:+${knobs[*]} }scripts/bench.sh"
fi
export BENCH_COMMAND
build_abs=$(realpath "$BUILD")
rc=0
(cd bench && JANKBPF_BUILD=$build_abs exec /usr/bin/python3 -m jankbench) &
py_pid=$!
wait "$py_pid" || rc=$?
py_pid=
exit "$rc"
