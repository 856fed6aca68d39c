#!/bin/sh
# jankbpf kernel lane, guest side: runs as /init of the lane's initramfs
# (scripts/kernel-lane/lane.py builds it). Mounts the pseudo filesystems,
# runs the scenarios /lane/config names, and writes everything the host
# asserts on to the console between markers:
#   @@LANE BEGIN <scenario>/<item>
#   ...file contents...
#   @@LANE END <scenario>/<item> rc=<N>
# then powers off. It judges nothing: the host does (tests/kernels).
#
# /lane/config (written by the host) sets LANE_ARCH, LANE_LIBDIR,
# LANE_SCENARIOS ("name:kind:watchdog ..."), LANE_ATTACH_TIMEOUT (s).

/bin/busybox --install -s
export PATH=/lane/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
exec </dev/console >/dev/console 2>&1

. /lane/config
export LD_LIBRARY_PATH=$LANE_LIBDIR
[ -n "$LANE_JANKBPF_DISABLE" ] && export JANKBPF_DISABLE="$LANE_JANKBPF_DISABLE"

# The host's ext4 disk image (lane.py), for causes fault and io: its driver's
# modules, then /dev/vda on /mnt/disk. Absent (no mkfs.ext4 on the host, no
# module): /mnt/disk stays unmounted and the scenarios say so. The disk
# can take 15 s to appear under TCG (arm64): up to 30 s.
if [ -f /lane/modules/order ]; then
	while read -r m; do insmod "/lane/modules/$m.ko" 2>/dev/null; done < /lane/modules/order
	mkdir -p /mnt/disk
	i=0
	while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	[ -b /dev/vda ] && mount -t ext4 /dev/vda /mnt/disk 2>/dev/null
fi

say() { echo "@@LANE $*"; }
now() { cut -d' ' -f1 /proc/uptime; }

