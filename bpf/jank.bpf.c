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
#include <bpf/usdt.bpf.h>
#include "jankbpf/events.h"
#include "user_regs.bpf.h"

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
/* Stacks: from early_ns into a task (0: no stacks), one per sample_period_ns,
 * up to sample_window_ns into it; off-CPU captures at switch-out. */
const volatile __u64 early_ns = 0;
const volatile __u64 sample_period_ns = 10 * 1000000ull;
const volatile __u64 sample_window_ns = 2000 * 1000000ull;
const volatile bool offcpu_enabled = false;
/* Trace bound (0: no traces): a task past it gets a JB_EV_TRACE record. */
const volatile __u64 trace_ns = 0;
/* Markers: tell userspace of each thread tracked from now on, so it can
 * attach to marked binaries of that process that no probe covers yet. */
const volatile bool announce_tracked = false;
/*
 * Where per-thread state lives: task storage (the timer watchdog, on kernels
 * with bpf_task_from_pid) or the `threads` hash (the scan watchdog, whose
 * raw_tp and perf_event programs have no trusted task pointers and must
 * walk every watched thread). Task storage hangs off the task_struct: a
 * lookup is a pointer chase instead of hashing the tid, on every hook.
 */
const volatile bool state_in_task = false;

/* Threads now inside a task past early_ns: userspace keeps the sampling
 * clocks on while this is non-zero and off otherwise (read through the
 * mmapped .bss, no syscall). */
__s64 long_tasks = 0;

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
	__u64 last_sample_ns; /* last stack taken in this task (on or off CPU) */
	__u8 in_task;
	__u8 crossed;
	__u8 hung;
	__u8 early;           /* past early_ns: counted in long_tasks */
	__u8 offcpu_pending;  /* an off-CPU capture awaits its waker */
	__u8 traced;          /* past trace_ns */
	__u8 in_wait;         /* between entry into a wait and its return */
	__u8 fresh_wait;      /* the wait returned, no marker task began since */
	__u8 job_wait;        /* in a child wait that ended the task (shell job) */
	__u8 job_started;     /* this task put a child in a process group */
	__u64 stash_seq;      /* task whose off-CPU capture is stashed, unsent */
	__u64 wake_ns;        /* last wakeup while asleep in the wait (0: none) */
	/* The kernel's counters at the last switch-out, wakeup or task begin. */
	__u64 snap_exec_ns;   /* se.sum_exec_runtime: CPU time */
	__u64 snap_delay_ns;  /* sched_info.run_delay: time queued for a CPU */
	__u64 delivery_ns;    /* current task: that wakeup to the wait's return */
	/* Markers: begin/end nesting depth; while > 0 waits bound no task. */
	__u32 depth;
	__u32 boundary;       /* enum jb_boundary of the current task */
	__u32 marker_id;      /* the marker whose span the current task is */
	__u32 pad2;
	char rname[JB_NAME_LEN]; /* the runnable's name read at the marker, or "" */
};

/* Scan watchdog: per watched thread, by tid (userspace shrinks it to one
 * entry when state_in_task). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_thread);
} threads SEC(".maps");

/* Timer watchdog: per watched thread, on its task_struct. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct jb_thread);
} thread_state SEC(".maps");

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
	/* Room for ~200 off-CPU captures (17 KB each) between two reads. */
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, JB_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * The last off-CPU capture of each watched thread, made at every blocking
 * switch-out inside a task: a thread that blocks before its task is long and
 * stays blocked has no other moment at which its user stack can be read.
 * Task storage, so it lives only as long as the thread and costs nothing for
 * threads that never block inside a task.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct jb_offcpu_event);
} offcpu_stash SEC(".maps");

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;

/*
 * The state of a watched thread, or NULL. `task` must be a trusted pointer
 * (tp_btf argument, bpf_get_current_task_btf) when state_in_task; the hash
 * path (scan watchdog, whose programs have none) uses only the tid. The
 * branch on the read-only flag is pruned by the verifier at load.
 */
