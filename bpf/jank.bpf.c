// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jankbpf kernel side: measures every task of every watched thread and tells
 * userspace only about the ones that reach the threshold.
 *
 * A task is the span from the return of an event-loop wait (epoll_wait,
 * poll, select, ...) to the thread's next entry into one. The wait syscalls
 * are hooked with per-syscall tracepoints, so processes that never wait pay
 * only the kernel's bitmap test. sched_switch/sched_wakeup split each task
 * into running / runnable / sleeping / blocked time.
 *
 * A task that never ends must still be seen: the threshold crossing (and the
 * 3 s hang) are detected while the task runs, by one of two watchdogs chosen
 * by userspace after a feature probe:
 *   - timer: a bpf_timer per watched thread, armed lazily from sched_switch
 *     (tp_btf, the only program type here allowed to touch timers) and
 *     re-armed by its own callback only while the thread is busy, so an idle
 *     machine sees no periodic wakeups;
 *   - scan: where bpf_timer or tp_btf is missing, a perf_event program on a
 *     cpu-clock tick walks the watched threads.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jankbpf/events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define CLOCK_MONOTONIC 1
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_NOLOAD 0x400

/* Options, set by userspace between open and load. */
const volatile __u64 threshold_ns = 150 * 1000000ull;
const volatile __u64 hang_ns = 3000 * 1000000ull;
const volatile __u64 ignore_startup_ns = 10 * 1000000000ull;
const volatile bool all_threads = false;   /* --threads all */
const volatile bool filter_pids = false;   /* only tgids in `procs` with TARGET */
const volatile bool filter_comm = false;   /* only group leaders named `comm` */
const volatile char target_comm[JB_COMM_LEN] = {};
const volatile __u32 self_tgid = 0;        /* never watch jankbpf itself */

/* Per watched thread. Created at its first eligible wait; removed at exit. */
struct jb_thread {
	__u64 begin_ns;       /* start of the current task */
	__u64 last_ns;        /* last state change inside the task */
	__u64 state_ns[JB_ST_NR];
	__u64 seq;            /* tasks started on this thread */
	__u64 proc_start_ns;
	__u32 pid;
	__u32 state;          /* enum jb_thread_state, tracked in and out of tasks */
	__u32 wait_nr;        /* the wait the current task began from */
	__u32 armed;          /* watchdog timer pending (timer mode) */
	__u8 in_task;
	__u8 crossed;
	__u8 hung;
	__u8 pad[5];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_proc);
} procs SEC(".maps");

/*
 * Timers live in a map of their own: the verifier refuses any map holding a
 * bpf_timer in tracepoint/raw_tp/perf_event programs, so only the tp_btf
 * programs and the timer callback may reference this one.
 */
struct jb_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_timer);
} timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, JB_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		*v += 1;
}

/* ---- eligibility -------------------------------------------------------- */

static __always_inline bool comm_matches(struct task_struct *leader)
{
	char comm[JB_COMM_LEN];

	BPF_CORE_READ_STR_INTO(&comm, leader, comm);
	for (int i = 0; i < JB_COMM_LEN; i++) {
		if (comm[i] != target_comm[i])
			return false;
		if (comm[i] == 0)
			break;
	}
	return true;
}