# section NAME RC [FILE...]: a file's contents between markers.
section() {
	local name=$1 rc=$2
	shift 2
	echo "@@LANE BEGIN $name"
	[ $# -gt 0 ] && cat "$@" 2>&1
	echo
	echo "@@LANE END $name rc=$rc"
}

# start_jankbpf DIR ARGS...: runs jankbpf in the background (JB is its
# pid) and waits for its "attached" line on stderr. Returns 0 when
# attached, 1 when it exited first, 2 on timeout.
start_jankbpf() {
	local d=$1 t0 n
	shift
	echo "$*" > "$d/args"
	t0=$(now)
	jankbpf "$@" > "$d/records" 2> "$d/stderr" &
	JB=$!
	n=0
	while ! grep -q attached "$d/stderr"; do
		kill -0 "$JB" 2>/dev/null || return 1
		n=$((n + 1))
		[ "$n" -ge $((LANE_ATTACH_TIMEOUT * 10)) ] && return 2
		sleep 0.1
	done
	echo "start $t0 attached $(now)" > "$d/attach"
	return 0
}

# wait_records DIR N SECONDS: until DIR/records holds N jank records, at
# most SECONDS; the time it took (or "timeout") in DIR/records-wait.
wait_records() {
	local d=$1 want=$2 limit=$3 t0 n=0 c
	t0=$(now)
	while :; do
		c=$(grep -c '^{"type":"jank"' "$d/records" 2>/dev/null)
		if [ "${c:-0}" -ge "$want" ]; then
			echo "$want records from $t0 to $(now)" > "$d/records-wait"
			return 0
		fi
		n=$((n + 1))
		if [ "$n" -ge $((limit * 10)) ]; then
			echo "timeout: ${c:-0} of $want records from $t0 to $(now)" > "$d/records-wait"
			return 1
		fi
		sleep 0.1
	done
}

# wait_exit DIR SECONDS [SIGNAL]: sends SIGNAL (if given) to JB and waits
# up to SECONDS for it to exit; then SIGKILL. Leaves its status in DIR/exit.
wait_exit() {
	local d=$1 limit=$2 t0 n how rc
	[ -n "$3" ] && kill "-$3" "$JB" 2>/dev/null
	t0=$(now)
	n=0
	how=exited
	while kill -0 "$JB" 2>/dev/null; do
		n=$((n + 1))
		if [ "$n" -ge $((limit * 10)) ]; then
			how=killed-after-timeout
			kill -9 "$JB"
			break
		fi
		sleep 0.1
	done
	wait "$JB"
	rc=$?
	echo "$how rc=$rc from $t0 to $(now)" > "$d/exit"
	kernel_closes_done >> "$d/exit"
	return $rc
}

# jankbpf leaves its perf events for the kernel to close after its exit
# (src/bpf/perf_keeper.h): a worker closes them, a grace period each. The
# next measurement waits for that, seen as no task's kernel stack in a perf
# event's release, twice in a row (20 s at most).
kernel_closes_done() {
	local t0 clean=0 n=0
	t0=$(now)
	while [ "$clean" -lt 2 ] && [ "$n" -lt 400 ]; do
		if cat /proc/[0-9]*/stack 2>/dev/null | grep -q -E 'perf_trace_destroy|perf_release|perf_event_release_kernel|delayed_fput'; then
			clean=0
		else
			clean=$((clean + 1))
		fi
		n=$((n + 1))
		sleep 0.05
	done
	echo "kernel closes done from $t0 to $(now)"
}

# not_attached DIR STATUS: start_jankbpf gave up (STATUS: 1 exited, 2 timed
# out); the reason is kept and a jankbpf still starting is killed.
not_attached() {
	echo "not attached (status $2)" > "$1/attach"
	wait_exit "$1" 5 KILL
}

# What is left in the kernel once jankbpf is gone: programs are freed after
# an RCU grace period, so allow a few seconds for jb_* to disappear.
after_exit() {
	local d=$1 n=0
	while bpftool prog list 2>/dev/null | grep -q ' name jb_'; do
		n=$((n + 1))
		[ "$n" -ge 100 ] && break
		sleep 0.1
	done
	bpftool prog list > "$d/bpftool-after" 2>&1
	echo $? > "$d/bpftool-after.rc"
	ls /sys/kernel/tracing/instances > "$d/instances-after" 2>&1
}

while_attached() {
	local d=$1
	bpftool prog list > "$d/bpftool-during" 2>&1
	echo $? > "$d/bpftool-during.rc"
	ls /sys/kernel/tracing/instances > "$d/instances-during" 2>&1
}

# run_target DIR NAME CMD...: a target, its output and exit status kept.
run_target() {
	local d=$1 tname=$2
	shift 2
	"$@" > "$d/target-$tname" 2>&1
	echo $? > "$d/target-$tname.rc"
}

# sched_trace_on COMM, then sched_trace_record, then sched_trace_off FILE:
# COMM's sched_switch and sched_wakeup in a tracefs instance of the lane's
# own (mono clock, as jankbpf's records), kept as "ts: event: pid and state
# fields": the tests' second account of a task's time asleep, by other code
# than jankbpf's (tests/e2e/sched_trace.py parses it). Its events are
# enabled before jankbpf attaches, so at each tracepoint ftrace stamps
# first, as in the host's e2e tests: stamped after jankbpf's sched_switch
# program ran, every fault's sleep came out ~115 us shorter under TCG (its
# run time). tracing_on stays 0 until sched_trace_record.
SCHED_INSTANCE=/sys/kernel/tracing/instances/lane-sched
sched_trace_record() { echo 1 > "$SCHED_INSTANCE/tracing_on"; }
sched_trace_drop() { [ ! -d "$SCHED_INSTANCE" ] || rmdir "$SCHED_INSTANCE"; }
sched_trace_on() {
	local i=$SCHED_INSTANCE e
	mkdir "$i" || return 1
	echo 0 > "$i/tracing_on"
	echo mono > "$i/trace_clock"
	echo 8192 > "$i/buffer_size_kb"
	echo "prev_comm == \"$1\" || next_comm == \"$1\"" > "$i/events/sched/sched_switch/filter"
	for e in sched_wakeup sched_wakeup_new; do
		echo "comm == \"$1\"" > "$i/events/sched/$e/filter"
	done
	for e in sched_switch sched_wakeup sched_wakeup_new; do
		echo 1 > "$i/events/sched/$e/enable"
	done
}
sched_trace_off() {
	local i=$SCHED_INSTANCE
	[ -d "$i" ] || return 0
	echo 0 > "$i/tracing_on"
	{ sed -n -E '/: sched_(switch|wakeup|wakeup_new): /{
		s/^.* ([0-9]+\.[0-9]{6}): (sched_[a-z_]+): / \1: \2: /
		s/ (prev_comm|next_comm|comm|prev_prio|next_prio|prio|target_cpu|success)=[^ ]*//g
		s/ ==>//
		p
	}' "$i/trace"
	  echo "overrun: $(awk '/^overrun:/ { n += $2 } END { print n + 0 }' "$i"/per_cpu/cpu*/stats)"; } > "$1"
	echo $? > "$1.rc"
	rmdir "$i"
}