static __always_inline struct jb_thread *thread_of(struct task_struct *task, __u32 tid)
{
	if (state_in_task)
		return bpf_task_storage_get(&thread_state, task, 0, 0);
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline struct jb_thread *thread_of_current(__u32 tid)
{
	if (state_in_task)
		return bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline void thread_forget(struct task_struct *task, __u32 tid)
{
	if (state_in_task)
		bpf_task_storage_delete(&thread_state, task);
	else
		bpf_map_delete_elem(&threads, &tid);
}

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		*v += 1;
}

/* An off-CPU capture to userspace; its waker is wanted next. */
static __always_inline void send_offcpu(struct jb_thread *t, struct jb_offcpu_event *e)
{
	if (bpf_ringbuf_output(&events, e, sizeof(*e), 0)) {
		stat_inc(JB_STAT_RB_DROPS);
		return;
	}
	t->offcpu_pending = 1;
	t->stash_seq = 0;  /* sent */
	stat_inc(JB_STAT_OFFCPU);
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
	if (state_in_task) {
		/* Only the thread itself creates its state: this is the first time. */
		struct jb_thread *t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(),
							   &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) {
			stat_inc(JB_STAT_THREADS_FULL);
			return NULL;
		}
	} else if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST)) {
		if (!bpf_map_lookup_elem(&threads, &tid))
			stat_inc(JB_STAT_THREADS_FULL);
		return bpf_map_lookup_elem(&threads, &tid);
	}
	if (announce_tracked) {
		struct jb_tracked_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

		if (e) {
			e->hdr.type = JB_EV_TRACKED;
			e->hdr.pid = tgid;
			e->hdr.tid = tid;
			e->hdr.cpu = bpf_get_smp_processor_id();
			e->hdr.time_ns = bpf_ktime_get_ns();
			e->proc_start_ns = fresh.proc_start_ns;
			bpf_ringbuf_submit(e, 0);
		} else {
			stat_inc(JB_STAT_RB_DROPS);
		}
	}
	return thread_of_current(tid);
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

/* The scheduler's own per-thread counters. */
struct sched_counts {
	__u64 exec_ns;   /* se.sum_exec_runtime */
	__u64 delay_ns;  /* sched_info.run_delay */
};

#define TASK_COUNTS(btf, task, c)                                               \
	do {                                                                    \
		if (btf) {                                                      \
			(c).exec_ns = (task)->se.sum_exec_runtime;              \
			(c).delay_ns = (task)->sched_info.run_delay;            \
		} else {                                                        \
			(c).exec_ns = BPF_CORE_READ(task, se.sum_exec_runtime); \
			(c).delay_ns = BPF_CORE_READ(task, sched_info.run_delay); \
		}                                                               \
	} while (0)

static __always_inline void current_counts(struct sched_counts *c)
{
	if (state_in_task) {
		struct task_struct *task = bpf_get_current_task_btf();

		TASK_COUNTS(true, task, *c);
	} else {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		TASK_COUNTS(false, task, *c);
	}
}

static __always_inline void snapshot(struct jb_thread *t, struct sched_counts *c)
{
	t->snap_exec_ns = c->exec_ns;
	t->snap_delay_ns = c->delay_ns;
}

/*
 * The thread is running, yet its recorded state says it is not: the
 * switch-in (and maybe the wakeup before it) never reached a tracepoint.
 * Seen on VMs whose kernels hide a host agent's threads from tracing: the
 * switch away from such a thread is not traced, and without this repair the
 * whole rest of the task was charged to "runnable". Since the last
 * snapshot the kernel's counters say how long the thread ran and how long
 * it queued; the rest of the span stays in the recorded state. At a
 * switch-out the CPU time is exact (the scheduler has just updated it); in
 * the thread's own context it lags by at most a tick, which goes to
 * running when the thread was recorded as queued.
 */
static __always_inline void account_unseen(struct jb_thread *t, __u64 now, struct sched_counts *c,
					   bool current)
{
	__u64 span = now > t->last_ns ? now - t->last_ns : 0;
	__u64 ran = c->exec_ns > t->snap_exec_ns ? c->exec_ns - t->snap_exec_ns : 0;
	__u64 queued = c->delay_ns > t->snap_delay_ns ? c->delay_ns - t->snap_delay_ns : 0;
	__u32 st = t->state;

	if (queued > span)
		queued = span;
	if (current && st == JB_ST_RUNNABLE)
		ran = span - queued;
	if (ran > span - queued)
		ran = span - queued;
	if (t->in_task && st < JB_ST_NR) {
		t->state_ns[JB_ST_RUNNING] += ran;
		t->state_ns[JB_ST_RUNNABLE] += queued;
		t->state_ns[st] += span - ran - queued;
	}
	t->last_ns = now;
	stat_inc(JB_STAT_UNSEEN_SWITCH);
}

