#!/usr/bin/env bash
# Runs jankbpf's libFuzzer targets (tests/fuzz/, built by `make fuzz-bin`
# into build/fuzz/) and prints a markdown table: target, executions,
# exec/s, crashes, corpus.
#
#   scripts/fuzz.sh smoke [TARGET...]   FUZZ_SMOKE_SECONDS each (10), from the seeds only
#   scripts/fuzz.sh run   [TARGET...]   FUZZ_SECONDS each (60), corpus kept in build/fuzz/corpus/
#   scripts/fuzz.sh bench [TARGET...]   FUZZ_BENCH_RUNS executions each (10,000,000)
#
# Every mode first runs each target once on generated large inputs (50,000
# maps and perf-map entries, a 10 MB perf map, 1 MB lines, 50,000 USDT
# notes, a 64 KB-deep JSON nesting): too big to keep as seeds or to mutate
# usefully, but they must parse, under the sanitizers, within -timeout.
# A crash, leak, timeout (a slow input: -timeout) or out-of-memory
# (-rss_limit_mb) fails the script; what crashed is in build/fuzz/artifacts/
# TARGET/, to be turned into a unit test (tests/unit/test_fuzz_findings.cpp).
#
#   FUZZ_BUILD=DIR   where the targets are (build/fuzz)
#   FUZZ_TABLE=FILE  also write the table there
#   FUZZ_JSON=FILE   and one JSON line per target there: target, executions,
#                    exec_per_s, seconds (wall), crashes, rc, corpus_files,
#                    corpus_kb, workers, starved (timeouts not reproduced
#                    when run again alone: replay_timeouts) (the bench's fuzz
#                    scenario stores them)
#   FUZZ_BENCH_RUNS_<TARGET>=N  bench mode: that target runs N executions
#                    (the bench resumes a row cut short on the same binary)
#   FUZZ_BENCH_DEADLINE=EPOCH  bench mode: no target runs past this time (in
#                    seconds since the epoch); one not started by then is
#                    left with no executions (the bench's FUZZ_BENCH_MINUTES)
#   FUZZ_BENCH_SECONDS=S  bench mode: a target stops after S seconds if its
#                    executions are not done by then (no limit); its row
#                    has the executions it reached, and is short of the goal
#   FUZZ_JOBS=N      targets run N at a time (1); the table keeps the
#                    targets' order. 10 M executions of every target take
#                    about two hours on one core of this 2-core VM.
#   FUZZ_WORKERS=N   each target runs as N libFuzzer processes (1) on its one
#                    corpus, each with its share of the executions (bench) or
#                    the whole time (smoke, run); its row sums their
#                    executions and exec/s. For fewer targets than cores.
#
# Without TARGETs: every target in the Makefile's FUZZ_TARGETS.
set -uo pipefail

cd "$(dirname "$0")/.."
mode=${1:-smoke}
shift || true
out=${FUZZ_BUILD:-build/fuzz}
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  # The Makefile's FUZZ_TARGETS, its continuation lines joined.
  read -r -a targets < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Makefile | sed -n 's/^FUZZ_TARGETS := //p')
  [[ ${#targets[@]} -gt 0 ]] || { echo "fuzz: no FUZZ_TARGETS in the Makefile" >&2; exit 2; }
fi

# -max_len by input kind: a maps or perf-map text of a few hundred lines,
# one perf record (header size is 16 bits), a config file, a small ELF.
max_len() {
  case $1 in
    fuzz_maps|fuzz_perf_map) echo 16384 ;;
    fuzz_perf_sample) echo 65552 ;;  # 16 bytes of attr + a 64 KB record
    fuzz_config) echo 4096 ;;
    fuzz_elf_notes) echo 16384 ;;
    fuzz_marker_spec) echo 1024 ;;
    fuzz_stack_tree|fuzz_json_sink) echo 4096 ;;
    fuzz_python_frames) echo 16384 ;;  # a few thread states, frames, code objects
    fuzz_kernel_funcs) echo 32768 ;;  # a BTF blob of a few hundred types
    fuzz_v8_frames) echo 32768 ;;     # a 16 KB stack copy, then the heap it points into
    fuzz_stack_log|fuzz_report_jsonl) echo 16384 ;;  # a task's stack log; a few records
    fuzz_hotspot_frames) echo 32768 ;;  # registers, a stack copy, a small JVM's memory
    fuzz_causes) echo 16384 ;;  # mountinfo or kallsyms text; a cause record and 16 subjects
    fuzz_inflate) echo 16384 ;;  # a zlib stream of up to 256 KB inflated
    *) echo "fuzz: no -max_len for $1 (scripts/fuzz.sh max_len)" >&2; echo 4096 ;;
  esac
}