/* Decides whether the current thread is one we watch, and starts tracking it. */
static __noinline struct jb_thread *track_current(__u32 tid, __u32 tgid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);
	struct jb_thread fresh = {};
	struct jb_proc *proc;

	if (!all_threads && tid != tgid)
		return NULL;
	if (tgid == self_tgid)
		return NULL;
	if (filter_pids) {
		proc = bpf_map_lookup_elem(&procs, &tgid);
		if (!proc || !(proc->flags & JB_PROCF_TARGET))
			return NULL;
	}
	if (filter_comm) {
		if (!comm_matches(leader))
			return NULL;
		struct jb_proc p = {.flags = JB_PROCF_TARGET};
		bpf_map_update_elem(&procs, &tgid, &p, BPF_NOEXIST);
	}

	fresh.pid = tgid;
	fresh.state = JB_ST_RUNNING;
	fresh.proc_start_ns = BPF_CORE_READ(leader, start_time);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		stat_inc(JB_STAT_THREADS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

/* ---- task bookkeeping --------------------------------------------------- */

/* Charges the time since the last state change to the state the thread was in. */
static __always_inline void account(struct jb_thread *t, __u64 now)
{
	__u32 st = t->state;

	if (t->in_task && st < JB_ST_NR && now > t->last_ns)
		t->state_ns[st] += now - t->last_ns;
	t->last_ns = now;
}

static __always_inline void fill_task_event(struct jb_task_event *e, __u32 type,
					    __u32 tid, struct jb_thread *t, __u64 now)
{
	e->hdr.type = type;
	e->hdr.pid = t->pid;
	e->hdr.tid = tid;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.time_ns = now;
	e->begin_ns = t->begin_ns;
	e->end_ns = now;
	for (int i = 0; i < JB_ST_NR; i++)
		e->state_ns[i] = t->state_ns[i];
	e->seq = t->seq;
	e->proc_start_ns = t->proc_start_ns;
	e->wait_syscall = t->wait_nr;
	e->flags = (t->crossed ? JB_TASKF_CROSSED : 0) | (t->hung ? JB_TASKF_HUNG : 0);
	e->threshold_ms = threshold_ns / 1000000;
}

/* A record about a watched thread that is not necessarily `current` (timer, scan). */
static __noinline void emit_task(__u32 type, __u32 tid, struct jb_thread *t, __u64 now)
{
	struct jb_task_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		stat_inc(JB_STAT_RB_DROPS);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_task_event(e, type, tid, t, now);
	/* The unfinished part of the current state counts too. */
	if (t->state < JB_ST_NR && now > t->last_ns)
		e->state_ns[t->state & (JB_ST_NR - 1)] += now - t->last_ns;
	bpf_ringbuf_submit(e, 0);
}

/* Marks the process as one whose exit is worth a record. */
static __always_inline void mark_janked(__u32 tgid)
{
	struct jb_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	if (p) {
		__sync_fetch_and_add(&p->janks, 1);
		if (!(p->flags & JB_PROCF_JANKED))
			p->flags |= JB_PROCF_JANKED;
		return;
	}
	struct jb_proc fresh = {.flags = JB_PROCF_JANKED, .janks = 1};
	bpf_map_update_elem(&procs, &tgid, &fresh, BPF_NOEXIST);
}

/*
 * The task running on the current thread ends now: count it, and report it
 * when it reached the threshold. Runs in the thread's own context.
 */
static __always_inline void end_task(struct jb_thread *t, __u32 tid, __u32 flags)
{
	struct jb_task_event *e;
	__u64 now = bpf_ktime_get_ns();

	account(t, now);
	t->in_task = 0;
	stat_inc(JB_STAT_TASKS);
	if (now - t->begin_ns < threshold_ns)
		return;

	mark_janked(t->pid);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(JB_STAT_RB_DROPS);
		return;
	}
	fill_task_event(e, JB_EV_TASK_END, tid, t, now);
	e->flags |= flags;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	BPF_CORE_READ_STR_INTO(&e->proc_comm, task, group_leader, comm);
	bpf_ringbuf_submit(e, 0);
}

/* Entry into a wait: the task running on this thread, if any, ends here. */
static __always_inline int on_wait_enter(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t && t->in_task)
		end_task(t, tid, 0);
	return 0;
}

/* Return from a wait: a new task starts, unless the process is still starting. */
static __always_inline int on_wait_exit(__u32 nr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct jb_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 now = bpf_ktime_get_ns();

	if (!t) {
		t = track_current(tid, tgid);
		if (!t)
			return 0;
	}
	/* Seed rule: no checks in the first ignore_startup_ns of a process. */
	if (now - t->proc_start_ns < ignore_startup_ns)
		return 0;
	t->begin_ns = now;
	t->last_ns = now;
	t->state = JB_ST_RUNNING;
	for (int i = 0; i < JB_ST_NR; i++)
		t->state_ns[i] = 0;
	t->wait_nr = nr;
	t->crossed = 0;
	t->hung = 0;
	t->seq++;
	t->in_task = 1;
	return 0;
}