/* In the thread's own context: it is on a CPU now, whatever was recorded. */
static __always_inline void account_current(struct jb_thread *t, __u64 now)
{
	if (t->state == JB_ST_RUNNING) {
		account(t, now);
		return;
	}
	struct sched_counts c;

	current_counts(&c);
	account_unseen(t, now, &c, true);
	t->state = JB_ST_RUNNING;
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
	e->delivery_ns = t->delivery_ns;
	e->boundary = t->boundary;
	e->marker_id = t->marker_id;
	__builtin_memcpy(e->runnable_name, t->rname, sizeof(e->runnable_name));
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

static __always_inline void leave_long(struct jb_thread *t)
{
	if (t->early) {
		t->early = 0;
		t->offcpu_pending = 0;
		__sync_fetch_and_add(&long_tasks, -1);
	}
}

/*
 * The task running on the current thread ends now: count it, and report it
 * when it reached the threshold. Runs in the thread's own context.
 */
static __always_inline void end_task(struct jb_thread *t, __u32 tid, __u32 flags)
{
	struct jb_task_event *e;
	__u64 now = bpf_ktime_get_ns();

	account_current(t, now);
	t->in_task = 0;
	leave_long(t);
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

/*
 * Entry into a wait: the task running on this thread, if any, ends here.
 * A thread seen for the first time is tracked from here, so that it is
 * already known when it blocks in this wait and the switch back in arms
 * its watchdog before its first task.
 */
static __always_inline int on_wait_enter(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_thread *t;

	/* Main threads only: one compare spares every other thread a lookup. */
	if (!all_threads && tid != id >> 32)
		return 0;
	t = thread_of_current(tid);
	if (!t) {
		t = track_current(tid, id >> 32);
		if (t) {
			t->in_wait = 1;
			t->wake_ns = 0;
		}
		return 0;
	}
	/* Inside a marker's span (a nested loop, a blocking poll in a
	 * callback) a wait is part of the task, not its end. */
	if (t->depth)
		return 0;
	if (t->in_task)
		end_task(t, tid, 0);
	t->in_wait = 1;
	t->wake_ns = 0;
	return 0;
}

/* A new task on the current thread, from now. */
static __always_inline void begin_task(struct jb_thread *t, __u64 now, __u32 boundary)
{
	struct sched_counts c;

	current_counts(&c);
	snapshot(t, &c);
	t->begin_ns = now;
	t->last_ns = now;
	t->state = JB_ST_RUNNING;
	for (int i = 0; i < JB_ST_NR; i++)
		t->state_ns[i] = 0;
	t->crossed = 0;
	t->hung = 0;
	t->traced = 0;
	leave_long(t);
	t->last_sample_ns = 0;
	t->seq++;
	t->boundary = boundary;
	t->marker_id = 0;
	t->rname[0] = 0;
	t->job_started = 0;
	t->in_task = 1;
}

/* Return from a wait: a new task starts, unless the process is still starting. */
static __always_inline int on_wait_exit(__u32 nr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct jb_thread *t;
	__u64 now;

	if (!all_threads && tid != tgid)
		return 0;
	t = thread_of_current(tid);
	now = bpf_ktime_get_ns();
	if (!t) {
		t = track_current(tid, tgid);
		if (!t)
			return 0;
	}
	if (t->depth)  /* a wait inside a marker's span */
		return 0;
	/*
	 * Delivery: from the wakeup that ended the wait to here, where the
	 * thread is back on a CPU and returns to its loop. 0 when the wait
	 * returned without sleeping (events were already pending).
	 */
	t->delivery_ns = t->in_wait && t->wake_ns && now > t->wake_ns ? now - t->wake_ns : 0;
	t->in_wait = 0;
	t->wake_ns = 0;
	t->fresh_wait = 1;
	/* Seed rule: no checks in the first ignore_startup_ns of a process. */
	if (now - t->proc_start_ns < ignore_startup_ns)
		return 0;
	t->wait_nr = nr;
	begin_task(t, now, JB_BOUND_SYSCALL);
	return 0;
}

/*
 * One program pair per syscall: jb_<kind>enter_<name> and jb_<kind>exit_<name>
 * (kind "" for event-loop waits, "cw" for child waits); userspace loads the
 * ones the arch has.
 */
#define SYSCALL_HOOKS(kind, name, on_enter, on_exit)                          \
	SEC("tracepoint/syscalls/sys_enter_" #name)                           \
	int jb_##kind##enter_##name(struct syscall_trace_enter *ctx)           \
	{                                                                     \
		return on_enter();                                            \
	}                                                                     \
	SEC("tracepoint/syscalls/sys_exit_" #name)                            \
	int jb_##kind##exit_##name(struct syscall_trace_exit *ctx)             \
	{                                                                     \
		return on_exit(ctx->nr);                                      \
	}
#define WAIT_HOOKS(name) SYSCALL_HOOKS(, name, on_wait_enter, on_wait_exit)

WAIT_HOOKS(epoll_wait)
WAIT_HOOKS(epoll_pwait)
WAIT_HOOKS(epoll_pwait2)
WAIT_HOOKS(poll)
WAIT_HOOKS(ppoll)
WAIT_HOOKS(select)
WAIT_HOOKS(pselect6)

/* ---- a job-control shell waiting for its foreground job ----------------- */

/*
 * An interactive shell waits for input in pselect6, then runs the command
 * line as a job: it forks, puts the child in a process group of its own
 * (setpgid on the child's pid; with job control the job gets the terminal)
 * and sleeps in wait4 until the job stops or ends. Counted as one task,
 * every foreground command of every shell would be a jank of the shell
 * (`sudo jankbpf` would report its own shell as hung). So once a task has
 * placed a child in a process group, a wait for a child bounds tasks like
 * an event-loop wait. A program that runs a child synchronously on its main
 * thread (system(), execSync) leaves it in its own group; that wait stays a
 * jank. (Whether the terminal went to the job cannot decide it: the child
 * takes the terminal itself, often after the shell is already in wait4.)
 */
SEC("tracepoint/syscalls/sys_enter_setpgid")
int jb_job_setpgid(struct syscall_trace_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__s32 pid = (__s32)ctx->args[0];
	struct jb_thread *t;

	if (!all_threads && tid != id >> 32)
		return 0;
	/* Its own group (0 or its pid) is not a job. */
	if (pid <= 0 || (__u32)pid == id >> 32)
		return 0;
	t = thread_of_current(tid);
	if (t && t->in_task)
		t->job_started = 1;
	return 0;
}

static __always_inline int on_child_wait_enter(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_thread *t;

	if (!all_threads && tid != id >> 32)
		return 0;
	t = thread_of_current(tid);
	if (!t || t->depth || !t->in_task || !t->job_started)
		return 0;
	t->job_wait = 1;
	return on_wait_enter();
}

static __always_inline int on_child_wait_exit(__u32 nr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);

	if (!t || !t->job_wait)
		return 0;
	t->job_wait = 0;
	return on_wait_exit(nr);
}

#define CHILD_WAIT_HOOKS(name) SYSCALL_HOOKS(cw, name, on_child_wait_enter, on_child_wait_exit)

CHILD_WAIT_HOOKS(wait4)
CHILD_WAIT_HOOKS(waitid)

/* ---- markers: uprobes and USDT probes that bound tasks ------------------ */

/*
 * A runtime's own dispatch marks (--marker, GLib, libuv). The outermost
 * begin ends the task running since the wait returned and starts one that
 * is the marker's span; its end starts a task that runs to the next wait or
 * marker. Between them depth counts nested begins, and waits neither end
 * nor start tasks. One program per kind, attached once per probe site
 * system-wide: the cookie says which marker, and the eligibility rules of
 * the waits (track_current) filter here in the kernel.
 */
static __noinline int marker_begin(struct pt_regs *ctx, __u64 cookie, bool usdt)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_thread *t = thread_of_current(tid);
	__u64 now, delivery;

	if (!t) {
		t = track_current(tid, id >> 32);
		if (!t)
			return 0;
	}
	if (t->depth >= JB_MAX_DEPTH)
		return 0;
	if (t->depth++)
		return 0;  /* nested: part of the outer span */
	now = bpf_ktime_get_ns();
	/* The first dispatch after a wait inherits that wait's delivery. */
	delivery = t->fresh_wait ? t->delivery_ns : 0;
	t->fresh_wait = 0;
	if (t->in_task)
		end_task(t, tid, 0);
	if (now - t->proc_start_ns < ignore_startup_ns)
		return 0;
	begin_task(t, now, JB_BOUND_MARKER);
	t->marker_id = (__u32)cookie;
	t->delivery_ns = delivery;
	if (usdt && (cookie & JB_MARKER_NAME_ARG)) {
		long arg = 0;
		/* The probe's first argument, when it is a string, names the runnable. */
		if (bpf_usdt_arg_cnt(ctx) > 0 && bpf_usdt_arg(ctx, 0, &arg) == 0 && arg &&
		    bpf_probe_read_user_str(t->rname, sizeof(t->rname), (void *)arg) < 0)
			t->rname[0] = 0;
	}
	return 0;
}

static __noinline int marker_end(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);
	__u64 now;

	/* depth 0: an end whose begin came before we attached. */
	if (!t || !t->depth)
		return 0;
	if (--t->depth)
		return 0;
	now = bpf_ktime_get_ns();
	if (t->in_task)
		end_task(t, tid, 0);
	if (now - t->proc_start_ns < ignore_startup_ns)
		return 0;
	begin_task(t, now, JB_BOUND_AFTER_MARKER);
	t->delivery_ns = 0;
	return 0;
}

SEC("uprobe")
int jb_mark_begin(struct pt_regs *ctx)
{
	return marker_begin(ctx, bpf_get_attach_cookie(ctx), false);
}

SEC("uprobe")
int jb_mark_end(struct pt_regs *ctx)
{
	return marker_end();
}

SEC("usdt")
int jb_usdt_begin(struct pt_regs *ctx)
{
	return marker_begin(ctx, bpf_usdt_cookie(ctx), true);
}

SEC("usdt")
int jb_usdt_end(struct pt_regs *ctx)
{
	return marker_end();
}

/* ---- watchdog: what to do at a check ------------------------------------ */

/*
 * Emits the crossing / hang records that are due and says when the thread
 * needs looking at again: 0 means not until it runs again.
 */
/*
 * How often a busy thread is looked at: often enough that the check which
 * first sees a new task comes before that task's first milestone.
 */
static __always_inline __u64 poll_ns(void)
{
	return early_ns ? early_ns : threshold_ns;
}

static __always_inline __u64 sooner(__u64 next, __u64 milestone, __u64 elapsed)
{
	__u64 d = milestone - elapsed;

	return next && next < d ? next : d;
}

static __always_inline bool recorded_on_cpu(struct jb_thread *t)
{
	return t->state == JB_ST_RUNNING || t->state == JB_ST_RUNNABLE;
}

/* on_cpu: the thread is running or queued, so its task may go on. */
static __always_inline __u64 check_thread(__u32 tid, struct jb_thread *t, __u64 now, bool on_cpu)
{
	__u64 next = 0;

	if (!t->in_task)
		return on_cpu ? poll_ns() : 0;

	__u64 elapsed = now - t->begin_ns;

	/* Emit what is due, in the order the milestones fall. */
	if (early_ns && !t->early && elapsed >= early_ns) {
		t->early = 1;
		__sync_fetch_and_add(&long_tasks, 1);
		emit_task(JB_EV_EARLY, tid, t, now);
	}
	if (!t->crossed && elapsed >= threshold_ns) {
		t->crossed = 1;
		mark_janked(t->pid);
		emit_task(JB_EV_CROSSING, tid, t, now);
	}
	/* "Past" the trace bound: a task of exactly trace_ns triggers nothing. */
	if (trace_ns && !t->traced && elapsed > trace_ns) {
		t->traced = 1;
		emit_task(JB_EV_TRACE, tid, t, now);
	}
	if (!t->hung && elapsed >= hang_ns) {
		t->hung = 1;
		emit_task(JB_EV_HANG, tid, t, now);
	}

	/* When the next one falls due. */
	if (early_ns && !t->early)
		next = sooner(next, early_ns, elapsed);
	if (!t->crossed)
		next = sooner(next, threshold_ns, elapsed);
	if (trace_ns && !t->traced)
		next = sooner(next, trace_ns + 1, elapsed);
	if (!t->hung)
		next = sooner(next, hang_ns, elapsed);
	if (!next)  /* nothing more is due for this task: poll only while busy */
		return on_cpu ? poll_ns() : 0;
	/* This task may end and the next one start at any moment. */
	return next < poll_ns() ? next : poll_ns();
}

/* ---- watchdog, timer mode (tp_btf only) ---------------------------------- */

/*
 * The task became long while its thread sleeps: send the capture stashed
 * when it went to sleep (its own context is the only one that could read
 * its user stack).
 */
static __noinline void flush_stash(struct task_struct *task, struct jb_thread *t)
{
	struct jb_offcpu_event *e;

	if (!t->early || !t->in_task || t->stash_seq != t->seq || t->state == JB_ST_RUNNING)
		return;
	e = bpf_task_storage_get(&offcpu_stash, task, 0, 0);
	if (e && e->seq == t->seq)
		send_offcpu(t, e);
}

/* One look at a watched thread from its timer; what is due next (0: none). */
static __always_inline __u64 timer_check(struct task_struct *task, __u32 tid, struct jb_timer *tm,
					 struct jb_thread *t)
{
	/*
	 * Running or queued, by the task_struct itself where we have it: a
	 * switch-in or wakeup that no tracepoint showed must not put the
	 * watchdog to sleep while the task goes on.
	 */
	bool on_cpu = task ? task->__state == 0 : recorded_on_cpu(t);
	__u64 next = check_thread(tid, t, bpf_ktime_get_ns(), on_cpu);

	if (offcpu_enabled && task)
		flush_stash(task, t);
	if (next) {
		bpf_timer_start(&tm->timer, next, 0);
		return 0;
	}
	/*
	 * Disarm, then look again: if the thread got back on a CPU after the
	 * check, sched_switch may have seen armed == 1 and skipped arming.
	 */
	__sync_lock_test_and_set(&t->armed, 0);
	if ((task ? task->__state == 0 : recorded_on_cpu(t)) &&
	    !__sync_lock_test_and_set(&t->armed, 1))
		bpf_timer_start(&tm->timer, poll_ns(), 0);
	return 0;
}

static int timer_fired(void *map, __u32 *key, struct jb_timer *tm)
{
	__u32 tid = *key;
	struct task_struct *task = NULL;
	struct jb_thread *t;

	/* The callback has only the tid: find the thread's task_struct. */
	if (bpf_task_from_pid)
		task = bpf_task_from_pid(tid);
	if (state_in_task) {
		if (!task)
			return 0;
		t = bpf_task_storage_get(&thread_state, task, 0, 0);
	} else {
		t = bpf_map_lookup_elem(&threads, &tid);
	}
	if (t)
		timer_check(task, tid, tm, t);
	if (task)
		bpf_task_release(task);
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
	/* First look at the thread one poll period from now (its task starts soon). */
	if (bpf_timer_start(&tm->timer, poll_ns(), 0) == 0)
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

/*
 * A task_struct field: a plain load from a trusted tp_btf argument, a
 * probe read from a raw_tp one. `btf` is a constant at every call site.
 */
#define TASK_FIELD(btf, task, field) ((btf) ? (task)->field : BPF_CORE_READ(task, field))

/*
 * Returns the thread that was switched in, if it is watched; *prev_t gets
 * the one switched out.
 */
static __always_inline struct jb_thread *on_switch(bool btf, bool preempt, struct task_struct *prev,
						   struct task_struct *next,
						   struct jb_thread **prev_t)
{
	__u32 prev_tid = TASK_FIELD(btf, prev, pid);
	__u32 next_tid = TASK_FIELD(btf, next, pid);
	struct jb_thread *t;
	__u64 now = 0;

	t = thread_of(prev, prev_tid);
	*prev_t = t;
	if (t) {
		struct sched_counts c;

		now = bpf_ktime_get_ns();
		TASK_COUNTS(btf, prev, c);
		if (t->state == JB_ST_RUNNING)
			account(t, now);
		else
			account_unseen(t, now, &c, false);
		snapshot(t, &c);
		/* The task_struct's state is the one schedule() was called with. */
		if (preempt)
			t->state = JB_ST_RUNNABLE;
		else {
			long st = TASK_FIELD(btf, prev, __state);
			t->state = st == 0 ? JB_ST_RUNNABLE : sleep_state(st);
		}
	}
	t = thread_of(next, next_tid);
	if (t) {
		if (!now)
			now = bpf_ktime_get_ns();
		account(t, now);
		t->state = JB_ST_RUNNING;
	}
	return t;
}

static __always_inline void on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tid = TASK_FIELD(btf, p, pid);
	struct jb_thread *t = thread_of(p, tid);

	if (!t || t->state < JB_ST_SLEEPING)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct sched_counts c;

	account(t, now);
	TASK_COUNTS(btf, p, c);
	snapshot(t, &c);
	t->state = JB_ST_RUNNABLE;
	/* Asleep in the wait: this wakeup ends it (the last one before it returns). */
	if (t->in_wait)
		t->wake_ns = now;
}

/* Forgets an exiting thread; reports the process when its last thread goes. */
static __always_inline void on_exit(bool btf, struct task_struct *task)
{
	__u32 tid = TASK_FIELD(btf, task, pid);
	__u32 tgid = TASK_FIELD(btf, task, tgid);
	struct jb_proc *p;
	struct jb_exit_event *e;

	/* A task cut short by the thread's exit still ends, unrecovered. */
	struct jb_thread *t = thread_of(task, tid);
	if (t) {
		if (t->in_task)
			end_task(t, tid, JB_TASKF_UNRECOVERED);
		thread_forget(task, tid);
	}
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return;
	/*
	 * Threads leaving together (exit_group) may all see live == 0 here:
	 * the one whose delete succeeds reports the process, once.
	 */
	__u32 flags = p->flags;
	if (bpf_map_delete_elem(&procs, &tgid))
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
		e->flags = flags;
		BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);
		bpf_ringbuf_submit(e, 0);
	} else {
		stat_inc(JB_STAT_RB_DROPS);
	}
}

