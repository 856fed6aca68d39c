/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Stacks: the on-CPU sample filter slot, off-CPU captures stashed at
 * switch-out and sent when the task is long (within --offcpu-rate), the
 * waker; captures and wakers go on the `captures` ring.
 */
#ifndef JANKBPF_STACKS_BPF_H
#define JANKBPF_STACKS_BPF_H

/*
 * The off-CPU stash of a watched thread; `task` is used (and must be
 * trusted) only when state_in_task. With `create`, one is made if missing.
 */
static __always_inline struct jb_offcpu_event *stash_of(struct task_struct *task, __u32 tid,
							bool create)
{
	struct jb_offcpu_event *e;
	__u32 zero = 0;

	if (state_in_task)
		return bpf_task_storage_get(&offcpu_stash, task, 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	e = bpf_map_lookup_elem(&offcpu_stash_tid, &tid);
	if (e || !create)
		return e;
	e = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!e)
		return NULL;
	if (bpf_map_update_elem(&offcpu_stash_tid, &tid, e, BPF_NOEXIST) == -E2BIG)
		stat_inc(JB_STAT_STASH_FULL);
	return bpf_map_lookup_elem(&offcpu_stash_tid, &tid);
}

/*
 * --offcpu-rate: whether the process, then its uid, may send one more
 * capture now (takes the tokens). The uid's bucket holds a quarter of the
 * captures ring (offcpu_burst_uid): 400 processes of one uid sleeping at
 * once would otherwise fill the ring every uid shares (CI on 6f54552: 118
 * lost). A refusal is counted; a race for a bucket with another CPU is
 * tried again (full_at_take).
 */
static __noinline bool offcpu_token(__u32 tgid, __u32 uid, __u64 now)
{
	__u64 *full_at, zero = 0;

	if (!offcpu_rate)
		return true;
	full_at = bpf_map_lookup_elem(&offcpu_bucket, &tgid);
	if (!full_at) {
		bpf_map_update_elem(&offcpu_bucket, &tgid, &zero, BPF_NOEXIST);
		full_at = bpf_map_lookup_elem(&offcpu_bucket, &tgid);
	}
	/* The uid's bucket looked at first: a process's token is not spent on
	 * a capture its uid refuses. */
	if (full_at && bucket_take(&offcpu_uid_bucket, uid, offcpu_rate, offcpu_burst_uid, now, true) &&
	    full_at_take(full_at, now, offcpu_rate, offcpu_rate, false) &&
	    bucket_take(&offcpu_uid_bucket, uid, offcpu_rate, offcpu_burst_uid, now, false))
		return true;
	stat_inc(JB_STAT_OFFCPU_RATE);
	return false;
}

/* An off-CPU capture to userspace (its token taken); its waker is wanted next. */
static __always_inline void send_offcpu(struct jb_thread *t, struct jb_offcpu_event *e)
{
	t->stash_seq = 0;  /* sent, or lost: either way not to be sent again */
	if (bpf_ringbuf_output(&captures, e, sizeof(*e), 0)) {
		stat_inc(JB_STAT_OFFCPU_RING_FULL);
		return;
	}
	t->offcpu_pending = 1;
	stat_inc(JB_STAT_OFFCPU);
}

/*
 * The task became long while its thread sleeps: send the capture stashed
 * when it went to sleep (its own context is the only one that could read
 * its user stack).
 */
static __noinline void flush_stash(struct task_struct *task, __u32 tid, struct jb_thread *t)
{
	struct jb_offcpu_event *e;

	if (!t->early || !t->in_task || t->stash_seq != t->seq || t->state == JB_ST_RUNNING)
		return;
	e = stash_of(task, tid, false);
	if (!e || e->seq != t->seq)
		return;
	if (offcpu_token(t->pid, t->uid, bpf_ktime_get_ns()))
		send_offcpu(t, e);
	else
		t->stash_seq = 0;  /* refused once: the next tick must not retry */
}

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
 * Whether the thread, going to sleep inside this long task, is captured
 * now: at most one such capture per sample period, a slot of its own
 * beside the samples'. On the samples' slot a sleep that began within a
 * period of the last sample had no stack at all (a task that spun, then
 * slept 400 ms, named only the spin). A preemption stays on the samples'
 * slot: the clock samples the thread when it runs again.
 */
static __always_inline bool take_sleep_slot(struct jb_thread *t, __u64 now)
{
	if (!t->in_task || !t->early)
		return false;
	if (now - t->begin_ns > sample_window_ns)
		return false;
	if (t->last_capture_ns && now - t->last_capture_ns < sample_period_ns - sample_period_ns / 10)
		return false;
	t->last_capture_ns = now;
	t->last_sample_ns = now;
	return true;
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

	/* A task over --record-rate(-uid) is not reported: nothing to capture. */
	if (t->rate == JB_RATE_REFUSED)
		return;
	/* Over its rate, a long task's capture would go nowhere: skip the copy
	 * (and forget an older one stashed for this task: it is stale now). */
	if (t->early && !offcpu_token(t->pid, t->uid, now)) {
		t->stash_seq = 0;
		return;
	}
	e = stash_of(prev, tid, true);
	if (!e)
		return;
	fill_header(&e->hdr, JB_EV_OFFCPU, t->pid, tid, now);
	e->seq = t->seq;
	e->state = t->state;
	long n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_bytes = n > 0 ? n : 0;
	e->nr_regs = 0;
	e->ustack_bytes = 0;
	/* prev is current here; raw_tp arguments are not trusted, this is. */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
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
	/* On the captures ring, behind its capture: userspace pairs them. */
	e = bpf_ringbuf_reserve(&captures, sizeof(*e), 0);
	if (!e) {
		stat_inc(JB_STAT_OFFCPU_RING_FULL);
		return;
	}
	fill_header(&e->hdr, JB_EV_WAKER, t->pid, tid, bpf_ktime_get_ns());
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

#endif /* JANKBPF_STACKS_BPF_H */
