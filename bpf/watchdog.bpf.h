/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The watchdog: a running task must be reported when it crosses, passes the
 * trace bound or hangs. Timer mode (a bpf_timer per thread, tp_btf only)
 * and scan mode (a cpu-clock tick walking the tid hash).
 */
#ifndef JANKBPF_WATCHDOG_BPF_H
#define JANKBPF_WATCHDOG_BPF_H

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

static __always_inline bool recorded_on_cpu(struct jb_thread *t)
{
	return t->state == JB_ST_RUNNING || t->state == JB_ST_RUNNABLE;
}

/* on_cpu: the thread is running or queued, so its task may go on. task:
 * the thread's task_struct where the caller has one (for its causes). */
static __always_inline __u64 check_thread(struct task_struct *task, __u32 tid, struct jb_thread *t,
					  __u64 now, bool on_cpu)
{
	__u64 next = 0;

	if (!t->in_task)
		return on_cpu ? poll_ns() : 0;

	__u64 elapsed = now - t->begin_ns;

	/* Emit what is due, in the order the milestones fall. */
	/* A task over --record-rate(-uid) sends none of these (record_rate.bpf.h). */
	if (early_ns && !t->early && t->rate != JB_RATE_REFUSED && elapsed >= early_ns && early_allowed(t, now)) {
		t->early = 1;
		__sync_fetch_and_add(&long_tasks, 1);
		emit_task(JB_EV_EARLY, tid, t, now);
	}
	if (!t->crossed && elapsed >= threshold_ns) {
		t->crossed = 1;
		mark_janked(t->pid);
		if (record_allowed(t, now))
			emit_task(JB_EV_CROSSING, tid, t, now);
		else
			leave_long(t);  /* refused after its early mark: no more stacks */
	}
	/* "Past" the trace bound: a task of exactly trace_ns triggers nothing. */
	if (trace_ns && !t->traced && elapsed > trace_ns) {
		t->traced = 1;
		if (record_allowed(t, now))
			emit_task(JB_EV_TRACE, tid, t, now);
	}
	if (!t->hung && elapsed >= hang_ns) {
		t->hung = 1;
		if (record_allowed(t, now)) {
			if (causes_enabled)  /* its causes so far go just before it */
				causes_send(task, tid, t, now, true);
			emit_task(JB_EV_HANG, tid, t, now);
		} else {
			count_refused(t->pid, t->uid);
		}
	}

	/*
	 * When the next one falls due: the first milestone still ahead. Every
	 * milestone already reached was emitted just above, so "ahead" is
	 * elapsed alone; early < threshold < trace and threshold < hang
	 * (userspace checks), so only the last two need comparing. Written as
	 * one chain rather than a sooner() per flag: the verifier walked each
	 * combination of flags through this (half of jb_switch_btf's load).
	 */
	__u64 due;

	if (early_ns && elapsed < early_ns)
		due = early_ns;
	else if (elapsed < threshold_ns)
		due = threshold_ns;
	else {
		__u64 trace_due = trace_ns && elapsed <= trace_ns ? trace_ns + 1 : 0;
		__u64 hang_due = elapsed < hang_ns ? hang_ns : 0;

		due = !trace_due || (hang_due && hang_due < trace_due) ? hang_due : trace_due;
	}
	if (!due)  /* nothing more is due for this task: poll only while busy */
		return on_cpu ? poll_ns() : 0;
	next = due - elapsed;
	/* This task may end and the next one start at any moment. */
	return next < poll_ns() ? next : poll_ns();
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
	bool on_cpu = task ? task_state(true, task) == 0 : recorded_on_cpu(t);
	__u64 next = check_thread(task, tid, t, bpf_ktime_get_ns(), on_cpu);

	/* Long while asleep: follow whom it waits for from now (causes.bpf.h). */
	if (causes_enabled && t->early && t->state >= JB_ST_SLEEPING)
		causes_turned_long(task, tid, t);

	/* Task storage needs the task; the tid stash does not. */
	if (offcpu_enabled && (task || !state_in_task))
		flush_stash(task, tid, t);
	if (next) {
		bpf_timer_start(&tm->timer, next, 0);
		return 0;
	}
	/*
	 * Disarm, then look again: if the thread got back on a CPU after the
	 * check, sched_switch may have seen armed == 1 and skipped arming.
	 */
	__sync_lock_test_and_set(&t->armed, 0);
	if ((task ? task_state(true, task) == 0 : recorded_on_cpu(t)) &&
	    !__sync_lock_test_and_set(&t->armed, 1))
		bpf_timer_start(&tm->timer, poll_ns(), 0);
	return 0;
}