/* One program pair per wait syscall; userspace loads the ones the arch has. */
#define WAIT_HOOKS(name)                                                      \
	SEC("tracepoint/syscalls/sys_enter_" #name)                           \
	int jb_enter_##name(struct syscall_trace_enter *ctx)                   \
	{                                                                     \
		return on_wait_enter();                                       \
	}                                                                     \
	SEC("tracepoint/syscalls/sys_exit_" #name)                            \
	int jb_exit_##name(struct syscall_trace_exit *ctx)                     \
	{                                                                     \
		return on_wait_exit(ctx->nr);                                 \
	}

WAIT_HOOKS(epoll_wait)
WAIT_HOOKS(epoll_pwait)
WAIT_HOOKS(epoll_pwait2)
WAIT_HOOKS(poll)
WAIT_HOOKS(ppoll)
WAIT_HOOKS(select)
WAIT_HOOKS(pselect6)

/* ---- watchdog: what to do at a check ------------------------------------ */

/*
 * Emits the crossing / hang records that are due and says when the thread
 * needs looking at again: 0 means not until it runs again.
 */
static __always_inline __u64 check_thread(__u32 tid, struct jb_thread *t, __u64 now)
{
	bool on_cpu = t->state == JB_ST_RUNNING || t->state == JB_ST_RUNNABLE;

	if (!t->in_task)
		return on_cpu ? threshold_ns : 0;

	__u64 elapsed = now - t->begin_ns;

	if (!t->crossed && elapsed >= threshold_ns) {
		t->crossed = 1;
		mark_janked(t->pid);
		emit_task(JB_EV_CROSSING, tid, t, now);
	}
	if (!t->hung && elapsed >= hang_ns) {
		t->hung = 1;
		emit_task(JB_EV_HANG, tid, t, now);
	}
	if (!t->crossed)
		return threshold_ns - elapsed;
	/*
	 * Look again at least every threshold: this task may end and the next
	 * one start at any moment, and the check that first sees the new task
	 * must come before that one's crossing.
	 */
	if (!t->hung)
		return hang_ns - elapsed < threshold_ns ? hang_ns - elapsed : threshold_ns;
	/* Nothing more is due for this task: poll only while the thread is busy. */
	return on_cpu ? threshold_ns : 0;
}

/* ---- watchdog, timer mode (tp_btf only) ---------------------------------- */

static int timer_fired(void *map, __u32 *key, struct jb_timer *tm)
{
	__u32 tid = *key;
	struct jb_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 next;

	if (!t)
		return 0;
	next = check_thread(tid, t, bpf_ktime_get_ns());
	if (next) {
		bpf_timer_start(&tm->timer, next, 0);
		return 0;
	}
	/*
	 * Disarm, then look again: if the thread got back on a CPU after the
	 * check, sched_switch may have seen armed == 1 and skipped arming.
	 */
	__sync_lock_test_and_set(&t->armed, 0);
	if ((t->state == JB_ST_RUNNING || t->state == JB_ST_RUNNABLE) &&
	    !__sync_lock_test_and_set(&t->armed, 1))
		bpf_timer_start(&tm->timer, threshold_ns, 0);
	return 0;
}

static __noinline void arm_watchdog(__u32 tid, struct jb_thread *t)
{
	struct jb_timer *tm;

	if (t->armed || __sync_lock_test_and_set(&t->armed, 1))
		return;
	tm = bpf_map_lookup_elem(&timers, &tid);
	if (!tm) {
		struct jb_timer zero = {};

		bpf_map_update_elem(&timers, &tid, &zero, BPF_NOEXIST);
		tm = bpf_map_lookup_elem(&timers, &tid);
		if (!tm)
			goto fail;
		/* -EBUSY when another CPU initialised it first: fine. */
		bpf_timer_init(&tm->timer, &timers, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&tm->timer, timer_fired);
	}
	/* First look at the thread one threshold from now (its task starts soon). */
	if (bpf_timer_start(&tm->timer, threshold_ns, 0) == 0)
		return;
fail:
	stat_inc(JB_STAT_TIMER_FAIL);
	t->armed = 0;
}

/* ---- scheduler hooks ---------------------------------------------------- */

static __always_inline __u32 sleep_state(long state)
{
	if ((state & TASK_UNINTERRUPTIBLE) && !(state & TASK_NOLOAD))
		return JB_ST_BLOCKED;
	return JB_ST_SLEEPING;
}

/* Returns the thread that was switched in, if it is watched. */
static __always_inline struct jb_thread *on_switch(bool preempt, struct task_struct *prev,
						   struct task_struct *next)
{
	__u32 prev_tid = BPF_CORE_READ(prev, pid);
	__u32 next_tid = BPF_CORE_READ(next, pid);
	struct jb_thread *t;
	__u64 now = 0;

	t = bpf_map_lookup_elem(&threads, &prev_tid);
	if (t) {
		now = bpf_ktime_get_ns();
		account(t, now);
		/* The task_struct's state is the one schedule() was called with. */
		if (preempt)
			t->state = JB_ST_RUNNABLE;
		else {
			long st = BPF_CORE_READ(prev, __state);
			t->state = st == 0 ? JB_ST_RUNNABLE : sleep_state(st);
		}
	}
	t = bpf_map_lookup_elem(&threads, &next_tid);
	if (t) {
		if (!now)
			now = bpf_ktime_get_ns();
		account(t, now);
		t->state = JB_ST_RUNNING;
	}
	return t;
}

static __always_inline void on_wakeup(struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct jb_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (!t || t->state < JB_ST_SLEEPING)
		return;
	account(t, bpf_ktime_get_ns());
	t->state = JB_ST_RUNNABLE;
}

/* Forgets an exiting thread; reports the process when its last thread goes. */
static __always_inline void on_exit(struct task_struct *task)
{
	__u32 tid = BPF_CORE_READ(task, pid);
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct jb_proc *p;
	struct jb_exit_event *e;

	/* A task cut short by the thread's exit still ends, unrecovered. */
	struct jb_thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t && t->in_task)
		end_task(t, tid, JB_TASKF_UNRECOVERED);
	bpf_map_delete_elem(&threads, &tid);
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->hdr.type = JB_EV_EXIT;
		e->hdr.pid = tgid;
		e->hdr.tid = tid;
		e->hdr.cpu = bpf_get_smp_processor_id();
		e->hdr.time_ns = bpf_ktime_get_ns();
		e->exit_code = BPF_CORE_READ(task, signal, group_exit_code);
		if (!e->exit_code)
			e->exit_code = BPF_CORE_READ(task, exit_code);
		e->flags = p->flags;
		BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);
		bpf_ringbuf_submit(e, 0);
	} else {
		stat_inc(JB_STAT_RB_DROPS);
	}
	bpf_map_delete_elem(&procs, &tgid);
}

