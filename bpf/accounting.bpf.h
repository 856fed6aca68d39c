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

/* The span since the last recorded change, as the scheduler's counters split it. */
struct unseen_split {
	__u64 ran;     /* on a CPU */
	__u64 queued;  /* waiting for one */
	__u64 rest;    /* in the recorded state */
};

static __always_inline __u64 span_since_change(struct jb_thread *t, __u64 now)
{
	return now > t->last_ns ? now - t->last_ns : 0;
}

/* CPU time since the last snapshot, at most `cap` (the counters and the
 * stamps are different clocks: microseconds apart). */
static __always_inline __u64 ran_since_snapshot(struct jb_thread *t, struct sched_counts *c, __u64 cap)
{
	__u64 ran = c->exec_ns > t->snap_exec_ns ? c->exec_ns - t->snap_exec_ns : 0;

	return ran < cap ? ran : cap;
}

/*
 * The thread is running, yet its recorded state says it is not: the
 * switch-in (and maybe the wakeup before it) never reached a tracepoint.
 * Seen on VMs whose kernels hide a host agent's threads from tracing: no
 * program runs for a switch away from such a thread, nor for a wakeup in
 * an interrupt that lands while it runs (CI's sandbox: init's
 * tokio-rt-worker threads). Since the last snapshot the kernel's counters
 * say how long the thread ran and how long it queued; the rest of the span
 * stays in the recorded state. At a switch-out the CPU time is exact (the
 * scheduler has just updated it); in the thread's own context it lags by
 * at most a tick.
 *
 * Recorded as queued, the thread was queued or on a CPU, nothing else: a
 * switch-out runs in its own context and is always seen. So all but its
 * run_delay ran, including what its CPU time leaves out (steal time, and
 * with IRQ time accounting the interrupts it took).
 */
static __always_inline void split_unseen(struct jb_thread *t, __u64 now, struct sched_counts *c,
					 struct unseen_split *s)
{
	__u64 span = span_since_change(t, now);
	__u64 queued = c->delay_ns > t->snap_delay_ns ? c->delay_ns - t->snap_delay_ns : 0;

	if (queued > span)
		queued = span;
	s->queued = queued;
	s->ran = t->state == JB_ST_RUNNABLE ? span - queued : ran_since_snapshot(t, c, span - queued);
	s->rest = span - s->ran - queued;
}

static __always_inline void account_unseen(struct jb_thread *t, __u64 now, struct sched_counts *c)
{
	struct unseen_split s;
	__u32 st = t->state;

	split_unseen(t, now, c, &s);
	if (t->in_task && st < JB_ST_NR) {
		t->state_ns[JB_ST_RUNNING] += s.ran;
		t->state_ns[JB_ST_RUNNABLE] += s.queued;
		t->state_ns[st] += s.rest;
	}
	t->last_ns = now;
	t->unseen_queued_ns = s.queued;  /* for the causes of the stretch it ended */
	stat_inc(JB_STAT_UNSEEN_SWITCH);
}

/*
 * The current task's split until now into out[], in the thread's own
 * context, leaving the thread's state as it is: the part since the last
 * change ran, or, recorded as off the CPU, is split as account_unseen
 * would (CI on 3e552a1: a frame's 800 ms sleep, its wakeup and switch-in
 * unseen, was reported as 800 ms running).
 */
static __always_inline void split_now(struct jb_thread *t, __u64 now, __u64 out[JB_ST_NR])
{
	struct sched_counts c;
	struct unseen_split s;
	__u32 st = t->state;

	for (int i = 0; i < JB_ST_NR; i++)
		out[i] = t->state_ns[i];
	if (st == JB_ST_RUNNING || st >= JB_ST_NR) {
		if (now > t->last_ns)
			out[JB_ST_RUNNING] += now - t->last_ns;
		return;
	}
	current_counts(&c);
	split_unseen(t, now, &c, &s);
	out[JB_ST_RUNNING] += s.ran;
	out[JB_ST_RUNNABLE] += s.queued;
	out[st & (JB_ST_NR - 1)] += s.rest;
}

/*
 * A switch-in, the span before it charged to the recorded state (queued,
 * or asleep when its wakeup went unseen). The snapshot taken here lets a
 * later repair count only what came after; the scheduler adds this wait to
 * run_delay just after the tracepoint, so it is added here (by jankbpf's
 * clock: microseconds off).
 */
static __always_inline void account_in(struct jb_thread *t, __u64 now, struct sched_counts *c)
{
	__u64 waited = t->state == JB_ST_RUNNABLE ? span_since_change(t, now) : 0;

	account(t, now);
	t->snap_exec_ns = c->exec_ns;
	t->snap_delay_ns = c->delay_ns + waited;
}

/*
 * Switched in while recorded as running: its switch-out went unseen (a
 * switch to a hidden thread) and no wakeup was seen since, so it was most
 * likely preempted. Off the CPU since its CPU time stopped growing: what it
 * ran since the last snapshot ran, the rest queued.
 */
static __always_inline void account_unseen_out(struct jb_thread *t, __u64 now, struct sched_counts *c)
{
	__u64 span = span_since_change(t, now);
	__u64 ran = ran_since_snapshot(t, c, span);

	if (t->in_task) {
		t->state_ns[JB_ST_RUNNING] += ran;
		t->state_ns[JB_ST_RUNNABLE] += span - ran;
	}
	t->last_ns = now;
	t->snap_exec_ns = c->exec_ns;
	t->snap_delay_ns = c->delay_ns + (span - ran);
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
	account_unseen(t, now, &c);
	t->state = JB_ST_RUNNING;
}

static __always_inline __u32 sleep_state(long state)
{
	if ((state & TASK_UNINTERRUPTIBLE) && !(state & TASK_NOLOAD))
		return JB_ST_BLOCKED;
	return JB_ST_SLEEPING;
}


#endif /* JANKBPF_ACCOUNTING_BPF_H */