/*
 * A watched thread by tid alone (a timer callback or a map walk has no
 * task): its state and, where the kfunc is there, its task_struct, which
 * the caller releases.
 */
static __always_inline struct jb_thread *thread_by_tid(__u32 tid, struct task_struct **task)
{
	*task = NULL;
	if (use_task_from_pid && bpf_task_from_pid)
		*task = bpf_task_from_pid(tid);
	if (state_in_task)
		return *task ? bpf_task_storage_get(&thread_state, *task, 0, 0) : NULL;
	return bpf_map_lookup_elem(&threads, &tid);
}

static int timer_fired(void *map, __u32 *key, struct jb_timer *tm)
{
	__u32 tid = *key;
	struct task_struct *task;
	struct jb_thread *t = thread_by_tid(tid, &task);

	if (t)
		timer_check(task, tid, tm, t);
	if (task)
		bpf_task_release(task);
	return 0;
}

static __noinline void arm_watchdog(__u32 tid, struct jb_thread *t, __u64 delay)
{
	struct jb_timer *tm;

	if (t->armed || __sync_lock_test_and_set(&t->armed, 1))
		return;
	tm = bpf_map_lookup_elem(&timers, &tid);
	if (!tm) {
		struct jb_timer zero = {};

		if (bpf_map_update_elem(&timers, &tid, &zero, BPF_NOEXIST) == -E2BIG)
			stat_inc(JB_STAT_TIMERS_FULL);
		tm = bpf_map_lookup_elem(&timers, &tid);
		if (!tm)
			goto fail;
		/* -EBUSY when another CPU initialised it first: fine. */
		bpf_timer_init(&tm->timer, &timers, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&tm->timer, timer_fired);
	}
	if (bpf_timer_start(&tm->timer, delay, 0) == 0)
		return;
fail:
	stat_inc(JB_STAT_TIMER_FAIL);
	t->armed = 0;
}

/* One thread of `unarmed`: armed if it is still there and still unarmed. */
static long arm_listed(void *map, __u32 *key, __u8 *unused, void *ctx)
{
	__u32 tid = *key;
	struct task_struct *task;
	struct jb_thread *t;

	bpf_map_delete_elem(map, key);
	t = thread_by_tid(tid, &task);
	/*
	 * Its task began before this switch, maybe long before (the reader's
	 * wakeup can wait behind a real-time task): the first look falls due
	 * from the task's begin, at once if that is past.
	 */
	if (t && t->in_task) {
		__u64 elapsed = bpf_ktime_get_ns() - t->begin_ns;

		arm_watchdog(tid, t, elapsed < poll_ns() ? poll_ns() - elapsed : 1000);
	}
	if (task)
		bpf_task_release(task);
	return 0;
}

/* At a switch anywhere (timer mode): arm the threads whose tasks began unarmed. */
static __always_inline void arm_unarmed(void)
{
	if (!unarmed_nr || !__sync_lock_test_and_set(&unarmed_nr, 0))
		return;
	bpf_for_each_map_elem(&unarmed, arm_listed, NULL, 0);
}

/* The scan watchdog's tick: one look at each thread inside a task. */
static long scan_one(void *map, __u32 *tid, __u8 *unused, void *ctx)
{
	struct jb_thread *t = bpf_map_lookup_elem(&threads, tid);

	if (!t)
		return 0;
	check_thread(NULL, *tid, t, bpf_ktime_get_ns(), recorded_on_cpu(t));
	if (causes_enabled && t->early && t->state >= JB_ST_SLEEPING)
		causes_turned_long(NULL, *tid, t);
	if (offcpu_enabled)
		flush_stash(NULL, *tid, t);
	return 0;
}

#endif /* JANKBPF_WATCHDOG_BPF_H */