/* ---- stacks ------------------------------------------------------------- */

/* Whether a stack of this task is wanted now; claims the slot if so. */
static __always_inline bool take_sample_slot(struct jb_thread *t, __u64 now)
{
	if (!t->in_task || !t->early)
		return false;
	if (now - t->begin_ns > sample_window_ns)
		return false;
	/* 10% slack: the clock's ticks jitter around the period. */
	if (t->last_sample_ns && now - t->last_sample_ns < sample_period_ns - sample_period_ns / 10)
		return false;
	t->last_sample_ns = now;
	return true;
}

/*
 * The on-CPU sampler: a cpu-clock perf event per CPU, on only while some
 * watched task is long (long_tasks > 0). A sample is kept (and perf copies
 * the user registers and stack) only for a watched thread past early_ns, one
 * per sample_period_ns; every other tick costs a map lookup.
 */
SEC("perf_event")
int jb_sample(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);

	if (!t || !take_sample_slot(t, bpf_ktime_get_ns()))
		return 0;
	stat_inc(JB_STAT_SAMPLES);
	return 1;
}

/*
 * A watched thread is going to sleep inside a task: no clock will sample it
 * now, so capture what a sample would hold, here in its own context, into
 * its stash. If the task is already long the capture goes out at once;
 * otherwise the watchdog sends it if the task becomes long while the thread
 * still sleeps.
 */