emit() {
	local name=$1 d=$2 f trc
	for f in args attach targets exit records records-wait stderr bpftool-during instances-during \
		bpftool-after instances-after; do
		[ -e "$d/$f" ] && section "$name/$f" "$(cat "$d/$f.rc" 2>/dev/null || echo 0)" "$d/$f"
	done
	for f in "$d"/target-*; do
		case $f in *.rc | *'*') continue ;; esac
		section "$name/${f##*/}" "$(cat "$f.rc" 2>/dev/null)" "$f"
	done
	for f in "$d"/logs/stack-*.txt; do
		[ -e "$f" ] && section "$name/stacklog/${f##*/}" 0 "$f"
	done
	for f in "$d"/logs/trace-*.dat; do
		[ -e "$f" ] || continue
		# The report is large: keep its sched_switch lines (capped) and
		# how many there were.
		trace-cmd report -i "$f" > "$d/report" 2> "$d/report.err"
		trc=$?
		grep -c 'sched_switch:' "$d/report" > "$d/report.count"
		# The targets' own switches first (on a busy guest the first 300
		# lines may all be other tasks'), then the first lines of all.
		{ grep 'sched_switch:' "$d/report" | grep -E 'comm=(stack_loop|jank_target)' | head -n 200
		  grep 'sched_switch:' "$d/report" | head -n 100; } > "$d/report.switches"
		section "$name/trace/${f##*/}" "$trc" "$d/report.count" "$d/report.err" "$d/report.switches"
	done
	# A text trace (the instance's own `trace` file): what jankbpf saves
	# when trace-cmd extract was killed at its stop (slow under TCG).
	for f in "$d"/logs/trace-*.txt; do
		[ -e "$f" ] || continue
		grep -c 'sched_switch:' "$f" > "$d/report.count"
		: > "$d/report.err"
		{ grep 'sched_switch:' "$f" | grep -E 'comm=(stack_loop|jank_target)' | head -n 200
		  grep 'sched_switch:' "$f" | head -n 100; } > "$d/report.switches"
		section "$name/trace/${f##*/}" 0 "$d/report.count" "$d/report.err" "$d/report.switches"
	done
}

