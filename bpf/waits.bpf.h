/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Waits bound tasks: entry into an event-loop wait ends the task, its
 * return starts the next; child waits of a job-control shell likewise.
 */
#ifndef JANKBPF_WAITS_BPF_H
#define JANKBPF_WAITS_BPF_H

/*
 * Entry into a wait: the task running on this thread, if any, ends here.
 * A thread seen for the first time is tracked from here, so that it is
 * already known when it blocks in this wait and the switch back in arms
 * its watchdog before its first task.
 */
static __always_inline int on_wait_enter(__u32 wait_id)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_thread *t;

	if (!eligible_wait(id, wait_id))
		return 0;
	t = thread_of_current(tid);
	if (!t) {
		t = track_current(tid, id >> 32, true);
		if (t) {
			t->in_wait = 1;
			t->woken = 0;
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
	t->woken = 0;
	/* This wait is hooked: its return will be seen. */
	t->unseen_return = 0;
	t->provisional = 0;
	return 0;
}

/* Return from a wait: a new task starts, unless the process is still starting. */
static __always_inline int on_wait_exit(__u32 wait_id)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct sched_counts c;
	struct jb_thread *t;
	__u64 now;

	if (!eligible_wait(id, wait_id))
		return 0;
	t = thread_of_current(tid);
	now = bpf_ktime_get_ns();
	if (!t) {
		t = track_current(tid, tgid, true);
		if (!t)
			return 0;
	}
	if (t->depth)  /* a wait inside a marker's span */
		return 0;
	/* Test seam: this return would be hidden by a trampoline. */
	if (test_hide_adopted_return && t->unseen_return)
		return 0;
	current_counts(&c);
	/*
	 * Delivery: from the wakeup that ended the wait to here, where the
	 * thread is back on a CPU and returns to its loop: the time it queued
	 * for a CPU since that wakeup. 0 when the wait returned without
	 * sleeping (events were already pending).
	 */
	t->delivery_ns = t->in_wait && t->woken && c.delay_ns > t->wake_delay_ns ?
			 c.delay_ns - t->wake_delay_ns : 0;
	t->in_wait = 0;
	t->woken = 0;
	t->fresh_wait = 1;
	/* Seed rule: no checks in the first ignore_startup_ns of a process. */
	if (now - t->proc_start_ns < ignore_startup_ns)
		return 0;
	t->wait_nr = wait_id;
	begin_task(t, tid, now, JB_BOUND_SYSCALL, &c);
	return 0;
}

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
static __always_inline int on_setpgid(__s32 pid)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct jb_thread *t;

	if (!eligible_thread(id))
		return 0;
	/* Its own group (0 or its pid) is not a job. */
	if (pid <= 0 || (__u32)pid == id >> 32)
		return 0;
	t = thread_of_current((__u32)id);
	if (t && t->in_task)
		t->job_started = 1;
	return 0;
}

static __always_inline int on_child_wait_enter(__u32 wait_id __attribute__((unused)))
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_thread *t;

	if (!eligible_thread(id))
		return 0;
	t = thread_of_current(tid);
	if (!t || t->depth || !t->in_task || !t->job_started)
		return 0;
	t->job_wait = 1;
	return on_wait_enter(JB_WAIT_NR);
}

static __always_inline int on_child_wait_exit(__u32 wait_id)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);

	if (!t || !t->job_wait)
		return 0;
	t->job_wait = 0;
	return on_wait_exit(wait_id);
}

#endif /* JANKBPF_WAITS_BPF_H */