static __noinline void capture_offcpu(void *ctx, struct task_struct *prev, __u32 tid,
				      struct jb_thread *t, __u64 now)
{
	struct jb_offcpu_event *e;
	struct pt_regs *regs;

	e = bpf_task_storage_get(&offcpu_stash, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!e)
		return;
	e->hdr.type = JB_EV_OFFCPU;
	e->hdr.pid = t->pid;
	e->hdr.tid = tid;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.time_ns = now;
	e->seq = t->seq;
	e->state = t->state;
	long n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_bytes = n > 0 ? n : 0;
	e->nr_regs = 0;
	e->ustack_bytes = 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (regs) {
		jb_copy_user_regs(e->regs, regs);
		e->nr_regs = JB_USER_REGS;
		/*
		 * Page by page, so the copy stops where the stack mapping ends:
		 * first up to the end of SP's page, then whole pages. (Reads of
		 * 4 KB from SP itself cross into the next page; near the top of
		 * a shallow stack that page is past the mapping, and the read
		 * failed with the frames it held.)
		 */
		__u64 sp = JB_USER_SP(e->regs);
		__u32 head = 4096 - (sp & 4095);
		if (bpf_probe_read_user(e->ustack, head, (void *)sp) == 0) {
			e->ustack_bytes = head;
			for (int i = 0; i < JB_OFFCPU_STACK / 4096 - 1; i++) {
				if (bpf_probe_read_user(e->ustack + head + i * 4096, 4096,
							(void *)(sp + head + i * 4096)))
					break;
				e->ustack_bytes += 4096;
			}
		}
	}
	t->stash_seq = t->seq;
	if (t->early)
		send_offcpu(t, e);
}

