/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Markers: a runtime's own dispatch marks (uprobes, USDT) bound tasks.
 */
#ifndef JANKBPF_MARKERS_BPF_H
#define JANKBPF_MARKERS_BPF_H

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
	struct sched_counts c;
	__u64 now, delivery;

	if (!t) {
		t = track_current(tid, id >> 32, false);
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
	current_counts(&c);
	begin_task(t, tid, now, JB_BOUND_MARKER, &c);
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
	struct sched_counts c;
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
	current_counts(&c);
	begin_task(t, tid, now, JB_BOUND_AFTER_MARKER, &c);
	t->delivery_ns = 0;
	return 0;
}

#endif /* JANKBPF_MARKERS_BPF_H */
