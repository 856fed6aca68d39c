/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Threads found asleep inside a wait at attach.
 *
 * A BPF trampoline sees only the calls made after it is attached: a thread
 * already asleep in epoll_wait when jankbpf attaches returns through the
 * original code, its fexit never runs, and the first task after that wait
 * -- the one a user who starts `jankbpf --pid` on an idle app and then
 * clicks is waiting for -- would begin unseen and be lost. (Syscall
 * tracepoints see that return: attaching one sets the flag that routes
 * every thread's syscall exits through them.)
 *
 * So with trampolines a task iterator, run once after the attach, finds
 * every eligible thread asleep inside a wait (its user registers name the
 * syscall) and records it as `unseen_return`. The kernel still shows what
 * it does next: its wakeup, and the switch-in out of the wait, where its
 * task begins (microseconds before the syscall returns to user space). A
 * switch-in that was only a wakeup inside the wait (poll rechecking its
 * fds, epoll losing an event to another waiter, a stop and continue) is
 * undone at the thread's next sleep, when its registers show it still
 * inside that same call: the same syscall number (or restart_syscall, as
 * a stopped poll comes back) and the same user pc. Any later wait is
 * hooked.
 */
#ifndef JANKBPF_ADOPT_BPF_H
#define JANKBPF_ADOPT_BPF_H

#define JB_PF_KTHREAD 0x00200000

/* The wait a sleeping task is inside, as 1 + enum jb_wait_id (0: none). */
static __always_inline __u32 wait_in_regs(struct task_struct *task, __u64 nr)
{
	if (nr >= JB_MAX_SYSCALL_NR)
		return 0;
	return JB_TASK_IN_COMPAT_SYSCALL(task) ? adopt_wait_of_nr32[nr] : adopt_wait_of_nr[nr];
}

/* One task of the attach-time walk: tracked, as inside its wait, if it is. */
static __always_inline void adopt_task(struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid;
	struct jb_thread fresh = {}, *t;
	struct task_struct *leader;
	struct pt_regs *regs;
	__u32 wait;
	long st;

	__u64 id = (__u64)tgid << 32 | tid;
	bool main_rule = eligible_thread(id);

	/* Not a main thread: only a marked process's loop threads may be. */
	if (!main_rule && !(loop_threads_possible && loop_thread_procs))
		return;
	/* Kernel threads have no user registers; the dying no next task. */
	if ((task->flags & JB_PF_KTHREAD) || task->exit_state)
		return;
	st = task_state(true, task);
	if (!(st & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)))
		return;  /* on a CPU or queued: no wait to come back from */
	if (thread_of(task, tid))
		return;  /* already seen by a hook */
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return;
	fresh.wait_regs_nr = JB_REGS_SYSCALL_NR(regs);
	wait = wait_in_regs(task, fresh.wait_regs_nr);
	if (!wait || (!main_rule && !eligible_wait(id, wait - 1)))
		return;
	leader = task->group_leader;
	if (!watch_process(leader, tgid))
		return;

	fresh.pid = tgid;
	/* Its real uid, as bpf_get_current_uid_gid would give it: the bucket of
	 * --record-rate-uid it takes from. */
	fresh.uid = BPF_CORE_READ(task, cred, uid.val);
	fresh.proc_start_ns = BPF_CORE_READ(leader, start_time);
	fresh.state = sleep_state(st);
	fresh.in_wait = 1;
	fresh.unseen_return = 1;
	fresh.wait_nr = wait - 1;
	fresh.wait_regs_pc = JB_REGS_PC(regs);
	if (state_in_task) {
		t = bpf_task_storage_get(&thread_state, task, &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) {
			stat_inc(JB_STAT_THREADS_FULL);
			return;
		}
	} else {
		tid_mark(tid);
		if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST)) {
			if (!bpf_map_lookup_elem(&threads, &tid))
				stat_inc(JB_STAT_THREADS_FULL);
			return;  /* a hook got there first: it knows better */
		}
	}
	__sync_fetch_and_add(&adopted_nr, 1);
	announce_thread(tgid, tid, fresh.proc_start_ns);
}

/*
 * An adopted thread is switched in out of its wait: its task begins now
 * (unless the process is still starting); c: its counters. With timers its
 * watchdog is armed by the caller first.
 */
static __noinline void adopted_switch_in(__u32 tid, struct jb_thread *t, struct sched_counts *c)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 delivery = t->woken && now > t->wake_ns ? now - t->wake_ns : 0;

	t->provisional = 1;
	t->in_wait = 0;
	t->woken = 0;
	t->fresh_wait = 1;
	if (now - t->proc_start_ns < ignore_startup_ns)
		return;
	begin_task(t, tid, now, JB_BOUND_SYSCALL, c);
	/* begin_task forgets both (any other begin proves the wait is over). */
	t->unseen_return = 1;
	t->provisional = 1;
	t->began_at_switch = 1;
	t->delivery_ns = delivery;
}

/*
 * A provisional thread goes to sleep: still inside the adopted wait (the
 * switch-in was a wakeup the wait slept through again), its task is
 * undone; anywhere else, it has left that wait for good. prev is current.
 * Only an interruptible sleep can be the wait's own: an uninterruptible
 * one inside the same call is its return path's work after the wakeup (a
 * page fault copying the events out, a mutex), part of the task, and the
 * thread stays provisional until it sleeps again (CI on 91476e6: a first
 * task 12 ms short, undone at such a sleep and begun again at its end).
 */
static __noinline void adopted_sleeps(__u32 tid, struct jb_thread *t)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 nr, restart;

	if (t->state == JB_ST_BLOCKED)
		return;
	t->provisional = 0;
	if (!regs)
		return;
	nr = JB_REGS_SYSCALL_NR(regs);
	/* Stopped and continued, the wait comes back as restart_syscall
	 * from the same instruction. */
	restart = JB_TASK_IN_COMPAT_SYSCALL(task) ? restart_nr32 : restart_nr;
	if ((nr == t->wait_regs_nr || nr == restart) && JB_REGS_PC(regs) == t->wait_regs_pc) {
		if (t->in_task) {
			leave_long(t);
			t->in_task = 0;
			if (scan_watchdog)
				bpf_map_delete_elem(&in_task, &tid);
		}
		t->in_wait = 1;
		return;
	}
	t->unseen_return = 0;
}

#endif /* JANKBPF_ADOPT_BPF_H */