# watchdog_args WD[+OPT...]: sets WD_ARGS for a scenario's watchdog: auto
# (jankbpf's default, no flag), timer, scan; options: v (-v), tp/tramp
# (--hooks tracepoint/trampoline), nostacks (--log-type 2), notrace
# (--log-type 1).
watchdog_args() {
	local wd=${1%%+*} opts=${1#*+} o
	WD_ARGS=
	[ "$wd" != auto ] && WD_ARGS="--watchdog $wd"
	[ "$opts" = "$1" ] && return
	for o in $(echo "$opts" | tr + ' '); do
		case $o in
		v) WD_ARGS="$WD_ARGS -v" ;;
		vv) WD_ARGS="$WD_ARGS -v -v" ;;
		tp) WD_ARGS="$WD_ARGS --hooks tracepoint" ;;
		tramp) WD_ARGS="$WD_ARGS --hooks trampoline" ;;
		nostacks) WD_ARGS="$WD_ARGS --log-type 2" ;;
		notrace) WD_ARGS="$WD_ARGS --log-type 1" ;;
		# Named targets: the kernel side with its JVM loop-thread check
		# (issue 29) compiled in, which a system-wide run prunes at load.
		comm) WD_ARGS="$WD_ARGS --comm jank_target" ;;
		# kernel_lock's lock:contention_* hooks: the default since
		# 2026-11-27 (README, Why); kept for lists that name it.
		klocks) WD_ARGS="$WD_ARGS --kernel-locks" ;;
		esac
	done
}

# main: CPU tasks, a pipe block woken by jt-waker, a stuck 3.5 s task, a
# trace past 450 ms (stack_loop), a 300 ms nanosleep (jank_target), on
# x86_64 two 400 ms tasks of a 32-bit process (loop32), a child waited for
# as a job and one as system() does (jobs_loop); ends with SIGINT.
scenario_main() {
	local name=$1 wd=$2 d=/tmp/lane/$1
	mkdir -p "$d/logs"
	set -- --ignore-startup-time 3 --dev --report-times-per-app 3 --log-dir "$d/logs"
	watchdog_args "$wd"
	if start_jankbpf "$d" "$@" $WD_ARGS; then
		while_attached "$d"
		run_target "$d" stack_loop stack_loop 3.3 deep:400 deep:400 block:300 deep:3500
		run_target "$d" jank_target jank_target --start-delay 3.3 --script sleep:300
		[ -x /lane/bin/stack_loop_pac ] &&
			run_target "$d" stack_loop_pac stack_loop_pac 3.3 deep:400 deep:400
		[ -x /lane/bin/loop32 ] &&
			run_target "$d" loop32 loop32 3300 400 400
		run_target "$d" jobs_loop jobs_loop 3300 job:600 system:600
		sleep 4 # the trace is saved 3 s after its trigger
		wait_exit "$d" 60 INT
	else
		not_attached "$d" $?
	fi
	after_exit "$d"
	emit "$name" "$d"
}

# markers: a uprobe pair on one copy of marker_loop, a USDT pair on
# another (separate files, so the probes do not nest); ends by --duration.
scenario_markers() {
	local name=$1 wd=$2 d=/tmp/lane/$1
	local up=/lane/bin/marker_loop_uprobe us=/lane/bin/marker_loop_usdt
	mkdir -p "$d/logs"
	set -- --ignore-startup-time 3 --log-type 1 --log-dir "$d/logs" --duration 24 \
		--marker "$up:mark_begin,$up:mark_end" --marker "$us:mloop:begin,$us:mloop:end"
	watchdog_args "$wd"
	if start_jankbpf "$d" "$@" $WD_ARGS; then
		while_attached "$d"
		run_target "$d" marker_loop_uprobe marker_loop_uprobe --start-delay 3.3 \
			a:spin:5,slow:spin:300,b:spin:5 g:sleep:250
		run_target "$d" marker_loop_usdt marker_loop_usdt --start-delay 3.3 \
			a:spin:5,slow:spin:300,b:spin:5 g:sleep:250
		echo "done $(now)" > "$d/targets"
		wait_exit "$d" 90
	else
		not_attached "$d" $?
	fi
	after_exit "$d"
	emit "$name" "$d"
}

