#!/usr/bin/env bash
# make test's suites in two lanes at once, because on the 2-core test VM one
# after the other they leave a core idle most of the time: the end-to-end
# suite is ~16 minutes of wall time but ~5 of CPU (its targets sleep, wait
# and run on a schedule), while the package build, the arm64 cross-build and
# the fuzz targets' build are CPU and nothing else.
#
#   scripts/run-suites.sh "FRONT GOALS" "BACK GOALS"
#
# FRONT goals run here one after the other, their output live. BACK goals run
# beside them, one after the other, in a session of their own whose
# scheduler autogroup and processes are at nice 19: they get what the front
# leaves, so the front's timing checks see the same CPU share as when run
# alone (an autogroup's weight at nice 19 is 15 against 1024 at 0). Their
# output goes to build/test-logs/GOAL.log (SUITE_LOG_DIR=DIR: there),
# printed whole once the front is done. Each lane stops at its first
# failing goal; a front failure stops the back lane too. Exit 0 when every
# goal passed, 1 otherwise; 2 on bad usage.
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "run-suites: usage: scripts/run-suites.sh \"FRONT GOALS\" \"BACK GOALS\"" >&2
  exit 2
fi
read -r -a front <<<"$1"
read -r -a back <<<"$2"
declare -A seen=()
for g in "${front[@]}" "${back[@]}"; do
  [[ $g =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "run-suites: '$g' is not a make goal name" >&2; exit 2; }
  [[ -z ${seen[$g]:-} ]] || { echo "run-suites: '$g' is named twice: each goal runs once" >&2; exit 2; }
  seen[$g]=1
done

cd "$(dirname "$0")/.." || exit 1
make=${MAKE:-make}
logs=${SUITE_LOG_DIR:-build/test-logs}
mkdir -p "$logs" || exit 1
# Each lane's makes choose their own -j (the Makefile's default, every
# core): the jobserver of the make that called this is not passed down.
MAKEFLAGS=$(sed -E 's/(^| )-j[0-9]*( |$)/ /g; s/--jobserver-(auth|fds)=[^ ]*//g' <<<"${MAKEFLAGS:-}")
export MAKEFLAGS

status=$logs/back.status
rm -f "$status"
for g in "${back[@]}"; do rm -f "$logs/$g.log"; done  # no earlier run's logs

back_lane() {
  # Lowest share for this session's autogroup and for each process in it.
  echo 19 >/proc/self/autogroup 2>/dev/null || true
  renice -n 19 -p $$ >/dev/null 2>&1 || true
  local g t0 rc
  for g in "$@"; do
    t0=$(date +%s)
    "$make" --no-print-directory "$g" >"$logs/$g.log" 2>&1
    rc=$?
    echo "$g $rc $(( $(date +%s) - t0 ))" >>"$status"
    (( rc == 0 )) || return "$rc"
  done
}

export -f back_lane
export make logs status
bpid=
if [[ ${#back[@]} -gt 0 ]]; then
  setsid bash -c 'back_lane "$@"' back "${back[@]}" </dev/null &
  bpid=$!
  echo "test: ${back[*]} run beside ${front[*]} (nice 19, logs in $logs/)"
fi

front_rc=0
for g in "${front[@]}"; do
  t0=$(date +%s)
  "$make" --no-print-directory "$g" || { front_rc=1; echo "test: $g FAILED"; break; }
  echo "test: $g took $(( $(date +%s) - t0 )) s"
done

if [[ -n $bpid ]]; then
  if (( front_rc != 0 )); then
    echo "test: stopping ${back[*]}"
    kill -TERM -- -"$bpid" 2>/dev/null || true
  elif kill -0 "$bpid" 2>/dev/null; then
    echo "test: waiting for ${back[*]}"
  fi
  wait "$bpid"
  back_rc=$?
  for g in "${back[@]}"; do
    [[ -f $logs/$g.log ]] || continue
    echo "===== $g (run beside the suites above; $logs/$g.log) ====="
    cat "$logs/$g.log"
  done
  if [[ -f $status ]]; then
    while read -r g rc secs; do
      if (( rc == 0 )); then echo "test: $g took $secs s (beside)"; else echo "test: $g FAILED (exit $rc, $secs s)"; fi
    done <"$status"
  fi
  if (( back_rc != 0 && front_rc == 0 )); then
    echo "test: FAILED in the back lane (its log above)"
  fi
  (( back_rc == 0 )) || front_rc=1
fi
exit "$front_rc"