/* A watched thread with an off-CPU capture is being woken: by whom. */
static __noinline void capture_waker(void *ctx, __u32 tid, struct jb_thread *t)
{
	struct jb_waker_event *e;
	__u64 id = bpf_get_current_pid_tgid();

	t->offcpu_pending = 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(JB_STAT_RB_DROPS);
		return;
	}
	e->hdr.type = JB_EV_WAKER;
	e->hdr.pid = t->pid;
	e->hdr.tid = tid;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.time_ns = bpf_ktime_get_ns();
	e->seq = t->seq;
	e->waker_pid = id >> 32;
	e->waker_tid = (__u32)id;
	bpf_get_current_comm(&e->waker_comm, sizeof(e->waker_comm));
	long n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_bytes = n > 0 ? n : 0;
	/* Interrupt context has no meaningful user stack of the waker. */
	n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	e->ustack_bytes = n > 0 ? n : 0;
	bpf_ringbuf_submit(e, 0);
}

/* timer mode: tp_btf, may arm timers */
SEC("tp_btf/sched_switch")
int BPF_PROG(jb_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct jb_thread *t, *p;

	t = on_switch(true, preempt, prev, next, &p);
	__u32 prev_tid = prev->pid;
	if (p && p->in_task) {
		/* A task that began without a switch-in has no watchdog yet. */
		arm_watchdog(prev_tid, p);
		/*
		 * Asleep, blocked or preempted: no clock samples it now. Once the
		 * task is long, capture at most one stack per sample period. Before
		 * that, stash only when it goes to sleep: a preempted thread runs
		 * again and the clock samples it then, and stashing at every
		 * preemption made each wakeup of a busy peer (ping-pong) pay for a
		 * 16 KB copy.
		 */
		if (offcpu_enabled) {
			__u32 tid = prev_tid;
			__u64 now = bpf_ktime_get_ns();
			if (p->early ? take_sample_slot(p, now) : !preempt && p->state != JB_ST_RUNNABLE)
				capture_offcpu(ctx, prev, tid, p, now);
		}
	}
	if (t)
		arm_watchdog(next->pid, t);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(jb_wakeup_btf, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

/*
 * The waker: sched_waking runs in the context of whoever calls
 * try_to_wake_up; sched_wakeup may run later on the target CPU (a queued
 * remote wakeup), in the idle task's context.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(jb_waking_btf, struct task_struct *p)
{
	__u32 tid = p->pid;
	struct jb_thread *t = thread_of(p, tid);

	if (t && t->offcpu_pending)
		capture_waker(ctx, tid, t);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_btf, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

/*
 * exec: the thread runs another program from here. Its task ends, and it is
 * forgotten, to be tracked afresh at its first wait in the new program:
 * --comm is checked against the new name, marker depth starts at 0, and
 * with markers userspace looks at the binaries the new program maps.
 */
static __always_inline void on_exec(__u32 old_pid)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);

	if (t) {
		if (t->in_task)
			end_task(t, tid, 0);
		leave_long(t);
		if (state_in_task)
			bpf_task_storage_delete(&thread_state, bpf_get_current_task_btf());
		else
			bpf_map_delete_elem(&threads, &tid);
	}
	/*
	 * A non-leader that execs takes the leader's pid; drop its old one too
	 * (in task storage the old leader's state goes with its task_struct).
	 */
	if (old_pid != tid && !state_in_task)
		bpf_map_delete_elem(&threads, &old_pid);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(jb_exec_btf, struct task_struct *p, pid_t old_pid)
{
	on_exec(old_pid);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(jb_exec_raw, struct task_struct *p, pid_t old_pid)
{
	on_exec(old_pid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jb_exit_btf, struct task_struct *task)
{
	__u32 tid = task->pid;

	on_exit(true, task);
	bpf_map_delete_elem(&timers, &tid); /* cancels a pending timer */
	return 0;
}

/* scan mode: raw_tp, no timers */
SEC("raw_tp/sched_switch")
int BPF_PROG(jb_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct jb_thread *p;

	on_switch(false, preempt, prev, next, &p);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(jb_wakeup_raw, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_raw, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(jb_exit_raw, struct task_struct *task)
{
	on_exit(false, task);
	return 0;
}

/* ---- watchdog, scan mode: a cpu-clock tick walks the watched threads ---- */

static long scan_one(void *map, __u32 *tid, struct jb_thread *t, void *ctx)
{
	check_thread(*tid, t, bpf_ktime_get_ns(), recorded_on_cpu(t));
	return 0;
}

SEC("perf_event")
int jb_scan(void *ctx)
{
	bpf_for_each_map_elem(&threads, scan_one, NULL, 0);
	return 0;
}