# waits: jank_target once per event-loop wait this arch has (arm64 has no
# epoll_wait, poll or select), spin:200 (running) and sleep:200 (sleeping)
# over the threshold, short:200 under it. All start together, each script
# in a window of its own (start delays 1.2 s apart): one jankbpf start and
# one 3 s startup grace for all, and no two scripts share the CPUs.
# Section target-<loop> per wait: jank_target's --loop word (epoll_wait
# for its default loop).
scenario_waits() {
	local name=$1 wd=$2 d=/tmp/lane/$1 loops l i=0 pids=
	mkdir -p "$d/logs"
	if [ "$LANE_ARCH" = arm64 ]; then
		loops="epoll_pwait epoll_pwait2 ppoll pselect"
	else
		loops="epoll_wait epoll_pwait epoll_pwait2 poll ppoll select pselect"
	fi
	watchdog_args "$wd"
	# The summary's per-program run counts: which wait hooks ran, should a
	# target's tasks go unseen (once in a CI run on arm64: 4 tasks checked
	# of 812, not reproduced in 7 boots since).
	echo 1 > /proc/sys/kernel/bpf_stats_enabled 2>/dev/null
	if start_jankbpf "$d" --ignore-startup-time 3 --log-type 1 --log-dir "$d/logs" $WD_ARGS; then
		while_attached "$d"
		for l in $loops; do
			# epoll_wait is jank_target's default loop: no --loop.
			set -- --loop "$l"
			[ "$l" = epoll_wait ] && set --
			run_target "$d" "$l" jank_target "$@" --start-delay "$(echo "$i" | awk '{print 3.3 + 1.2 * $1}')" \
				--script spin:200,short:200,sleep:200 &
			pids="$pids $!"
			i=$((i + 1))
		done
		# Not a bare wait: that would wait for jankbpf too.
		for l in $pids; do wait "$l"; done
		echo "done $(now)" > "$d/targets"
		wait_exit "$d" 60 INT
	else
		not_attached "$d" $?
	fi
	echo 0 > /proc/sys/kernel/bpf_stats_enabled 2>/dev/null
	after_exit "$d"
	emit "$name" "$d"
}

# idle (issue 24): the first task after an attach to threads already idle
# in their waits. jank_target once per event-loop wait and marker_loop (a
# run_one/run_one%return marker pair) start first and idle in their waits
# (--start-on-signal, a gap of an hour: one step per SIGUSR2). Then
# LANE_IDLE_TRIALS times: jankbpf --pid (all of them) attaches, SIGUSR2
# starts one 250 ms spin in each (0.4 s apart), jankbpf stops (SIGINT). Each trial's
# records are section <name>-t<N>/records; the targets' truth is <name>.
scenario_idle() {
	local name=$1 wd=$2 d=/tmp/lane/$1 loops l n td pairs= p args= up=/lane/bin/marker_loop_uprobe
	mkdir -p "$d"
	if [ "$LANE_ARCH" = arm64 ]; then
		loops="epoll_pwait epoll_pwait2 ppoll pselect"
	else
		loops="epoll_wait epoll_pwait epoll_pwait2 poll ppoll select pselect"
	fi
	watchdog_args "$wd"
	for l in $loops; do
		set -- --loop "$l"
		[ "$l" = epoll_wait ] && set --
		jank_target "$@" --start-on-signal --gap 3600000 --script "spin:250x$LANE_IDLE_TRIALS" \
			> "$d/target-$l" 2>&1 &
		pairs="$pairs $l:$!"
	done
	marker_loop_uprobe --start-on-signal --gap 3600000 \
		$(seq "$LANE_IDLE_TRIALS" | sed 's/.*/slow:spin:250/') > "$d/target-marker_loop" 2>&1 &
	pairs="$pairs marker_loop:$!"
	for p in $pairs; do args="$args --pid ${p#*:}"; done
	sleep 3.4 # past --ignore-startup-time 3 before their first task
	n=1
	while [ "$n" -le "$LANE_IDLE_TRIALS" ]; do
		td=$d/t$n
		mkdir -p "$td/logs"
		say "IDLE $name $n $(now)"
		if start_jankbpf "$td" --ignore-startup-time 3 --log-type 1 --log-dir "$td/logs" \
			--marker "$up:run_one,$up:run_one%return" $args $WD_ARGS; then
			[ "$n" = 1 ] && while_attached "$td"
			# One at a time: eight spins at once on two CPUs would
			# measure the scheduler's queueing, not the task's begin.
			for p in $pairs; do
				kill -USR2 "${p#*:}"
				sleep 0.4
			done
			# Every target's record before the stop: under TCG the
			# reporter can be seconds behind, and a stop sends what is
			# still queued without its stacks (its budget, by design).
			# A fixed 0.5 s left 4 of 5 records without stacks here.
			wait_records "$td" "$(echo $pairs | wc -w)" 20
			wait_exit "$td" 60 INT
		else
			not_attached "$td" $?
		fi
		emit "$name-t$n" "$td"
		n=$((n + 1))
	done
	# One more SIGUSR2: a target prints a task's line at the wakeup after
	# it, then (its script done) exits.
	for p in $pairs; do kill -USR2 "${p#*:}"; done
	for p in $pairs; do
		wait "${p#*:}"
		echo $? > "$d/target-${p%%:*}.rc"
	done
	echo "done $(now)" > "$d/targets"
	echo "exited rc=0" > "$d/exit"
	emit "$name" "$d"
}

