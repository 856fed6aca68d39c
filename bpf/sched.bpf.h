/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Scheduler hooks: switch, wakeup, exit, exec; the bodies shared by the
 * tp_btf and raw_tp programs (`btf` is a constant at every call site).
 */
#ifndef JANKBPF_SCHED_BPF_H
#define JANKBPF_SCHED_BPF_H

/*
 * Asleep for under a tenth of a sample period since its capture: the
 * period's slot goes back, so that a long sleep right after a short one (a
 * lock's hand-off, then a wait for a GC) is captured too. --offcpu-rate
 * bounds the copies. Timed to the wakeup, where the sleep ends: on a
 * crowded CPU the queueing after a 100 us sleep outlasts the tenth, and
 * timed to the switch-in the slot stayed taken (CI on 3e552a1 lost a 60 ms
 * pipe wait so). The switch-in tries too, for a wakeup not seen.
 */
static __always_inline void sleep_slot_back(struct jb_thread *t, __u64 now)
{
	if (t->capture_ns && now - t->capture_ns < sample_period_ns / 10) {
		t->last_sample_ns = t->slot_before_ns;
		t->last_capture_ns = 0;
	}
	t->capture_ns = 0;
}

/*
 * Returns the thread that was switched in, if it is watched; *prev_t gets
 * the one switched out, *now_out the clock read for either (0: none read).
 * The clock is read only for a thread inside a task: outside one nothing is
 * timed (begin_task starts the split afresh), and most switches of an event
 * loop come while it sleeps in its wait.
 */
static __always_inline struct jb_thread *on_switch(bool btf, bool preempt, struct task_struct *prev,
						   struct task_struct *next,
						   struct jb_thread **prev_t, __u64 *now_out)
{
	__u32 prev_tid, next_tid;
	struct jb_thread *t;
	__u64 now = 0;

	t = sched_thread_of(btf, prev, &prev_tid);
	*prev_t = t;
	if (t) {
		if (t->in_task) {
			struct sched_counts c;

			now = bpf_ktime_get_ns();
			TASK_COUNTS(btf, prev, c);
			if (t->state == JB_ST_RUNNING) {
				account(t, now);
				t->unseen_queued_ns = 0;
			} else
				account_unseen(t, now, &c);
			snapshot(t, &c);
		} else if (t->state != JB_ST_RUNNING) {
			stat_inc(JB_STAT_UNSEEN_SWITCH);
		}
		/* The task_struct's state is the one schedule() was called with. */
		if (preempt)
			t->state = JB_ST_RUNNABLE;
		else {
			long st = task_state(btf, prev);
			t->state = st == 0 ? JB_ST_RUNNABLE : sleep_state(st);
		}
		if (causes_enabled && t->in_task)
			cause_switch_out(prev, prev_tid, t, now, preempt);
	}
	causes_any_switch(btf, preempt, prev, next, &now);
	t = sched_thread_of(btf, next, &next_tid);
	if (t) {
		if (t->in_task) {
			struct sched_counts c;

			if (!now)
				now = bpf_ktime_get_ns();
			TASK_COUNTS(btf, next, c);
			if (t->state == JB_ST_RUNNING)
				account_unseen_out(t, now, &c);
			else
				account_in(t, now, &c);
			if (causes_enabled)
				cause_switch_in(next, next_tid, t, now);
			sleep_slot_back(t, now);
		}
		t->capture_ns = 0;
		/* Running again: a capture still waiting for its waker has none (it
		 * was preempted, or woken before its switch-out was traced); the
		 * next waking is that of a later sleep. */
		t->offcpu_pending = 0;
		t->state = JB_ST_RUNNING;
	}
	*now_out = now;
	return t;
}

/*
 * Woken while recorded as running, yet not on a CPU: its switch-out went
 * unseen (no program runs for a switch to a thread the kernel hides from
 * tracing; CI's sandbox hides its init's threads) and it has slept since.
 * Without this the sleep was charged to running (CI on 3e552a1: a frame's
 * 800 ms sleep). A thread still on its CPU is the benign race, woken
 * between setting its sleep state and calling schedule().
 */
