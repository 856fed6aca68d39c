/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Causes inside the kernel: the windows a watched thread spends in direct
 * reclaim, direct compaction or waiting on a contended kernel lock (README,
 * "Why"). Each window is opened and closed by a pair of tracepoints in the
 * thread's own context:
 *
 *   reclaim      vmscan:mm_vmscan_direct_reclaim_begin/end,
 *                vmscan:mm_vmscan_memcg_reclaim_begin/end (its memcg)
 *   compaction   compaction:mm_compaction_begin/end (kcompactd is a kernel
 *                thread, never watched: only direct compaction is seen)
 *   kernel_lock  lock:contention_begin/end (5.19+): the lock, its class
 *                (the kernel's LCB_F_* flags), whether it is the thread's
 *                own mmap_lock, the owner the lock records and its stack
 *
 * An off-CPU stretch whose switch-out comes inside a window goes, whole,
 * to the window's kind (causes.bpf.h: asleep_kind, jb_cause_in), the first
 * of reclaim > compaction > kernel_lock when several are open. The wall
 * time inside windows is kept too (win_ns): what of it was not off the CPU
 * was spent running inside the window.
 *
 * Cost: lock:contention_* fire for every contended lock of the machine.
 * Each hook first turns away a thread that cannot be watched on its
 * task_struct's own fields (sched_thread_of: a few loads, no map lookup
 * for a thread without task storage), then one without per-thread cause
 * state, then (at a begin) one not inside a task. The per-thread state is
 * created at a begin (a task's first stretch may start inside a window),
 * but never inside a spinlock's slow path.
 */
#ifndef JANKBPF_CAUSES_KERNEL_BPF_H
#define JANKBPF_CAUSES_KERNEL_BPF_H

#define JB_RWSEM_OWNER_FLAGS 0x7ul  /* rwsem and mutex keep flags in the owner word's low bits */
#define JB_RWSEM_READER_OWNED 0x1ul

/* The window open first in priority order onto the stretch beginning now. */
__noinline int jb_kwin_evidence(struct jb_causes *cs, __u64 seq)
{
	struct jb_cause_open *o;
	struct jb_kwin *w;

	if (!cs)
		return 0;
	o = &cs->open;
	w = &cs->kwin;
	o->win_kind = 0;
	o->win_key = 0;
	if (w->since[JB_KW_RECLAIM]) {
		o->win_kind = JB_CAUSE_RECLAIM;
		o->win_key = w->memcg ? w->cgroup_id : 0;
		o->cgroup_id = o->win_key;
		o->hierarchy_id = w->hierarchy_id;
	} else if (w->since[JB_KW_COMPACTION]) {
		o->win_kind = JB_CAUSE_COMPACTION;
	} else if (w->since[JB_KW_LOCK]) {
		o->win_kind = JB_CAUSE_KERNEL_LOCK;
		o->win_key = w->klock.addr;
		__builtin_memcpy(&o->klock, &w->klock, sizeof(o->klock));
	}
	return 0;
}

static __always_inline __u32 kw_kind(__u32 which)
{
	return which == JB_KW_RECLAIM ? JB_CAUSE_RECLAIM
	       : which == JB_KW_COMPACTION ? JB_CAUSE_COMPACTION : JB_CAUSE_KERNEL_LOCK;
}

/* A window opens (which: JB_KW_*) in task seq of thread tid: the task's
 * record starts here if no stretch of it did yet. */
__noinline int jb_kwin_begin(struct jb_causes *cs, __u32 which, __u64 seq, __u32 tid, __u64 now)
{
	if (!cs || which >= JB_KW_NR)
		return 0;
	if (cs->ev.seq != seq)
		jb_causes_afresh(cs, seq, tid, now);
	cs->kwin.since[which] = now;
	cs->kwin.seq[which] = seq;
	return 0;
}

/* A window closes: its wall time joins the task's record (when the record
 * is this task's: it is begun afresh at the task's first switch-out). */
__noinline int jb_kwin_end(struct jb_causes *cs, __u32 which, __u64 now)
{
	struct jb_kwin *w;
	__u32 kind;

	if (!cs || which >= JB_KW_NR)
		return 0;
	w = &cs->kwin;
	if (!w->since[which])
		return 0;
	kind = kw_kind(which);
	if (cs->ev.seq == w->seq[which] && now > w->since[which] && kind < JB_CAUSE_NR) {
		cs->ev.win_ns[kind] += now - w->since[which];
		cs->ev.win_count[kind]++;
		if (which == JB_KW_RECLAIM) {
			cs->ev.reclaim_memcg = w->memcg;
			cs->ev.reclaim_cgroup_id = w->memcg ? w->cgroup_id : 0;
			cs->ev.reclaim_hierarchy_id = w->hierarchy_id;
		}
	}
	w->since[which] = 0;
	return 0;
}

/* What lock:contention_begin saw: mm_lock is the address of the thread's
 * own mmap_lock (0: none), owner_word the lock's owner field (0: none). */
struct jb_klock_seen {
	__u64 seq, addr, mm_lock, owner_word, now;
	__u32 flags, tid;
};

__noinline int jb_klock_begin(struct jb_causes *cs, struct jb_klock_seen *a)
{
	struct jb_klock_info *k;
	struct task_struct *owner;

	if (!cs || !a)
		return 0;
	__u64 addr = a->addr, owner_word = a->owner_word;
	/* A lock contended inside the wait for another (its wait_lock): the
	 * outer one is what the thread waits for. */
	if (cs->kwin.since[JB_KW_LOCK] && cs->kwin.klock.addr != addr)
		return 0;
	if (!cs->kwin.since[JB_KW_LOCK])
		jb_kwin_begin(cs, JB_KW_LOCK, a->seq, a->tid, a->now);
	k = &cs->kwin.klock;
	k->addr = addr;
	k->flags = a->flags & 0xffff;
	if (a->mm_lock && addr == a->mm_lock)
		k->flags |= JB_KLF_MMAP;
	k->owner_pid = k->owner_tid = 0;
	k->owner_comm[0] = 0;
	k->owner_frames = -95; /* EOPNOTSUPP: no owner, or no way to its stack */
	if (owner_word & JB_RWSEM_READER_OWNED)
		k->flags |= JB_KLF_READER_OWNED;
	owner = (struct task_struct *)(owner_word & ~JB_RWSEM_OWNER_FLAGS);
	if (!owner)
		return 0;
	/* Probe reads: the owner may be gone by now (the word is a hint). */
	k->owner_tid = BPF_CORE_READ(owner, pid);
	k->owner_pid = BPF_CORE_READ(owner, tgid);
	bpf_probe_read_kernel_str(k->owner_comm, sizeof(k->owner_comm), &owner->comm);
	if (k->owner_tid && k->owner_tid < JB_PID_MAX)
		k->flags |= JB_KLF_OWNER;
	else
		k->owner_tid = k->owner_pid = 0;
	return 0;
}

/* ---- the glue ------------------------------------------------------------ */

/* The cause state of current if it is a watched thread (and, with
 * in_task, inside a task); its task's number in *seq. Created (the task
 * may not have left the CPU yet) only where allocating is safe: never
 * inside a spinlock's slow path. */
static __always_inline struct jb_causes *kwin_current(bool in_task, bool create, __u64 *seq, __u32 *tidp)
{
	struct task_struct *cur;
	struct jb_thread *t;
	__u32 tid;

	if (!causes_enabled)
		return NULL;
	cur = bpf_get_current_task_btf();
	t = sched_thread_of(true, cur, &tid);
	if (!t || (in_task && !t->in_task))
		return NULL;
	*seq = t->seq;
	*tidp = tid;
	return causes_of(cur, tid, create && in_task);
}

/* The lock's owner word, for the classes that keep one (rwsem, mutex). */
static __always_inline __u64 klock_owner_word(__u64 addr, __u32 flags)
{
	if (flags & (JB_LCB_SPIN | JB_LCB_RT | JB_LCB_PERCPU))
		return 0;
	if (flags & JB_LCB_MUTEX)
		return BPF_CORE_READ((struct mutex *)addr, owner.counter);
	if (flags & (JB_LCB_READ | JB_LCB_WRITE))
		return BPF_CORE_READ((struct rw_semaphore *)addr, owner.counter);
	return 0;
}

static __always_inline void klock_begin_hook(__u64 *ctx, bool btf)
{
	struct jb_klock_seen a = {.addr = ctx[0], .flags = (__u32)ctx[1]};
	struct jb_causes *cs = kwin_current(true, !(a.flags & JB_LCB_SPIN), &a.seq, &a.tid);
	struct mm_struct *mm;
	__u64 addr = a.addr;

	if (!cs)
		return;
	mm = bpf_get_current_task_btf()->mm;
	if (mm && bpf_core_field_exists(mm->mmap_lock))
		a.mm_lock = (__u64)mm + bpf_core_field_offset(struct mm_struct, mmap_lock);
	a.owner_word = klock_owner_word(addr, a.flags);
	a.now = bpf_ktime_get_ns();
	jb_klock_begin(cs, &a);
	/* The owner's kernel stack: a trusted task only by its pid (6.2+, tp_btf). */
	if (btf && use_task_from_pid && bpf_task_from_pid && cs->kwin.klock.owner_tid &&
	    cs->kwin.klock.addr == addr) {
		struct task_struct *owner = bpf_task_from_pid(cs->kwin.klock.owner_tid);

		if (owner) {
			long n = bpf_get_task_stack(owner, cs->kwin.klock.owner_stack,
						    sizeof(cs->kwin.klock.owner_stack), 0);
			cs->kwin.klock.owner_frames = n < 0 ? (__s32)n : (__s32)((__u64)n / 8);
			bpf_task_release(owner);
		}
	}
}

static __always_inline void klock_end_hook(__u64 *ctx)
{
	__u64 seq = 0;
	__u32 tid = 0;
	struct jb_causes *cs = kwin_current(false, false, &seq, &tid);

	if (cs && cs->kwin.since[JB_KW_LOCK] && cs->kwin.klock.addr == ctx[0])
		jb_kwin_end(cs, JB_KW_LOCK, bpf_ktime_get_ns());
}

static __always_inline void reclaim_begin_hook(bool memcg)
{
	__u64 seq = 0;
	__u32 tid = 0;
	struct jb_causes *cs = kwin_current(true, true, &seq, &tid);

	if (!cs)
		return;
	cs->kwin.memcg = memcg;
	cs->kwin.cgroup_id = 0;
	cs->kwin.hierarchy_id = 0;
	if (memcg) {
		/* The thread's own memory cgroup (the one over its limit may be
		 * an ancestor). */
		struct task_struct *cur = bpf_get_current_task_btf();
		int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

		if (id >= 0 && id < 16) {
			struct cgroup_subsys_state *css = BPF_CORE_READ(cur, cgroups, subsys[id]);

			cs->kwin.cgroup_id = BPF_CORE_READ(css, cgroup, kn, id);
			cs->kwin.hierarchy_id = BPF_CORE_READ(css, cgroup, root, hierarchy_id);
		}
	}
	jb_kwin_begin(cs, JB_KW_RECLAIM, seq, tid, bpf_ktime_get_ns());
}

static __always_inline void kwin_begin_hook(__u32 which)
{
	__u64 seq = 0;
	__u32 tid = 0;
	struct jb_causes *cs = kwin_current(true, true, &seq, &tid);

	if (cs)
		jb_kwin_begin(cs, which, seq, tid, bpf_ktime_get_ns());
}

static __always_inline void kwin_end_hook(__u32 which)
{
	__u64 seq = 0;
	__u32 tid = 0;
	struct jb_causes *cs = kwin_current(false, false, &seq, &tid);

	if (cs && cs->kwin.since[which & 3])
		jb_kwin_end(cs, which, bpf_ktime_get_ns());
}

/* Each hook as tp_btf (timer watchdog plans) and raw_tp (scan plans);
 * loaded only where the tracepoint exists (src/bpf/program_select.cpp). */
#define JB_KWIN_PROG(name, tp, call_btf, call_raw)   \
	SEC("tp_btf/" tp)                            \
	int jb_kw_##name##_btf(__u64 *ctx)           \
	{                                            \
		call_btf;                            \
		return 0;                            \
	}                                            \
	SEC("raw_tp/" tp)                            \
	int jb_kw_##name##_raw(__u64 *ctx)           \
	{                                            \
		call_raw;                            \
		return 0;                            \
	}

JB_KWIN_PROG(lock_begin, "contention_begin", klock_begin_hook(ctx, true), klock_begin_hook(ctx, false))
JB_KWIN_PROG(lock_end, "contention_end", klock_end_hook(ctx), klock_end_hook(ctx))
JB_KWIN_PROG(dreclaim_begin, "mm_vmscan_direct_reclaim_begin", reclaim_begin_hook(false),
	     reclaim_begin_hook(false))
JB_KWIN_PROG(dreclaim_end, "mm_vmscan_direct_reclaim_end", kwin_end_hook(JB_KW_RECLAIM),
	     kwin_end_hook(JB_KW_RECLAIM))
JB_KWIN_PROG(mreclaim_begin, "mm_vmscan_memcg_reclaim_begin", reclaim_begin_hook(true), reclaim_begin_hook(true))
JB_KWIN_PROG(mreclaim_end, "mm_vmscan_memcg_reclaim_end", kwin_end_hook(JB_KW_RECLAIM),
	     kwin_end_hook(JB_KW_RECLAIM))
JB_KWIN_PROG(compact_begin, "mm_compaction_begin", kwin_begin_hook(JB_KW_COMPACTION),
	     kwin_begin_hook(JB_KW_COMPACTION))
JB_KWIN_PROG(compact_end, "mm_compaction_end", kwin_end_hook(JB_KW_COMPACTION),
	     kwin_end_hook(JB_KW_COMPACTION))

#endif /* JANKBPF_CAUSES_KERNEL_BPF_H */