# causes: cause_target's planted causes, one task each (a mutex held by a
# worker, a pipe peer, a peer waiting on its own worker's lock, a
# SCHED_FIFO hog on the loop's CPU, a nanosleep), an mmap_lock writer, then
# a spin under a cgroup2 cpu.max quota, then an fsync and major faults on
# the host's disk image; jankbpf system-wide, SIGINT at the end. Section
# target-cause_quota is absent when no cgroup2 cpu controller could be had,
# target-cause_io when no disk was mounted. LANE_CAUSE_TRIALS times each
# (the bench's table plants 20; the mmap_lock writer, fsync and faults once).
scenario_causes() {
	local name=$1 wd=$2 d=/tmp/lane/$1 cg=/sys/fs/cgroup/lane-quota i steps="" quotas=""
	for i in $(seq "${LANE_CAUSE_TRIALS:-1}"); do
		steps="$steps lock:300 peer:300 chain:300 hog:300 sleep:300"
		quotas="$quotas quota:400"
	done
	mkdir -p "$d/logs"
	watchdog_args "$wd"
	sched_trace_on cause_target
	if start_jankbpf "$d" --ignore-startup-time 3 --log-type 1 --log-dir "$d/logs" $WD_ARGS; then
		while_attached "$d"
		run_target "$d" cause_target cause_target --start-delay 3.3 --gap 300 $steps spin:5
		# kernel_lock: a thread holds mmap_lock for write while a task's
		# mincore() waits for it (the hold grows with the VMAs: ~20 s of
		# splitting under TCG before its ready line).
		run_target "$d" cause_mmap cause_target --start-delay 3.3 --gap 2000 mmaplock:30 spin:5
		# fault and io on the host's disk image (section target-cause_io
		# absent without it).
		if grep -q ' /mnt/disk ext4 ' /proc/mounts; then
			sched_trace_record
			run_target "$d" cause_io cause_target --start-delay 3.3 --gap 400 --io-dir /mnt/disk \
				fsync:48 fault:8 spin:5
			sched_trace_off "$d/target-cause_io-sched"
		fi
		mkdir -p /sys/fs/cgroup
		grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup
		if echo +cpu > /sys/fs/cgroup/cgroup.subtree_control && mkdir -p "$cg" &&
			echo "20000 100000" > "$cg/cpu.max"; then
			run_target "$d" cause_quota sh -c "echo \$\$ > $cg/cgroup.procs && exec cause_target --start-delay 3.3 $quotas spin:5"
		fi
		echo "done $(now)" > "$d/targets"
		wait_exit "$d" 60 INT
	else
		not_attached "$d" $?
	fi
	sched_trace_drop
	after_exit "$d"
	emit "$name" "$d"
}