static __always_inline bool slept_unseen(bool btf, struct task_struct *p, struct jb_thread *t)
{
	if (t->state != JB_ST_RUNNING || !bpf_core_field_exists(p->on_cpu))
		return false;
	return TASK_FIELD(btf, p, on_cpu) == 0;
}

/* The sleep it was woken from, as sleep_state classes it: the scheduler
 * counted it in the load (D without N) at its switch-out. */
static __always_inline __u32 unseen_sleep_state(bool btf, struct task_struct *task)
{
	/* (Not `p`: the bitfield macros declare one of their own.) */
	if (!bpf_core_field_exists(task->sched_contributes_to_load))
		return JB_ST_SLEEPING;
	if (btf ? BPF_CORE_READ_BITFIELD(task, sched_contributes_to_load) :
		  BPF_CORE_READ_BITFIELD_PROBED(task, sched_contributes_to_load))
		return JB_ST_BLOCKED;
	return JB_ST_SLEEPING;
}

static __always_inline void on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tid;
	struct jb_thread *t;
	bool unseen;

	if (causes_enabled && subjects_nr > 0)
		jb_subject_wakeup(TASK_FIELD(btf, p, pid));
	t = sched_thread_of(btf, p, &tid);
	if (!t)
		return;
	unseen = slept_unseen(btf, p, t);
	if (t->state < JB_ST_SLEEPING && !unseen)
		return;
	if (unseen) {
		/* From the counters since the last snapshot: what it ran and
		 * queued; the rest it slept (account_unseen). */
		t->state = unseen_sleep_state(btf, p);
		if (!t->in_task)
			stat_inc(JB_STAT_UNSEEN_SWITCH);
	}
	if (t->in_task) {
		struct sched_counts c;
		__u64 now = bpf_ktime_get_ns();

		TASK_COUNTS(btf, p, c);
		if (unseen)
			account_unseen(t, now, &c);
		else
			account(t, now);
		snapshot(t, &c);
		if (causes_enabled)
			cause_wakeup(p, tid, t, now);
		sleep_slot_back(t, now);
	}
	t->state = JB_ST_RUNNABLE;
	/*
	 * Asleep in the wait: this wakeup ends it (the last one before it
	 * returns). The time it then queues for a CPU is what run_delay gains
	 * by the return: the delivery, measured by the scheduler's own clock.
	 */
	if (t->in_wait) {
		t->wake_delay_ns = TASK_FIELD(btf, p, sched_info.run_delay);
		t->woken = 1;
		/* Adopted: its task begins at the switch-in, before run_delay
		 * counts this wait for a CPU; time it from here instead. */
		if (t->unseen_return)
			t->wake_ns = bpf_ktime_get_ns();
	}
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
		if (causes_enabled)
			causes_forget(task, tid);
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
	e = reserve_event(sizeof(*e));
	if (e) {
		fill_header(&e->hdr, JB_EV_EXIT, tgid, tid, bpf_ktime_get_ns());
		e->exit_code = BPF_CORE_READ(task, signal, group_exit_code);
		if (!e->exit_code)
			e->exit_code = BPF_CORE_READ(task, exit_code);
		e->flags = flags;
		BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);
		bpf_ringbuf_submit(e, 0);
	}
}

/*
 * Both watchdogs' sched_switch: the state split, the off-CPU capture and,
 * with timers (tp_btf only), arming the watchdog.
 */
static __always_inline void switch_hook(void *ctx, bool btf, bool preempt,
					struct task_struct *prev, struct task_struct *next)
{
	struct jb_thread *t, *p;
	__u64 now;

