/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A task from its begin to its end: reset, milestones, the record sent when
 * a task reached the threshold.
 */
#ifndef JANKBPF_TASKS_BPF_H
#define JANKBPF_TASKS_BPF_H

static __always_inline void fill_task_event(struct jb_task_event *e, __u32 type,
					    __u32 tid, struct jb_thread *t, __u64 now)
{
	fill_header(&e->hdr, type, t->pid, tid, now);
	e->begin_ns = t->begin_ns;
	e->end_ns = now;
	for (int i = 0; i < JB_ST_NR; i++)
		e->state_ns[i] = t->state_ns[i];
	e->seq = t->seq;
	e->proc_start_ns = t->proc_start_ns;
	e->wait_syscall = t->wait_nr;
	e->flags = (t->crossed ? JB_TASKF_CROSSED : 0) | (t->began_at_switch ? JB_TASKF_SWITCH_IN : 0);
	e->threshold_ms = threshold_ns / 1000000;
	e->delivery_ns = t->delivery_ns;
	e->boundary = t->boundary;
	e->marker_id = t->marker_id;
	__builtin_memcpy(e->runnable_name, t->rname, sizeof(e->runnable_name));
}

/* A record about a watched thread that is not necessarily `current` (timer, scan). */
static __noinline void emit_task(__u32 type, __u32 tid, struct jb_thread *t, __u64 now)
{
	struct jb_task_event *e = reserve_event(sizeof(*e));

	if (!e)
		return;
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
		if (!(p->flags & JB_PROCF_JANKED))
			p->flags |= JB_PROCF_JANKED;
		return;
	}
	struct jb_proc fresh = {.flags = JB_PROCF_JANKED};
	if (bpf_map_update_elem(&procs, &tgid, &fresh, BPF_NOEXIST) == -E2BIG)
		stat_inc(JB_STAT_PROCS_FULL);
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
 * Sure to be under the threshold by the jiffies alone: the clock, ~50 ns a
 * read on a VM, is then not needed at the end of a short task, nearly every
 * task there is. Two jiffies of margin for a tick that lags; with HZ
 * unknown (no kernel config to read) every end reads the clock.
 */
static __always_inline bool surely_short(struct jb_thread *t)
{
	return (bpf_jiffies64() - t->begin_jiffies + 2) * 1000000000ull <
	       threshold_ns * tick_hz;
}

/*
 * The task running on the current thread ends now: count it, and report it
 * when it reached the threshold. Runs in the thread's own context.
 */
static __always_inline void end_task(struct jb_thread *t, __u32 tid, __u32 flags)
{
	struct jb_task_event *e;
	__u64 now;

	if (scan_watchdog)
		bpf_map_delete_elem(&in_task, &tid);
	leave_long(t);
	stat_inc(JB_STAT_TASKS);
	if (surely_short(t)) {
		t->in_task = 0;
		/* No split to finish: only the state (it is on a CPU now). */
		if (t->state != JB_ST_RUNNING) {
			stat_inc(JB_STAT_UNSEEN_SWITCH);
			t->state = JB_ST_RUNNING;
		}
		return;
	}
	now = bpf_ktime_get_ns();
	account_current(t, now);  /* the split's last part, while still in the task */
	t->in_task = 0;
	if (now - t->begin_ns < threshold_ns)
		return;

	mark_janked(t->pid);
	if (!record_allowed(t, now)) {
		count_refused(t->pid, t->uid);
		return;
	}
	if (causes_enabled)  /* its causes go just before it */
		causes_send(state_in_task ? bpf_get_current_task_btf() : NULL, tid, t, now, false);
	e = reserve_event(sizeof(*e));
	if (!e)
		return;
	fill_task_event(e, JB_EV_TASK_END, tid, t, now);
	e->flags |= flags;
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	BPF_CORE_READ_STR_INTO(&e->proc_comm, task, group_leader, comm);
	bpf_ringbuf_submit(e, 0);
}

/*
 * Timer mode, a task beginning with no watchdog (see `unarmed`): list the
 * thread, and wake the reader so that a switch comes soon even on an idle
 * machine; that switch arms it.
 */
static __noinline void ask_to_arm(__u32 tgid, __u32 tid)
{
	__u8 one = 1;
	struct jb_header *h;
	long err = bpf_map_update_elem(&unarmed, &tid, &one, BPF_NOEXIST);

	if (err == -EEXIST)  /* asked already: one wakeup, not one per task */
		return;
	if (err) {
		stat_inc(JB_STAT_TIMER_FAIL);
		return;
	}
	__sync_fetch_and_add(&unarmed_nr, 1);
	h = reserve_event(sizeof(*h));
	if (h) {
		fill_header(h, JB_EV_UNARMED, tgid, tid, bpf_ktime_get_ns());
		bpf_ringbuf_submit(h, BPF_RB_FORCE_WAKEUP);
	}
}

/* A new task on the current thread, from now; c: its counters now. */
static __always_inline void begin_task(struct jb_thread *t, __u32 tid, __u64 now, __u32 boundary,
				       struct sched_counts *c)
{
	snapshot(t, c);
	t->begin_ns = now;
	t->begin_jiffies = bpf_jiffies64();
	t->last_ns = now;
	t->state = JB_ST_RUNNING;
	for (int i = 0; i < JB_ST_NR; i++)
		t->state_ns[i] = 0;
	t->crossed = 0;
	t->hung = 0;
	t->traced = 0;
	t->rate = JB_RATE_UNDECIDED;
	leave_long(t);
	t->last_sample_ns = 0;
	t->capture_ns = 0;
	t->last_capture_ns = 0;
	t->seq++;
	t->boundary = boundary;
	t->marker_id = 0;
	t->rname[0] = 0;
	t->job_started = 0;
	/* A task begun any other way proves a wait found at attach is over. */
	t->unseen_return = 0;
	t->provisional = 0;
	t->began_at_switch = 0;
	t->unseen_queued_ns = 0;
	t->in_task = 1;
	if (scan_watchdog) {
		__u8 one = 1;

		if (bpf_map_update_elem(&in_task, &tid, &one, BPF_ANY) == -E2BIG)
			stat_inc(JB_STAT_SCAN_FULL);
	} else if (!t->armed) {
		ask_to_arm(t->pid, tid);
	}
}

#endif /* JANKBPF_TASKS_BPF_H */