# tax: ns per getppid() in a process jankbpf never watches (it never waits),
# without jankbpf and with it attached system-wide; A B A B A B A (three
# attaches, LANE_TAX_ROUNDS: the emulated machine's speed drifts by several percent within a
# boot), each the best of 5 loops of 200,000 calls. What the waits' hooks
# cost everyone else. Beside it, the same way, what the cause hooks cost
# (bench/taxbench.c): ns per minor page fault, per futex hand-off between
# two threads, per O_DIRECT 4 KiB read of a null_blk device (blk-mq, no
# media: block:block_rq_* fire, nothing waits on a disk).
tax_loops() {
	local d=$1 ab=$2
	getppid 200000 5 > "$d/target-$ab" 2>&1
	echo $? > "$d/target-$ab.rc"
	taxbench fault 20000 5 > "$d/target-fault-$ab" 2>&1
	echo $? > "$d/target-fault-$ab.rc"
	taxbench futex 5000 5 > "$d/target-futex-$ab" 2>&1
	echo $? > "$d/target-futex-$ab.rc"
	if [ -b /dev/nullb0 ]; then
		taxbench blockio /dev/nullb0 20000 5 > "$d/target-blockio-$ab" 2>&1
		echo $? > "$d/target-blockio-$ab.rc"
	fi
}

scenario_tax() {
	local name=$1 wd=$2 d=/tmp/lane/$1 r
	mkdir -p "$d/logs"
	watchdog_args "$wd"
	if [ ! -b /dev/nullb0 ]; then
		{ insmod /lane/modules/configfs.ko && insmod /lane/modules/null_blk.ko queue_mode=2 irqmode=0 \
			nr_devices=1 gb=1 bs=4096 && sleep 1 && ls -l /dev/nullb0; } > "$d/target-nullblk" 2>&1
		echo $? > "$d/target-nullblk.rc"
	fi
	for r in $(seq "${LANE_TAX_ROUNDS:-3}"); do
		tax_loops "$d" "a$r"
		# -v: the stop's phases (README, Stopping), kept per round.
		if start_jankbpf "$d" -v --log-type 1 --log-dir "$d/logs" $WD_ARGS; then
			tax_loops "$d" "b$r"
			wait_exit "$d" 60 INT
			grep 'stop: trace' "$d/stderr" > "$d/target-stop-b$r"
		else
			not_attached "$d" $?
			break
		fi
	done
	tax_loops "$d" "a$((${LANE_TAX_ROUNDS:-3} + 1))"
	tax_stats "$d"
	emit "$name" "$d"
}

# Where the tax goes: one more attach with kernel.bpf_stats_enabled=1, each
# loop run once between two snapshots of jankbpf's programs' run_cnt and
# run_time_ns (the time inside the programs; what the kernel spends reaching
# them is not in it). Its loops' own ns are not compared: the stats cost too.
tax_stats() {
	local d=$1 loop
	[ -w /proc/sys/kernel/bpf_stats_enabled ] || return 0
	echo 1 > /proc/sys/kernel/bpf_stats_enabled
	if start_jankbpf "$d" --log-type 1 --log-dir "$d/logs" $WD_ARGS; then
		for loop in getppid fault futex blockio; do
			[ "$loop" = blockio ] && [ ! -b /dev/nullb0 ] && continue
			bpftool prog show 2>&1 | grep ' name jb_' > "$d/target-stats-$loop-before"
			case $loop in
			getppid) getppid 200000 1 ;;
			fault) taxbench fault 20000 1 ;;
			futex) taxbench futex 5000 1 ;;
			blockio) taxbench blockio /dev/nullb0 20000 1 ;;
			esac > "$d/target-stats-$loop-loop" 2>&1
			bpftool prog show 2>&1 | grep ' name jb_' > "$d/target-stats-$loop-after"
		done
		wait_exit "$d" 60 INT
	else
		not_attached "$d" $?
	fi
	echo 0 > /proc/sys/kernel/bpf_stats_enabled
}

