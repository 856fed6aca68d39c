/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-task state split: running, runnable, sleeping, blocked_io, from
 * the scheduler hooks, repaired by the scheduler's own counters where a
 * switch went unseen.
 */
#ifndef JANKBPF_ACCOUNTING_BPF_H
#define JANKBPF_ACCOUNTING_BPF_H

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
	t->unseen_queued_ns = queued;  /* for the causes of the stretch it ended */
	stat_inc(JB_STAT_UNSEEN_SWITCH);
}

/* In the thread's own context: it is on a CPU now, whatever was recorded. */
static __always_inline void account_current(struct jb_thread *t, __u64 now)
{
	if (t->state == JB_ST_RUNNING) {
		account(t, now);
		t->unseen_queued_ns = 0;
		return;
	}
	struct sched_counts c;

	current_counts(&c);
	account_unseen(t, now, &c, true);
	t->state = JB_ST_RUNNING;
}

static __always_inline __u32 sleep_state(long state)
{
	if ((state & TASK_UNINTERRUPTIBLE) && !(state & TASK_NOLOAD))
		return JB_ST_BLOCKED;
	return JB_ST_SLEEPING;
}


#endif /* JANKBPF_ACCOUNTING_BPF_H */