/* timer mode: tp_btf, may arm timers */
SEC("tp_btf/sched_switch")
int BPF_PROG(jb_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct jb_thread *t = on_switch(preempt, prev, next);

	if (t)
		arm_watchdog(next->pid, t);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(jb_wakeup_btf, struct task_struct *p)
{
	on_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_btf, struct task_struct *p)
{
	on_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jb_exit_btf, struct task_struct *task)
{
	__u32 tid = task->pid;

	on_exit(task);
	bpf_map_delete_elem(&timers, &tid); /* cancels a pending timer */
	return 0;
}

/* scan mode: raw_tp, no timers */
SEC("raw_tp/sched_switch")
int BPF_PROG(jb_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	on_switch(preempt, prev, next);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(jb_wakeup_raw, struct task_struct *p)
{
	on_wakeup(p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_raw, struct task_struct *p)
{
	on_wakeup(p);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(jb_exit_raw, struct task_struct *task)
{
	on_exit(task);
	return 0;
}

/* ---- watchdog, scan mode: a cpu-clock tick walks the watched threads ---- */

static long scan_one(void *map, __u32 *tid, struct jb_thread *t, void *ctx)
{
	check_thread(*tid, t, bpf_ktime_get_ns());
	return 0;
}

SEC("perf_event")
int jb_scan(void *ctx)
{
	bpf_for_each_map_elem(&threads, scan_one, NULL, 0);
	return 0;
}