# churn: start and stop jankbpf 20 times in a row (attach and detach patch
# kernel text: static keys, trampolines), for lockup hunting.
scenario_churn() {
	local name=$1 wd=$2 d=/tmp/lane/$1 i
	mkdir -p "$d/logs"
	watchdog_args "$wd"
	for i in $(seq 1 20); do
		say "CHURN $name $i $(now)"
		jankbpf --log-type 1 --log-dir "$d/logs" --duration 0.3 $WD_ARGS > /dev/null 2>> "$d/stderr"
		echo "run $i rc=$?" >> "$d/targets"
	done
	echo "exited rc=0" > "$d/exit"
	emit "$name" "$d"
}

# The lane's own tools: trace-cmd records and reports, bpftool runs.
tools_check() {
	local d=/tmp/lane/tools rc n try
	mkdir -p "$d"
	bpftool version > "$d/bpftool" 2>&1
	section tools/bpftool $? "$d/bpftool"
	# Under TCG a 1 s record has once come back empty (0 bytes from both
	# CPUs, CI on arm64): up to three tries, the one that counted is said.
	for try in 1 2 3; do
		rm -f "$d/t.dat" "$d/report"
		(
			cd "$d" && trace-cmd record -o t.dat -e sched:sched_switch sleep 1 &&
				trace-cmd report -i t.dat > report
		) > "$d/trace-cmd" 2>&1
		rc=$?
		n=$(grep -c 'sched_switch:' "$d/report" 2>/dev/null)
		[ "$rc" -eq 0 ] && [ "${n:-0}" -gt 0 ] && break
	done
	echo "sched_switch lines: ${n:-0} (try $try of 3)" >> "$d/trace-cmd"
	section tools/trace-cmd $rc "$d/trace-cmd"
	rm -rf "$d"
}

# A CPU stuck in the kernel (soft lockup, RCU stall, hung task): its stack
# is printed below the console's loglevel. Every 5 s, from a CPU still free:
# on the first report, the whole kernel log as a section, a stack of every
# CPU (sysrq l), and the guest stops -- the host has its evidence at once.
lockup_watch() {
	local n=0
	while sleep 5; do
		dmesg | grep -qE 'soft lockup|rcu_[a-z_]+ (self-)?detected stall|detected stalls|blocked for more than' || continue
		echo l > /proc/sysrq-trigger 2>/dev/null
		sleep 2
		dmesg > /tmp/lockup-dmesg
		for p in $(pgrep -x jankbpf); do
			for t in /proc/$p/task/*; do
				echo "== jankbpf $p thread ${t##*/} $(cat $t/comm 2>/dev/null)"
				cat "$t/stack" 2>/dev/null
			done
		done >> /tmp/lockup-dmesg
		section lockup-dmesg 1 /tmp/lockup-dmesg
		say "DONE $(now) lockup"
		sync
		poweroff -f
	done
}
lockup_watch &

say "GUEST $(uname -r) $(uname -m) cpus=$(grep -c ^processor /proc/cpuinfo)"
say "FEATURES $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo)"
tools_check
for s in $LANE_SCENARIOS; do
	sname=${s%%:*} rest=${s#*:}
	kind=${rest%%:*} wd=${rest#*:}
	say "START $sname $(now)"
	"scenario_$kind" "$sname" "$wd"
	say "STOP $sname $(now)"
done
dmesg > /tmp/dmesg
section dmesg 0 /tmp/dmesg
say "DONE $(now)"
sync
poweroff -f