	/* Test seam: this thread's switch-ins never reach us, as on the VM
	 * kernels that hide the switch away from a host agent's threads
	 * (README, unseen_switches). 0 (always, outside tests): the verifier
	 * drops this. */
	if (test_hide_switches_to && TASK_FIELD(btf, next, pid) == test_hide_switches_to)
		return;
	if (test_hide_switches_from && TASK_FIELD(btf, prev, pid) == test_hide_switches_from)
		return;
	t = on_switch(btf, preempt, prev, next, &p, &now);
	/* A thread found inside a wait at attach (bpf/adopt.bpf.h) sleeps:
	 * still in that wait, or gone from it for good. */
	if (p && p->provisional && !preempt && p->state >= JB_ST_SLEEPING)
		adopted_sleeps(TASK_FIELD(btf, prev, pid), p);
	if (p && p->in_task) {
		__u32 prev_tid = TASK_FIELD(btf, prev, pid);

		/* A task that began without a switch-in has no watchdog yet. */
		if (btf && !p->armed)
			arm_watchdog(prev_tid, p, poll_ns());
		/*
		 * Asleep, blocked or preempted: no clock samples it now. Once the
		 * task is long, capture at most one sleep per sample period, and a
		 * preemption on the samples' slot (stacks.bpf.h). Before
		 * that, stash only when it goes to sleep: a preempted thread runs
		 * again and the clock samples it then, and stashing at every
		 * preemption made each wakeup of a busy peer (ping-pong) pay for a
		 * 16 KB copy.
		 */
		if (offcpu_enabled) {
			__u64 before = p->last_sample_ns;
			bool sleeps = !preempt && p->state != JB_ST_RUNNABLE;

			if (p->early ? (sleeps ? take_sleep_slot(p, now) : take_sample_slot(p, now)) : sleeps) {
				/* A sleep's slot may come back (below); a preemption's
				 * does not: on a crowded CPU every short preemption was
				 * a 16 KB copy, and a stack of its own in the tree. */
				if (p->early && sleeps) {
					p->capture_ns = now;
					p->slot_before_ns = before;
				}
				capture_offcpu(ctx, prev, prev_tid, p, now);
			}
		}
	}
	if (btf && t && !t->armed)
		/* First look one poll period from now (its task starts soon). */
		arm_watchdog(TASK_FIELD(btf, next, pid), t, poll_ns());
	/* Out of a wait whose return no hook will show: its task begins here. */
	if (t && t->unseen_return && !t->provisional) {
		struct sched_counts c;

		TASK_COUNTS(btf, next, c);
		adopted_switch_in(TASK_FIELD(btf, next, pid), t, &c);
	}
	if (btf)
		arm_unarmed();
}

/*
 * The waker: sched_waking runs in the context of whoever calls
 * try_to_wake_up; sched_wakeup may run later on the target CPU (a queued
 * remote wakeup), in the idle task's context.
 */
static __always_inline void waking_hook(void *ctx, bool btf, struct task_struct *p)
{
	__u32 tid;
	struct jb_thread *t;

	/* A capture awaits its waker only inside a long task, a cause only
	 * while a watched thread sleeps inside one: while neither (nearly
	 * always), every wakeup on the machine stops here. */
	if (long_tasks <= 0 && (!causes_enabled || (cause_asleep_nr <= 0 && subjects_nr <= 0)))
		return;
	if (causes_enabled && subjects_nr > 0)
		subject_waking(ctx, TASK_FIELD(btf, p, pid));
	t = sched_thread_of(btf, p, &tid);
	if (!t)
		return;
	if (t->offcpu_pending && long_tasks > 0)
		capture_waker(ctx, tid, t);
	/* Asleep, or (while some task is long) still going to sleep: a waking
	 * can come before its switch-out is traced (causes.bpf.h, early_*). */
	if (causes_enabled && t->in_task && (cause_asleep_nr > 0 || long_tasks > 0))
		cause_waking(ctx, p, tid, t);
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
		thread_forget(bpf_get_current_task_btf(), tid);
	}
	/*
	 * A non-leader that execs takes the leader's pid; drop its old one too
	 * (in task storage the old leader's state goes with its task_struct).
	 */
	if (old_pid != tid && !state_in_task) {
		bpf_map_delete_elem(&threads, &old_pid);
		tid_unmark(old_pid);
	}
}

#endif /* JANKBPF_SCHED_BPF_H */