# --- large generated inputs, run once each ----------------------------------
gen_big() {
  /usr/bin/python3 - "$out/big" <<'PY'
import os, random, struct, sys
root = sys.argv[1]
r = random.Random(50000)
def put(target, name, data):
    d = os.path.join(root, target); os.makedirs(d, exist_ok=True)
    p = os.path.join(d, name)
    if not os.path.exists(p):
        with open(p, 'wb') as f: f.write(data)
maps = ''.join('%x-%x r-xp %08x fe:00 %d /usr/lib/lib %d.so%s\n' % (0x10000 + i * 0x2000, 0x11000 + i * 0x2000, i, i, i,
               ' (deleted)' if i % 7 == 0 else '') for i in range(50000))
put('fuzz_maps', 'entries_50000', maps.encode())
put('fuzz_maps', 'line_1mb', b'1000-2000 r-xp 0 fe:00 1 /' + b'x' * (1 << 20) + b'\n')
pm = ''.join('%x %x JS:*f%d /srv/app/m%d.js:%d:%d\n' % (0x7f0000 + i * 0x40, 0x40, i, i % 97, i, i % 80) for i in range(50000))
put('fuzz_perf_map', 'entries_50000', pm.encode())
put('fuzz_perf_map', 'file_10mb', b''.join(b'%x %x LazyCompile:~%s /a.js:1:1\n' % (r.getrandbits(40), r.getrandbits(12) + 1, b'n' * 60)
                                             for _ in range(10 * (1 << 20) // 90)))
put('fuzz_perf_map', 'line_1mb', b'1000 10 ' + b'n' * (1 << 20) + b'\n')
# A 64 KB sample: the largest header size, a user stack filling it.
st = (1 << 1) | (1 << 2) | (1 << 13)
body = struct.pack('<IIQ', 1, 1, 7) + struct.pack('<Q', 65535 - 8 - 24 - 16) 
body += b'\xaa' * (65535 - 8 - len(body) - 8) + struct.pack('<Q', 1 << 20)
put('fuzz_perf_sample', 'record_64k', struct.pack('<QQ', st, 0) + struct.pack('<IHH', 9, 0, 8 + len(body)) + body)
# A kernel's worth of kallsyms (irq_text_chunks sorts them all).
put('fuzz_causes', 'kallsyms_200k', b'\x01' + b''.join(b'%x %s %s\n' % (0xffffffff81000000 + i * 0x40, b'tT'[i % 2:i % 2 + 1],
                                                        b'sysvec_%d' % i if i % 50 == 0 else b'f%d' % i) for i in range(200000)))
put('fuzz_config', 'nested_64k', b'{"log_type":' + b'[' * 30000 + b']' * 30000 + b'}')
put('fuzz_config', 'over_64k', b'{"log_type":"' + b'1' * 70000 + b'"}')
def note(name, typ, desc):
    n = name + b'\0'; pad = lambda b: b + b'\0' * ((-len(b)) % 4)
    return struct.pack('<III', len(n), len(desc), typ) + pad(n) + pad(desc)
notes = b''.join(note(b'stapsdt', 3, struct.pack('<QQQ', 0x1000 + i, 0x2000, 0) + b'p%d\0n%d\0-4@%%eax\0' % (i, i))
                 for i in range(50000))
shstr = b'\0.note.stapsdt\0.shstrtab\0'
off = 64; so = off + len(notes); so_pad = shstr + b'\0' * ((-len(shstr)) % 8); sh = so + len(so_pad)
eh = b'\x7fELF' + bytes([2, 1, 1, 0]) + b'\0' * 8 + struct.pack('<HHIQQQIHHHHHH', 3, 62, 1, 0, 0, sh, 0, 64, 56, 0, 64, 3, 2)
shdrs = b'\0' * 64 + struct.pack('<IIQQQQIIQQ', 1, 7, 2, 0, off, len(notes), 0, 0, 4, 0)
shdrs += struct.pack('<IIQQQQIIQQ', 15, 3, 0, 0, so, len(shstr), 0, 0, 1, 0)
put('fuzz_elf_notes', 'usdt_50000', eh + notes + so_pad + shdrs)
put('fuzz_marker_spec', 'spec_1mb', b'/bin/' + b'a' * (1 << 20) + b':f,/bin/b:' + b'g' * 1000)
put('fuzz_stack_tree', 'random_1mb', r.randbytes(1 << 20))
put('fuzz_json_sink', 'random_1mb', r.randbytes(1 << 20))
# `jankbpf report`'s inputs as issue 26 attacked them: a stack log that is a
# 20,000-deep chain, a count of 4e9, a 5 MB JSON line, 100,000-deep nesting.
put('fuzz_stack_log', 'chain_20000', ''.join('%d #%d pc 1 /a(f%d)\n' % (20000 - i, i, i) for i in range(20000)).encode())
put('fuzz_stack_log', 'count_4e9', b'4000000000 #0 pc 1 /a(f+1)\n')
put('fuzz_report_jsonl', 'line_5mb', b'{"type":"jank","bundle_name":"' + b'a' * (5 << 20) + b'"}\n{"type":"jank"}\n')
put('fuzz_report_jsonl', 'nested_100k', b'{"type":"jank","off_cpu":' + b'[' * 100000 + b']' * 100000 + b'}\n')
# This kernel's own BTF (~5 MB, ~100,000 types), where there is one.
if os.path.exists('/sys/kernel/btf/vmlinux'):
    put('fuzz_kernel_funcs', 'vmlinux', open('/sys/kernel/btf/vmlinux', 'rb').read())
PY
}

# libFuzzer's -timeout is wall time: on a host busier than its CPUs (the
# e2e suite's spinners at nice 0 beside a fuzzer at nice 19) one unit of a
# few milliseconds can wait past it (fuzz_stack_log, 2026-12-06: a 38 ms
# input "timed out after 13 s"). When every worker that failed timed out,
# each timeout input is run again alone: if all finish within the timeout
# the host starved the fuzzer, not the input. Those are counted (starved),
# moved to build/fuzz/starved/TARGET/ and the target's exit is as if they
# had not happened (its executions are those it reached); one that times
# out again is a finding. Sets rc and starved.
replay_timeouts() {
  local t=$1 bin=$2 art=$3 log=$4 w f
  shift 4
  [[ $rc -ne 0 && $rc -ne 72 ]] || return 0
  for w in "$@"; do [[ $w -eq 0 || $w -eq 70 || $w -eq 72 ]] || return 0; done  # 70: libFuzzer's timeout exit
  compgen -G "$art/timeout-*" >/dev/null || return 0
  for f in "$art"/*; do [[ $(basename "$f") == timeout-* ]] || return 0; done
  for f in "$art"/timeout-*; do
    "$bin" -rss_limit_mb=2048 -timeout=10 "$f" >>"$log.replay" 2>&1 || return 0
  done
  starved=$(find "$art" -name 'timeout-*' -type f | wc -l)
  mkdir -p "$out/starved/$t"
  mv "$art"/timeout-* "$out/starved/$t/"
  echo "fuzz: $t: $starved timeout(s) not reproduced when run again alone (the host starved the fuzzer): in $out/starved/$t/" >&2
  rc=0
  for w in "$@"; do [[ $w -ne 72 ]] || rc=72; done
}

crashes_total=0
declare -a rows
run_target() {
  local t=$1 bin=$out/$1 art=$out/artifacts/$1 log=$out/logs/$1.log
  local -a args=(-max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
                 -artifact_prefix="$art/")
  mkdir -p "$art" "$out/logs"
  rm -f "$art"/* "$log" "$log.big" "$log.replay"  # an earlier run's counts are not this one's
  local starved=0
  if [[ ! -x $bin ]]; then
    echo "fuzz: $bin is not built (make fuzz-bin)" >&2
    return 1
  fi
  local rc=0 late=0
  # Past FUZZ_BENCH_DEADLINE a target does not start: its row has no
  # executions, and the bench resumes it next time.
  if [[ $mode == bench && -n ${FUZZ_BENCH_DEADLINE:-} ]] && (( FUZZ_BENCH_DEADLINE <= $(date +%s) )); then
    late=1
  fi
  # The large inputs, once each.
  if [[ $late -eq 0 ]] && compgen -G "$out/big/$t/*" >/dev/null; then
    "$bin" -rss_limit_mb=2048 -timeout=30 -artifact_prefix="$art/" "$out/big/$t"/* >"$log.big" 2>&1 || rc=$?
    [[ $rc -eq 0 ]] || echo "fuzz: $t FAILED on a generated large input (see $log.big)" >&2
  fi
  local corpus rv cap left
  case $mode in
    smoke) corpus=$(mktemp -d "$out/smoke-$t.XXXXXX"); args+=(-max_total_time="${FUZZ_SMOKE_SECONDS:-10}") ;;
    run)   corpus=$out/corpus/$t; args+=(-max_total_time="${FUZZ_SECONDS:-60}") ;;
    bench) corpus=$out/corpus/$t; rv=FUZZ_BENCH_RUNS_$t  # -runs: each worker's share, below
           cap=${FUZZ_BENCH_SECONDS:-}
           if [[ -n ${FUZZ_BENCH_DEADLINE:-} ]]; then
             left=$(( FUZZ_BENCH_DEADLINE - $(date +%s) ))
             [[ -n $cap && $cap -le $left ]] || cap=$left
           fi
           [[ -z $cap || $late -eq 1 ]] || args+=(-max_total_time="$(( cap > 1 ? cap : 1 ))")
           # No allocation stacks kept for reports: a fifth of an execution's
           # time. A crash is rerun from its artifact to get them.
           export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} ;;
    *) echo "fuzz: unknown mode '$mode' (smoke, run, bench)" >&2; exit 2 ;;
  esac
  mkdir -p "$corpus"
  local t0 t1
  t0=$(date +%s.%N)
  if [[ $rc -eq 0 && $late -eq 0 ]]; then
    # New inputs go to the first folder; the checked-in seeds stay as they
    # are. Workers share that folder (an input's name is its hash) and
    # read each other's finds from it (libFuzzer's -reload).
    local -a pids=() wargs
    local w wrc runs=
    [[ $mode == bench ]] && runs=${!rv:-${FUZZ_BENCH_RUNS:-10000000}}
    for ((w = 0; w < workers; w++)); do
      wargs=("${args[@]}")
      [[ -z $runs ]] || wargs+=(-runs=$(( runs / workers + (w < runs % workers ? 1 : 0) )))
      "$bin" "${wargs[@]}" "$corpus" "tests/fuzz/corpus/$t" >"$log.w$w" 2>&1 &
      pids+=($!)
    done
    # The first failure's exit, else a signal's (72), else 0.
    local -a wrcs=()
    for w in "${!pids[@]}"; do
      wrc=0
      wait "${pids[$w]}" || wrc=$?
      wrcs+=("$wrc")
      if [[ $wrc -ne 0 && ( $rc -eq 0 || $rc -eq 72 ) ]]; then rc=$wrc; fi
    done
    for ((w = 0; w < workers; w++)); do cat "$log.w$w"; rm -f "$log.w$w"; done > "$log"
    replay_timeouts "$t" "$bin" "$art" "$log" "${wrcs[@]}"
  fi
  t1=$(date +%s.%N)
  local execs rate files bytes crashes interrupted=0
  # One final stats block per worker: the row is their sum.
  execs=$(awk -F: '/^stat::number_of_executed_units:/ { n += $NF; seen = 1 } END { if (seen) print n }' "$log" 2>/dev/null)
  rate=$(awk -F: '/^stat::average_exec_per_sec:/ { n += $NF; seen = 1 } END { if (seen) print n }' "$log" 2>/dev/null)
  crashes=$(find "$art" -type f | wc -l)
  # libFuzzer's exit on SIGINT/SIGTERM (-interrupted_exitcode, 72): stopped
  # by someone, not a finding; its executions are those it reached.
  if [[ $rc -eq 72 && $crashes -eq 0 ]] && grep -q 'libFuzzer: run interrupted' "$log" 2>/dev/null; then
    interrupted=1
  fi
  [[ $rc -ne 0 && $crashes -eq 0 && $interrupted -eq 0 ]] && crashes=1  # failed without an artifact: count it
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sk --apparent-size "$corpus" | cut -f1)
  [[ $mode == smoke ]] && rm -rf "$corpus"
  if [[ $late -eq 1 ]]; then
    echo "fuzz: $t not started: FUZZ_BENCH_DEADLINE has passed" >&2
  elif [[ $interrupted -eq 1 ]]; then
    echo "fuzz: $t interrupted after ${execs:-?} executions" >&2
  elif [[ $rc -ne 0 ]]; then
    echo "fuzz: $t FAILED (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|runtime error' "$log" "$log.big" 2>/dev/null)" >&2
    echo "fuzz: inputs in $art/, log in $log" >&2
  else
    echo "fuzz: $t ok: ${execs:-?} executions, ${rate:-?}/s" >&2
  fi
  crashes_total=$((crashes_total + crashes))
  rows+=("| $t | ${execs:-0} | ${rate:-0} | $crashes | $files files, ${bytes} KB |")
  if [[ -n ${FUZZ_JSON:-} ]]; then
    # libFuzzer's rate is per whole second of its run: 0 for a run under one.
    [[ ${rate:-0} -gt 0 ]] || rate=$(awk "BEGIN { s = $t1 - $t0; print (s > 0 ? int(${execs:-0} / s) : 0) }")
    printf '{"target":"%s","executions":%d,"exec_per_s":%d,"seconds":%.1f,"crashes":%d,"rc":%d,"interrupted":%d,"corpus_files":%d,"corpus_kb":%d,"workers":%d,"starved":%d}\n' \
      "$t" "${execs:-0}" "${rate:-0}" "$(awk "BEGIN { print $t1 - $t0 }")" "$crashes" "$rc" "$interrupted" "$files" "$bytes" "$workers" "$starved" >> "$FUZZ_JSON"
  fi
}

jobs=${FUZZ_JOBS:-1}
if ! [[ $jobs =~ ^[1-9][0-9]?$ ]]; then
  echo "fuzz: FUZZ_JOBS must be a number from 1 to 99, not '$jobs'" >&2; exit 2
fi
workers=${FUZZ_WORKERS:-1}
if ! [[ $workers =~ ^[1-9][0-9]?$ ]]; then
  echo "fuzz: FUZZ_WORKERS must be a number from 1 to 99, not '$workers'" >&2; exit 2
fi
mkdir -p "$out"
[[ -z ${FUZZ_JSON:-} ]] || : > "$FUZZ_JSON"
gen_big
if [[ $jobs -eq 1 ]]; then
  for t in "${targets[@]}"; do run_target "$t"; done
else
  # Each target in a subshell of its own; its row and crash count come back
  # through files, in the targets' order. (The JSON lines are single short
  # appends: whole, in the order the targets finish.)
  back=$(mktemp -d "$out/jobs.XXXXXX")
  for i in "${!targets[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n; done
    ( rows=(); crashes_total=0; run_target "${targets[$i]}"
      printf '%s\n' "${rows[0]:-| ${targets[$i]} | 0 | 0 | 1 | not run |}" > "$back/$i.row"
      echo "$crashes_total" > "$back/$i.crashes" ) &
  done
  wait
  for i in "${!targets[@]}"; do
    rows+=("$(cat "$back/$i.row" 2>/dev/null || echo "| ${targets[$i]} | 0 | 0 | 1 | lost |")")
    crashes_total=$((crashes_total + $(cat "$back/$i.crashes" 2>/dev/null || echo 1)))
  done
  rm -rf "$back"
fi

table="| target | executions | exec/s | crashes | corpus |
|---|---:|---:|---:|---|"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo "$table"
[[ -n ${FUZZ_TABLE:-} ]] && echo "$table" > "$FUZZ_TABLE"
[[ $crashes_total -eq 0 ]]
