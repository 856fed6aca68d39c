/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Causes: why a watched thread was not running inside a task (README, "Why").
 *
 * The state split (accounting.bpf.h) says how long a task ran, queued,
 * slept and blocked; it stays the source of the totals. This header splits
 * the non-running part again, exclusively, into slices that say why:
 *
 *  - An off-CPU stretch runs from a switch-out to the next switch-in. Its
 *    asleep piece (switch-out in S or D -> sched_wakeup) and its queued
 *    piece (a preemption, or the wakeup -> switch-in) are charged apart, at
 *    the moments and with the clock reads of the state split, so the
 *    slices sum to runnable + sleeping + blocked_io.
 *  - Evidence comes from moments the kernel already gives us: at the
 *    switch-out, in the thread's own context, the syscall it sleeps in and
 *    its arguments (its pt_regs), its state, whether it was preempted and
 *    whether its cfs_rq is throttled; at sched_waking, in the waker's
 *    context, who woke it and whether from an interrupt (never blamed); at
 *    the switch-in, the stretch's length.
 *  - Each piece of time goes to one kind: the first, in enum
 *    jb_cause_kind's order, that its evidence supports: throttled >
 *    reclaim > compaction > fault > io > kernel_lock > lock > peer >
 *    runnable > sleep > other.
 *  - Per kind an exact total (kind_ns), and up to JB_CAUSE_SLOTS slices by
 *    identity (kind + key: the futex address, the waker, the cgroup, ...);
 *    time past the slots stays in its kind's total.
 *  - Queued time also notes who ran on that CPU meanwhile (cpu_watch).
 *  - While a thread of a long task sleeps, the threads it may wait for (the
 *    owner glibc's mutex names, the peers that woke it before, and the
 *    owner of a lock such a peer waits on) are "subjects": jb_sample takes
 *    their stacks and the scheduler hooks follow their state, so what they
 *    did meanwhile is evidence. A subject found by a claim is followed only
 *    inside the process whose memory made the claim.
 *
 * Cost: a thread not watched, or not inside a task, never reaches this; the
 * machine-wide parts (sched_waking, every switch for the CPU and subject
 * accounting) stop at one global load while no watched thread sleeps or
 * queues inside a task and no subject is followed.
 *
 * Records: JB_EV_SUBJECT when a subject stops being followed, JB_EV_CAUSE
 * just before the task's JB_EV_TASK_END or JB_EV_HANG, on the same ring;
 * userspace (src/cause/) resolves identities and writes `cause` and `why`.
 */
#ifndef JANKBPF_CAUSES_BPF_H
#define JANKBPF_CAUSES_BPF_H

/* Set by userspace before load: causes on, and which syscalls are which
 * (syscall number -> enum jb_syscall_class). */
const volatile bool causes_enabled = false;
const volatile __u8 cause_class_of_nr[JB_MAX_SYSCALL_NR] = {};

/* Watched threads asleep, and queued, inside a task now; subjects followed
 * now. The machine-wide hooks stop at these while they are 0. */
__s64 cause_asleep_nr = 0;
__s64 cause_queued_nr = 0;
__s64 subjects_nr = 0;

/* The stretch in progress. */
enum { JB_CPH_NONE = 0, JB_CPH_ASLEEP = 1, JB_CPH_QUEUED = 2 };

struct jb_cause_open {
	__u64 off_ns;     /* its switch-out */
	__u64 q_ns;       /* queued since (its wakeup, or off_ns when preempted) */
	__u64 arg0, arg1; /* the syscall's first arguments */
	__u64 cgroup_id;  /* throttled: the task group's cgroup */
	__u64 thr_base;   /* throttled: its cfs_rq's (else group's) throttled time then */
	__u64 thr_cfs;    /* throttled: its cfs_rq then (read again at the switch-in) */
	__s32 nr;         /* the syscall it sleeps in (-1: none) */
	__u32 claim;      /* futex wait: the owner the lock word's mutex names */
	__u32 waker_pid, waker_tid;
	__u32 q_cpu;
	__u32 hierarchy_id;
	__u32 flags;      /* JB_CSF_* */
	__u8 phase;       /* JB_CPH_* */
	__u8 throttled;
	__u8 watched;     /* its subjects were registered */
	__u8 early;       /* a waking came before its switch-out: in early_* */
	char waker_comm[JB_COMM_LEN];
	/* A wakeup can be traced after the thread set its sleeping state and
	 * before its switch-out is (it is still in schedule()): kept here for
	 * the switch-out to adopt. */
	__u32 early_flags, early_pid, early_tid;
	char early_comm[JB_COMM_LEN];
	/* The kernel window it left the CPU in (causes_kernel.bpf.h): the
	 * whole stretch goes to that kind. */
	__u32 win_kind;
	__u64 win_key;
	struct jb_klock_info klock;
};

/* The kernel windows a watched thread is inside now (causes_kernel.bpf.h),
 * by JB_KW_*: since when (0: not inside). */
enum { JB_KW_RECLAIM = 0, JB_KW_COMPACTION = 1, JB_KW_LOCK = 2, JB_KW_NR = 3 };

struct jb_kwin {
	__u64 since[JB_KW_NR];
	__u64 seq[JB_KW_NR];     /* the task each was entered in */
	__u64 cgroup_id;         /* reclaim: the thread's memory cgroup (memcg reclaim) */
	__u32 hierarchy_id;
	__u32 memcg;
	struct jb_klock_info klock;
};

#define JB_PEERS 4     /* threads that woke it before: likely peers */
#define JB_SUBJECTS 6  /* followed at once per thread */
#define JB_SUBJECT_SAMPLES 256
#define JB_PID_MAX 4194304  /* the kernel's PID_MAX_LIMIT: a tid above is junk */

struct jb_causes {
	struct jb_cause_event ev;  /* what is sent: totals, slices, CPU tasks */
	struct jb_cause_open open;
	__u32 peers[JB_PEERS];     /* tids */
	__u32 peer_pids[JB_PEERS]; /* their processes */
	__u32 peer_next;
	__u32 nsubjects;
	__u32 subjects[JB_SUBJECTS];
	__u32 nprocs;
	__u32 procs[JB_PEERS];     /* peer processes sampled for it now */
	struct jb_kwin kwin;
};

/* Per watched thread, on its task_struct (timer watchdog, state in task storage). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct jb_causes);
} cause_state SEC(".maps");

/* The same by tid where per-thread state is in the `threads` hash;
 * preallocated (made in sched_switch), sized by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct jb_causes);
} cause_tid SEC(".maps");

/* A zeroed value to insert into cause_tid from (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jb_causes);
} cause_zero SEC(".maps");

/* Per CPU (by index: other CPUs write it at a wakeup): the watched thread
 * queued here and who ran since. Userspace sizes it to the possible CPUs. */
struct jb_cpu_watch {
	__u64 last_ns;
	__u32 waiter;
	__u32 pad;
	struct jb_cpu_tasks ran;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jb_cpu_watch);
} cpu_watch SEC(".maps");

/* A thread followed for a watched one (see the top of this file). */
struct jb_subject {
	__u64 since_ns, last_ns;
	__u64 state_ns[JB_ST_NR];
	__u64 last_sample_ns;
	__u64 watcher_seq;
	__u64 wait_addr;
	__u32 watcher_tid, watcher_pid;
	__u32 want_tgid;  /* a claim's subject: only this process (0: any) */
	__u32 tgid;       /* once seen (0: not yet) */
	__u32 role, via;
	__u32 state;      /* JB_ST_*, JB_ST_NR before its first switch seen */
	__u32 samples, capped;
	__s32 wait_nr;
	__u32 wait_claim;
	__u32 waker_pid, waker_tid;
	__u32 chain;      /* the subject its own wait named */
	__u32 flags;
	__u32 foreign;    /* a claim naming another process's thread: ignored */
	char comm[JB_COMM_LEN];
	char waker_comm[JB_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct jb_subject);
} subjects SEC(".maps");

/*
 * Peer processes, by tgid, while a watched thread waits for one of their
 * threads: every thread of theirs is sampled (up to a cap), since the
 * thread that does the work may be another than the one that answers (a
 * worker holding the lock the peer waits on: its tid is known only from
 * the wakeup, after the fact).
 */
struct jb_subject_proc {
	__u32 watcher_tid;
	__u32 samples;
	__u32 capped;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct jb_subject_proc);
} subject_procs SEC(".maps");

/* ---- small readers ------------------------------------------------------ */

/*
 * Whether a wakeup came from an interrupt, whose "current" task did not
 * cause it. The kernel's preempt count would say, but on x86 it is a
 * per-CPU variable, which a BPF program can read only where kallsyms lists
 * data symbols (CONFIG_KALLSYMS_ALL; the test VM's kernel has not). So: the
 * idle task wakes nobody of its own; else the waker's kernel stack passes
 * through hardirq or timer code, whose text userspace finds in kallsyms
 * after the start and writes here (irq_text_nr stays 0 until then: no
 * stack is looked at). A softirq run by a task's own local_bh_enable (a
 * loopback packet sent by the peer) is the task's doing, not an interrupt.
 *
 * irq_text: by 256-byte chunk of kernel text (pc >> 8), a mask of its
 * 16-byte granules that belong to such code: one lookup per frame.
 */
#define JB_IRQ_CHUNKS 4096
#define JB_WAKER_FRAMES 32

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, JB_IRQ_CHUNKS);
	__type(key, __u64);
	__type(value, __u32);
} irq_text SEC(".maps");

__u32 irq_text_nr = 0; /* chunks in irq_text, set last by userspace */

struct jb_frames {
	__u64 pc[JB_WAKER_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jb_frames);
} waker_frames SEC(".maps");

#define JB_PF_KTHREAD 0x00200000

/* Whether any of the first `frames` of this CPU's waker_frames is irq text. */
__noinline int jb_frames_in_irq_text(__u32 frames)
{
	__u32 zero = 0;
	struct jb_frames *f = bpf_map_lookup_elem(&waker_frames, &zero);

	if (!f)
		return 0;
	for (int i = 0; i < JB_WAKER_FRAMES; i++) {
		if (i >= frames)
			break;
		__u64 pc = f->pc[i], chunk = pc >> 8;
		__u32 *mask = bpf_map_lookup_elem(&irq_text, &chunk);

		if (mask && (*mask >> ((pc >> 4) & 15)) & 1)
			return 1;
	}
	return 0;
}

static __noinline bool waker_in_interrupt(void *ctx)
{
	struct jb_frames *f;
	__u32 zero = 0;
	long n;

	f = bpf_map_lookup_elem(&waker_frames, &zero);
	if (!f)
		return false;
	n = bpf_get_stack(ctx, f->pc, sizeof(f->pc), 0);
	return n > 0 && jb_frames_in_irq_text((__u32)n / 8);
}

/* A kernel thread (a kworker, ksoftirqd, jbd2) woke it: the kernel's
 * doing, not a peer's. */
static __always_inline bool waker_is_kthread(void)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(cur, flags) & JB_PF_KTHREAD;
}

/*
 * Who may be blamed for a wakeup, in the waker's context: 0 (the current
 * thread), JB_CSF_IRQ (the idle task, or interrupt text on its stack),
 * JB_CSF_KTHREAD, or JB_CSF_CTX_UNKNOWN: the interrupt text is not read
 * yet (beside the load; on a busy machine it can take a second), and an
 * interrupt runs in the context of whatever it interrupted. CI on eb1e653,
 * before this: futex timeouts named `sh` and `jankbpf` peers.
 */
static __noinline __u32 waker_flags(void *ctx)
{
	if (!(__u32)bpf_get_current_pid_tgid())
		return JB_CSF_IRQ;
	if (irq_text_nr && waker_in_interrupt(ctx))
		return JB_CSF_IRQ;
	if (waker_is_kthread())
		return JB_CSF_KTHREAD;
	if (!irq_text_nr) {
		stat_inc(JB_STAT_WAKERS_UNKNOWN);
		return JB_CSF_CTX_UNKNOWN;
	}
	return 0;
}

struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

/* The CPU a task is on or queued on (task_cpu()). */
static __always_inline __u32 task_cpu_of(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return BPF_CORE_READ(p, thread_info.cpu);
	return BPF_CORE_READ((struct task_struct___cpu *)p, cpu);
}

/* The time the kernel counts p's task group as throttled (cpu.stat's
 * throttled_time), grown at each unthrottle; 0 without CFS bandwidth. It
 * sums every CPU's cfs_rq of the group, so it can grow by more than one
 * thread waited: the cfs_rq's own count below is preferred. */
static __always_inline __u64 group_throttled_ns(struct task_struct *p)
{
	if (!bpf_core_field_exists(p->sched_task_group->cfs_bandwidth.throttled_time))
		return 0;
	return BPF_CORE_READ(p, sched_task_group, cfs_bandwidth.throttled_time);
}

/* 6.6+ (absent from the arm64 6.1 vmlinux.h this builds against). */
struct cfs_rq___self {
	__u64 throttled_clock_self_time;
} __attribute__((preserve_access_index));

/* The throttled time of one cfs_rq, grown at its unthrottle: 6.6+ count it
 * (throttled_clock_self_time); 5.19+ count it on the PELT clock
 * (throttled_clock_pelt_time: the task clock, slower only where the CPU's
 * capacity or frequency is scaled down), which is still the cfs_rq's own;
 * else the group's count. `cfs` is the cfs_rq the thread left from, kept as
 * a number: read again at its switch-in. */
static __always_inline __u64 cfs_throttled_ns(__u64 cfs, struct task_struct *p)
{
	struct cfs_rq___self *rq = (struct cfs_rq___self *)cfs;
	struct cfs_rq *pelt = (struct cfs_rq *)cfs;

	if (bpf_core_field_exists(rq->throttled_clock_self_time))
		return cfs ? BPF_CORE_READ(rq, throttled_clock_self_time) : 0;
	if (bpf_core_field_exists(pelt->throttled_clock_pelt_time))
		return cfs ? BPF_CORE_READ(pelt, throttled_clock_pelt_time) : 0;
	return group_throttled_ns(p);
}

/* Whether p's cfs_rq (or an ancestor's) is throttled now; its task group's
 * cgroup then. Needs CONFIG_FAIR_GROUP_SCHED (se.cfs_rq). */
static __always_inline bool task_throttled(struct task_struct *p, struct jb_cause_open *o)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(p->se.cfs_rq))
		return false;
	cfs = BPF_CORE_READ(p, se.cfs_rq);
	if (!cfs || BPF_CORE_READ(cfs, throttle_count) <= 0)
		return false;
	o->cgroup_id = BPF_CORE_READ(p, sched_task_group, css.cgroup, kn, id);
	o->hierarchy_id = BPF_CORE_READ(p, sched_task_group, css.cgroup, root, hierarchy_id);
	o->thr_cfs = (__u64)cfs;
	o->thr_base = cfs_throttled_ns(o->thr_cfs, p);
	return true;
}

/* The syscall a thread sleeps in, from its saved user registers (it is
 * current: this is its switch-out). */
static __always_inline void syscall_evidence(struct jb_cause_open *o, __u32 tid)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	__u32 cls = JB_SC_NONE;

	if (!regs)
		return;
#if defined(__TARGET_ARCH_x86)
	o->nr = (__s32)BPF_CORE_READ(regs, orig_ax);
	o->arg0 = BPF_CORE_READ(regs, di);
	o->arg1 = BPF_CORE_READ(regs, si);
	/* TS_COMPAT: a 32-bit syscall, numbered and passed the i386 way. */
	if (BPF_CORE_READ(cur, thread_info.status) & 0x0002) {
		o->flags |= JB_CSF_COMPAT;
		return;
	}
#elif defined(__TARGET_ARCH_arm64)
	o->nr = BPF_CORE_READ(regs, syscallno);
	o->arg0 = BPF_CORE_READ(regs, orig_x0);
	o->arg1 = BPF_CORE_READ(regs, regs[1]);
#endif
	if (o->nr >= 0 && o->nr < JB_MAX_SYSCALL_NR)
		cls = cause_class_of_nr[o->nr];
	if (cls != JB_SC_FUTEX)
		return;
	/* glibc's pthread_mutex_t: the lock word, __count, then __owner. */
	struct {
		__s32 word;
		__u32 count;
		__s32 owner;
	} m = {};
	__u32 cmd = o->arg1 & 0x7f; /* FUTEX_CMD_MASK */

	if (cmd == 0 || cmd == 9 || cmd == 11 || cmd == 6 || cmd == 13)
		o->flags |= JB_CSF_FUTEX_WAIT;
	else
		return;
	if (cmd == 11 || bpf_probe_read_user(&m, sizeof(m), (void *)o->arg0))
		return;
	o->flags |= JB_CSF_CLAIM_READ;
	if (cmd == 6 || cmd == 13) { /* LOCK_PI: the word holds the owner's tid */
		o->flags |= JB_CSF_PI;
		o->claim = m.word & 0x3fffffff;
	} else {
		o->claim = m.owner > 0 && m.owner < JB_PID_MAX ? m.owner : 0;
	}
	if (o->claim == tid)
		o->claim = 0;
}

/* ---- the work, in global functions ------------------------------------- */

/*
 * Everything below that does real work is a global function: the verifier
 * checks each once, on its own, instead of once per path of every hook that
 * calls it (as static functions, jb_switch_btf's check grew from 5,600 to
 * 189,000 instructions). Their arguments are scalars and sized memory (map
 * values, a stack struct); whatever needs a task_struct (task storage, a
 * task's fields) stays in the small static glue at the end.
 */

/* What the glue knows about the watched thread at a hook. */
struct jb_cctx {
	__u64 now;
	__u64 seq;     /* its task */
	__u32 tid, pid;
	__u32 state;   /* its jb_thread state */
	__u32 preempt;
	__u32 early;   /* its task is long */
	__u32 cpu;     /* wakeup: the CPU it is queued on */
	__u32 throttled;
	__u32 pad;
	__u64 thr_now; /* switch-in: its group's throttled_time now */
	__u64 unseen_queued; /* its switch-in went unseen: the run_delay gained since */
};

#include "causes_io.bpf.h"

/* One stretch into its slice: time, count, and the evidence of the longest. */
__noinline int jb_slice_add(struct jb_cause_slice *s, struct jb_cause_open *o, __u32 kind, __u64 key, __u64 ns)
{
	if (!s || !o)
		return 0;
	if (s->kind != kind) { /* a new slice */
		s->kind = kind;
		s->key = key;
		s->ns = 0;
		s->count = 0;
		s->max_ns = 0;
	}
	s->ns += ns;
	s->count++;
	if (ns <= s->max_ns)
		return 0;
	s->max_ns = ns;
	s->max_off_ns = o->off_ns;
	s->arg0 = o->arg0;
	s->arg1 = o->arg1;
	s->nr = o->nr;
	s->claim = o->claim;
	s->flags = o->flags;
	s->waker_pid = o->waker_pid;
	s->waker_tid = o->waker_tid;
	__builtin_memcpy(s->waker_comm, o->waker_comm, sizeof(s->waker_comm));
	s->cgroup_id = o->cgroup_id;
	s->hierarchy_id = o->hierarchy_id;
	if (kind == JB_CAUSE_KERNEL_LOCK)
		__builtin_memcpy(&s->klock, &o->klock, sizeof(s->klock));
	return 0;
}

/* Charges ns of one kind to a record (the thread's, or a hang's copy). */
__noinline int jb_cause_charge(struct jb_cause_event *ev, struct jb_cause_open *o, __u32 kind, __u64 key,
			       __u64 ns)
{
	__u32 slot;

	if (!ev || !o || !ns || kind >= JB_CAUSE_NR)
		return 0;
	ev->kind_ns[kind] += ns;
	/* Slots fill in order and are not freed within a task: the first
	 * empty one ends the search. */
	for (slot = 0; slot < JB_CAUSE_SLOTS; slot++)
		if (!ev->slices[slot].kind || (ev->slices[slot].kind == kind && ev->slices[slot].key == key))
			break;
	if (slot >= JB_CAUSE_SLOTS)
		return 0; /* past the slots: in kind_ns only */
	if (!ev->slices[slot].kind)
		ev->nslices++;
	return jb_slice_add(&ev->slices[slot], o, kind, key, ns);
}

/* The kind of an asleep piece, from what was seen at its switch-out and wakeup. */
static __always_inline __u32 asleep_kind(struct jb_cause_open *o, __u64 *key)
{
	__u32 cls = JB_SC_NONE;
	bool woken = o->flags & JB_CSF_WOKEN, irq = o->flags & (JB_CSF_NO_WAKER | JB_CSF_KTHREAD);

	if (o->nr >= 0 && o->nr < JB_MAX_SYSCALL_NR && !(o->flags & JB_CSF_COMPAT))
		cls = cause_class_of_nr[o->nr];
	*key = (__u32)o->nr;
	/* Begun inside a kernel window: reclaim and compaction come before any
	 * wait's kind; kernel_lock after fault and io (the enum's order). */
	if (o->win_kind && o->win_kind < JB_CAUSE_FAULT) {
		*key = o->win_key;
		return o->win_kind;
	}
	if (o->flags & JB_CSF_FAULT) { /* one slice: the file is the longest's address */
		*key = 0;
		return JB_CAUSE_FAULT;
	}
	if (o->flags & JB_CSF_IO) { /* by syscall and fd */
		*key = (__u64)(__u32)o->nr << 32 | (__u32)o->arg0;
		return JB_CAUSE_IO;
	}
	if (o->win_kind) {
		*key = o->win_key;
		return o->win_kind;
	}
	if (cls == JB_SC_SLEEP)
		return JB_CAUSE_SLEEP;
	if (woken && !irq && o->nr >= 0) {
		if (o->flags & JB_CSF_FUTEX_WAIT) {
			*key = o->arg0;
			return JB_CAUSE_LOCK;
		}
		*key = (__u64)o->waker_pid << 32 | o->waker_tid;
		return JB_CAUSE_PEER;
	}
	/* A timer ended a wait that can time out: its timeout. */
	if ((o->flags & JB_CSF_IRQ) && !(o->flags & JB_CSF_BLOCKED) &&
	    (cls == JB_SC_TIMED || cls == JB_SC_FUTEX || cls == JB_SC_FUTEX_WAITV))
		return JB_CAUSE_SLEEP;
	*key = (__u64)(o->flags & JB_CSF_BLOCKED ? 1 : 0) << 32 | (__u32)o->nr;
	return JB_CAUSE_OTHER;
}

/* ---- who ran on the CPU a watched thread queued on ---------------------- */

/* ns of a task that ran on the CPU (pid its tgid) into a set; `from`: an
 * entry of another set, else the task is current (comm read here). */
__noinline int jb_cpu_tasks_add(struct jb_cpu_tasks *set, __u32 pid, __u32 tid, __u64 ns,
				struct jb_cpu_task *from)
{
	__u32 i;

	if (!set || !ns)
		return 0;
	/* Entries fill in order and are not freed within a watch. */
	for (i = 0; i < JB_CAUSE_TASKS; i++)
		if (!set->task[i].ns || set->task[i].pid == pid)
			break;
	if (i >= JB_CAUSE_TASKS) {
		set->other_ns += ns;
		return 0;
	}
	struct jb_cpu_task *c = &set->task[i];

	if (c->ns) {
		c->ns += ns;
		return 0;
	}
	c->pid = pid;
	c->tid = tid;
	c->ns = ns;
	if (from)
		__builtin_memcpy(c->comm, from->comm, sizeof(c->comm));
	else /* at a switch, current is still the task switched out */
		bpf_get_current_comm(c->comm, sizeof(c->comm));
	return 0;
}

/* A watched thread starts queuing on cpu. */
__noinline int jb_cpu_watch_begin(__u32 cpu, __u32 tid, __u64 now, struct jb_cause_open *o)
{
	struct jb_cpu_watch *w = bpf_map_lookup_elem(&cpu_watch, &cpu);

	if (o)
		o->q_cpu = cpu;
	if (!w)
		return 0;
	if (__sync_val_compare_and_swap(&w->waiter, 0, tid) == 0)
		__sync_fetch_and_add(&cause_queued_nr, 1);
	else
		w->waiter = tid; /* another's watch is taken over: it finds it gone */
	w->last_ns = now;
	w->ran.other_ns = 0;
	for (int i = 0; i < JB_CAUSE_TASKS; i++)
		w->ran.task[i].ns = 0;
	return 0;
}

/* It ran again: what ran on that CPU meanwhile joins its record. */
__noinline int jb_cpu_watch_end(struct jb_causes *cs, __u32 tid)
{
	struct jb_cpu_watch *w;
	__u32 cpu;

	if (!cs)
		return 0;
	cpu = cs->open.q_cpu;
	w = bpf_map_lookup_elem(&cpu_watch, &cpu);
	if (!w || w->waiter != tid)
		return 0;
	for (int i = 0; i < JB_CAUSE_TASKS; i++)
		jb_cpu_tasks_add(&cs->ev.cpu, w->ran.task[i].pid, w->ran.task[i].tid, w->ran.task[i].ns,
				 &w->ran.task[i]);
	cs->ev.cpu.other_ns += w->ran.other_ns;
	if (__sync_val_compare_and_swap(&w->waiter, tid, 0) == tid)
		__sync_fetch_and_add(&cause_queued_nr, -1);
	return 0;
}

/* Any switch while some watched thread queues: charge what ran here. */
__noinline int jb_cpu_watch_switch(__u32 prev_tid, __u32 prev_pid, __u64 now)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct jb_cpu_watch *w = bpf_map_lookup_elem(&cpu_watch, &cpu);

	if (!w || !w->waiter)
		return 0;
	/* The idle task is no thief: the CPU was free. */
	if (prev_tid && prev_tid != w->waiter && now > w->last_ns)
		jb_cpu_tasks_add(&w->ran, prev_pid, prev_tid, now - w->last_ns, NULL);
	w->last_ns = now;
	return 0;
}

/* ---- subjects ----------------------------------------------------------- */

static __always_inline void subject_account(struct jb_subject *s, __u64 now, __u32 unseen_state)
{
	__u32 st = s->state < JB_ST_NR ? s->state : unseen_state;

	if (now > s->last_ns)
		s->state_ns[st & (JB_ST_NR - 1)] += now - s->last_ns;
	s->last_ns = now;
}

/* Who a subject is followed for. */
struct jb_watcher {
	__u64 seq;
	__u32 tid, pid;
};

/* role_via: role << 32 | the subject it was found through. */
__noinline int jb_subject_add(__u32 stid, __u64 role_via, __u32 want_tgid, struct jb_watcher *w, __u64 now)
{
	struct jb_subject fresh = {};
	long err;

	if (!w || !stid || stid >= JB_PID_MAX)
		return 0;
	fresh.since_ns = now;
	fresh.last_ns = now;
	fresh.watcher_tid = w->tid;
	fresh.watcher_pid = w->pid;
	fresh.watcher_seq = w->seq;
	fresh.want_tgid = want_tgid;
	fresh.role = role_via >> 32;
	fresh.via = (__u32)role_via;
	fresh.state = JB_ST_NR;
	fresh.wait_nr = -1;
	err = bpf_map_update_elem(&subjects, &stid, &fresh, BPF_NOEXIST);
	if (err) {
		if (err == -E2BIG)
			stat_inc(JB_STAT_SUBJECTS_FULL);
		return 0; /* or another watched thread follows it already */
	}
	__sync_fetch_and_add(&subjects_nr, 1);
	return 1;
}

/* A subject is no longer followed: its record, then gone. */
__noinline int jb_subject_release(__u32 stid, __u32 wtid, __u64 now)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &stid);
	struct jb_subject_event *e;

	if (!s || s->watcher_tid != wtid)
		return 0;
	subject_account(s, now, JB_ST_RUNNING);
	e = reserve_event(sizeof(*e));
	if (e) {
		fill_header(&e->hdr, JB_EV_SUBJECT, s->watcher_pid, wtid, now);
		e->seq = s->watcher_seq;
		e->since_ns = s->since_ns;
		e->until_ns = now;
		for (int i = 0; i < JB_ST_NR; i++)
			e->state_ns[i] = s->state_ns[i];
		e->wait_addr = s->wait_addr;
		e->tid = stid;
		e->pid = s->foreign ? 0 : s->tgid;
		e->role = s->role;
		e->samples = s->samples;
		e->samples_capped = s->capped;
		e->wait_nr = s->wait_nr;
		e->wait_claim = s->wait_claim;
		e->waker_pid = s->waker_pid;
		e->waker_tid = s->waker_tid;
		e->via = s->via;
		e->flags = s->flags | (s->foreign ? JB_CSF_FOREIGN : 0);
		e->pad = 0;
		__builtin_memcpy(e->comm, s->comm, sizeof(e->comm));
		__builtin_memcpy(e->waker_comm, s->waker_comm, sizeof(e->waker_comm));
		bpf_ringbuf_submit(e, 0);
	}
	if (bpf_map_delete_elem(&subjects, &stid) == 0)
		__sync_fetch_and_add(&subjects_nr, -1);
	return 0;
}

/* The watched thread woke (or its task ended): stop following its subjects. */
__noinline int jb_subjects_release(struct jb_causes *cs, __u32 wtid, __u64 now)
{
	if (!cs)
		return 0;
	for (int i = 0; i < JB_SUBJECTS; i++) {
		if (i >= cs->nsubjects)
			break;
		__u32 stid = cs->subjects[i];
		struct jb_subject *s = bpf_map_lookup_elem(&subjects, &stid);

		if (s && s->chain && s->watcher_tid == wtid)
			jb_subject_release(s->chain, wtid, now);
		jb_subject_release(stid, wtid, now);
	}
	cs->nsubjects = 0;
	for (int i = 0; i < JB_PEERS; i++) {
		if (i >= cs->nprocs)
			break;
		__u32 tgid = cs->procs[i];
		struct jb_subject_proc *p = bpf_map_lookup_elem(&subject_procs, &tgid);

		if (p && p->watcher_tid == wtid && bpf_map_delete_elem(&subject_procs, &tgid) == 0)
			__sync_fetch_and_add(&subjects_nr, -1);
	}
	cs->nprocs = 0;
	return 0;
}

__noinline int jb_subject_proc_add(struct jb_causes *cs, __u32 tgid, __u32 wtid)
{
	struct jb_subject_proc fresh = {.watcher_tid = wtid};
	__u32 n;
	long err;

	if (!cs)
		return 0;
	n = cs->nprocs;
	if (n >= JB_PEERS)
		return 0;
	err = bpf_map_update_elem(&subject_procs, &tgid, &fresh, BPF_NOEXIST);
	if (err) {
		if (err == -E2BIG)
			stat_inc(JB_STAT_SUBJECTS_FULL);
		return 0;
	}
	__sync_fetch_and_add(&subjects_nr, 1);
	cs->procs[n] = tgid;
	cs->nprocs = n + 1;
	return 1;
}

static __always_inline void subjects_keep(struct jb_causes *cs, __u32 stid)
{
	__u32 n = cs->nsubjects;

	if (n < JB_SUBJECTS) {
		cs->subjects[n] = stid;
		cs->nsubjects = n + 1;
	}
}

/* A watched thread of a long task is asleep: follow whom it may wait for. */
__noinline int jb_subjects_watch(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_watcher w = {};
	__u32 claim;

	if (!cs || !c || cs->open.watched || !early_ns)
		return 0;
	cs->open.watched = 1;
	claim = cs->open.claim;
	w.seq = c->seq;
	w.tid = c->tid;
	w.pid = c->pid;
	if (claim && jb_subject_add(claim, (__u64)JB_SUBJ_OWNER << 32, c->pid, &w, c->now))
		subjects_keep(cs, claim);
	for (int i = 0; i < JB_PEERS; i++) {
		__u32 p = cs->peers[i], pp = cs->peer_pids[i];

		if (p && p != claim && p != c->tid && cs->nsubjects < JB_SUBJECTS &&
		    jb_subject_add(p, (__u64)JB_SUBJ_PEER << 32, 0, &w, c->now))
			subjects_keep(cs, p);
		/* Another process: all its threads (its own threads are followed
		 * one by one). */
		if (pp && pp != c->pid)
			jb_subject_proc_add(cs, pp, c->tid);
	}
	return 0;
}

static __always_inline void subject_first_seen(struct jb_subject *s, __u32 tgid)
{
	if (s->tgid)
		return;
	s->tgid = tgid;
	s->foreign = s->want_tgid && s->want_tgid != tgid;
}

/* A subject leaves the CPU (it is current): its split, and what it sleeps
 * in (one level on: the owner its own futex names becomes a subject of the
 * same watcher). st_pre: its task state, bit 63 set when preempted. */
__noinline int jb_subject_out(__u32 tid, __u32 tgid, __u64 st_pre, __u64 now)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &tid);
	struct jb_cause_open o = {};
	struct jb_watcher w = {};
	long st = (long)(st_pre & 0xffffffff);

	if (!s)
		return 0;
	if (!s->tgid) {
		subject_first_seen(s, tgid);
		bpf_get_current_comm(&s->comm, sizeof(s->comm));
	}
	if (s->foreign)
		return 0;
	subject_account(s, now, JB_ST_RUNNING);
	s->state = (st_pre >> 63) || st == 0 ? JB_ST_RUNNABLE : sleep_state(st);
	if (s->state < JB_ST_SLEEPING)
		return 0;
	o.nr = -1;
	syscall_evidence(&o, tid);
	s->wait_nr = o.nr;
	s->wait_addr = o.arg0;
	s->wait_claim = o.claim;
	s->flags = o.flags | (s->flags & (JB_CSF_WOKEN | JB_CSF_IRQ | JB_CSF_KTHREAD | JB_CSF_CTX_UNKNOWN));
	if (s->role == JB_SUBJ_CHAIN || s->chain || !o.claim)
		return 0;
	w.seq = s->watcher_seq;
	w.tid = s->watcher_tid;
	w.pid = s->watcher_pid;
	if (jb_subject_add(o.claim, (__u64)JB_SUBJ_CHAIN << 32 | tid, tgid, &w, now)) {
		s = bpf_map_lookup_elem(&subjects, &tid);
		if (s)
			s->chain = o.claim;
	}
	return 0;
}

__noinline int jb_subject_in(__u32 tid, __u32 tgid, __u64 now)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &tid);

	if (!s)
		return 0;
	subject_first_seen(s, tgid);
	if (s->foreign)
		return 0;
	subject_account(s, now, JB_ST_RUNNABLE);
	s->state = JB_ST_RUNNING;
	return 0;
}

/* sched_wakeup of a subject. */
__noinline int jb_subject_wakeup(__u32 tid)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &tid);

	if (!s || s->foreign)
		return 0;
	subject_account(s, bpf_ktime_get_ns(), JB_ST_SLEEPING);
	s->state = JB_ST_RUNNABLE;
	return 0;
}

/* sched_waking of a subject, in its waker's context: flags say interrupt
 * (JB_CSF_IRQ) or kernel thread (JB_CSF_KTHREAD). */
__noinline int jb_subject_waker(__u32 tid, __u32 flags)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &tid);
	__u64 id = bpf_get_current_pid_tgid();

	if (!s || s->foreign)
		return 0;
	s->flags |= JB_CSF_WOKEN | flags;
	if (flags & JB_CSF_NO_WAKER)
		return 0;
	s->waker_pid = id >> 32;
	s->waker_tid = (__u32)id;
	bpf_get_current_comm(&s->waker_comm, sizeof(s->waker_comm));
	return 0;
}

/* jb_sample: a subject's stack, one per sample period, up to its cap; or
 * a peer process's (the clock's period paces those). */
__noinline int jb_subject_sample(__u32 tid, __u32 tgid, __u64 now)
{
	struct jb_subject *s = bpf_map_lookup_elem(&subjects, &tid);

	if (!s) {
		struct jb_subject_proc *p = bpf_map_lookup_elem(&subject_procs, &tgid);

		if (!p)
			return 0;
		if (p->samples >= JB_SUBJECT_SAMPLES) {
			p->capped++;
			stat_inc(JB_STAT_SUBJECT_SAMPLES_CAPPED);
			return 0;
		}
		p->samples++;
		return 1;
	}
	if (s->want_tgid && s->want_tgid != tgid)
		return 0;
	/* Seen on a CPU: a thread that never switched while followed (a spin
	 * on an idle machine) is known by its samples. */
	if (!s->tgid) {
		subject_first_seen(s, tgid);
		bpf_get_current_comm(&s->comm, sizeof(s->comm));
	}
	if (s->last_sample_ns && now - s->last_sample_ns < sample_period_ns - sample_period_ns / 10)
		return 0;
	if (s->samples >= JB_SUBJECT_SAMPLES) {
		s->capped++;
		stat_inc(JB_STAT_SUBJECT_SAMPLES_CAPPED);
		return 0;
	}
	s->samples++;
	s->last_sample_ns = now;
	return 1;
}

/* ---- the stretches of a watched thread ---------------------------------- */

/* Ends what a stretch holds (counts, CPU watch, subjects) without charging it. */
__noinline int jb_causes_close(struct jb_causes *cs, __u32 tid, __u64 now)
{
	if (!cs)
		return 0;
	if (cs->open.phase == JB_CPH_ASLEEP)
		__sync_fetch_and_add(&cause_asleep_nr, -1);
	else if (cs->open.phase == JB_CPH_QUEUED)
		jb_cpu_watch_end(cs, tid);
	cs->open.phase = JB_CPH_NONE;
	if (cs->nsubjects)
		jb_subjects_release(cs, tid, now);
	return 0;
}

/* The thread's record begun afresh for task seq (its first stretch, or
 * its first kernel window, in it). */
__noinline int jb_causes_afresh(struct jb_causes *cs, __u64 seq, __u32 tid, __u64 now)
{
	if (!cs)
		return 0;
	jb_causes_close(cs, tid, now);
	cs->ev.seq = seq;
	for (int i = 0; i < JB_CAUSE_NR; i++) {
		cs->ev.kind_ns[i] = 0;
		cs->ev.win_ns[i] = 0;
		cs->ev.win_count[i] = 0;
	}
	cs->ev.reclaim_cgroup_id = 0;
	cs->ev.reclaim_memcg = 0;
	for (int i = 0; i < JB_CAUSE_SLOTS; i++)
		cs->ev.slices[i].kind = 0;
	for (int i = 0; i < JB_CAUSE_TASKS; i++)
		cs->ev.cpu.task[i].ns = 0;
	cs->ev.nslices = 0;
	cs->ev.flags = 0;
	cs->ev.preempted = 0;
	cs->ev.cpu.other_ns = 0;
	return 0;
}

__noinline int jb_kwin_evidence(struct jb_causes *cs, __u64 seq);

/*
 * A queued stretch whose switch-in no tracepoint showed (some VM kernels
 * never trace the switch away from a host agent's threads): charged with
 * the run-queue delay the scheduler counted meanwhile, as the state split
 * is (account_unseen), not left out. A throttled one cannot be split into
 * throttled and queued time so: left out. 1 when charged.
 */
__noinline int jb_cause_unseen_in(struct jb_cause_event *ev, struct jb_cause_open *o, __u64 queued)
{
	if (!ev || !o || o->phase != JB_CPH_QUEUED || o->throttled || !queued)
		return 0;
	jb_cause_charge(ev, o, o->win_kind ? o->win_kind : JB_CAUSE_RUNNABLE, o->win_key, queued);
	return 1;
}

/* The thread leaves the CPU inside a task (it is current). */
__noinline int jb_cause_out(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_cause_open *o;

	if (!cs || !c)
		return 0;
	o = &cs->open;
	if (cs->ev.seq != c->seq) { /* its first stretch in this task: afresh */
		jb_causes_afresh(cs, c->seq, c->tid, c->now);
	} else if (o->phase) { /* its switch-in went unseen */
		if (!jb_cause_unseen_in(&cs->ev, o, c->unseen_queued))
			cs->ev.flags |= JB_CEF_UNSEEN;
		jb_causes_close(cs, c->tid, c->now);
	}
	o->off_ns = c->now;
	o->nr = -1;
	o->arg0 = o->arg1 = 0;
	o->claim = 0;
	o->flags = 0;
	o->waker_pid = o->waker_tid = 0;
	o->waker_comm[0] = 0;
	o->cgroup_id = 0;  /* (early_* stay: adopted below) */
	o->hierarchy_id = 0;
	o->throttled = 0;
	o->watched = 0;
	jb_kwin_evidence(cs, c->seq);
	if (c->state == JB_ST_RUNNABLE) { /* preempted, or yielded while runnable */
		o->early = 0;  /* a waking that made it runnable again before it left */
		o->phase = JB_CPH_QUEUED;
		o->q_ns = c->now;
		if (c->preempt) {
			o->flags |= JB_CSF_PREEMPTED;
			cs->ev.preempted++;
		}
		o->throttled = task_throttled(bpf_get_current_task_btf(), o);
		if (!o->throttled) /* who else ran matters only while it could have */
			jb_cpu_watch_begin(bpf_get_smp_processor_id(), c->tid, c->now, o);
		return 0;
	}
	o->phase = JB_CPH_ASLEEP;
	o->q_ns = 0;
	if (c->state == JB_ST_BLOCKED)
		o->flags |= JB_CSF_BLOCKED;
	__sync_fetch_and_add(&cause_asleep_nr, 1);
	syscall_evidence(o, c->tid);
	if (c->state == JB_ST_BLOCKED)
		jb_io_evidence(o, c->tid, c->seq);
	if (o->early) { /* woken while it was still going to sleep */
		o->early = 0;
		o->flags |= o->early_flags;
		o->waker_pid = o->early_pid;
		o->waker_tid = o->early_tid;
		__builtin_memcpy(o->waker_comm, o->early_comm, sizeof(o->waker_comm));
	}
	if (c->early)
		jb_subjects_watch(cs, c);
	return 0;
}

/* sched_waking of the thread asleep inside a task: who woke it (flags: the
 * waker is an interrupt or a kernel thread). */
__noinline int jb_cause_waker(struct jb_causes *cs, struct jb_cctx *c, __u32 flags)
{
	struct jb_cause_open *o;
	__u64 id = bpf_get_current_pid_tgid();

	if (!cs || !c || cs->ev.seq != c->seq)
		return 0;
	o = &cs->open;
	if (o->phase == JB_CPH_NONE) { /* still in schedule(): for its switch-out */
		o->early = 1;
		o->early_flags = JB_CSF_WOKEN | flags;
		o->early_pid = flags & JB_CSF_NO_WAKER ? 0 : id >> 32;
		o->early_tid = flags & JB_CSF_NO_WAKER ? 0 : (__u32)id;
		bpf_get_current_comm(&o->early_comm, sizeof(o->early_comm));
		return 0;
	}
	if (o->phase != JB_CPH_ASLEEP)
		return 0;
	o->flags |= JB_CSF_WOKEN | flags;
	if (flags & JB_CSF_NO_WAKER)
		return 0;
	o->waker_pid = id >> 32;
	o->waker_tid = (__u32)id;
	bpf_get_current_comm(&o->waker_comm, sizeof(o->waker_comm));
	if ((flags & JB_CSF_KTHREAD) || o->waker_tid == c->tid || !o->waker_tid)
		return 0;
	/* A likely peer next time. */
	for (int i = 0; i < JB_PEERS; i++)
		if (cs->peers[i] == o->waker_tid)
			return 0;
	cs->peers[cs->peer_next & (JB_PEERS - 1)] = o->waker_tid;
	cs->peer_pids[cs->peer_next & (JB_PEERS - 1)] = o->waker_pid;
	cs->peer_next++;
	return 0;
}

/* sched_wakeup: its asleep piece ends, its queued piece begins (on c->cpu;
 * c->throttled: its cfs_rq is throttled, the glue set the cgroup). */
__noinline int jb_cause_woken(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_cause_open *o;
	__u64 key;
	__u32 kind;

	if (!cs || !c || cs->ev.seq != c->seq || cs->open.phase != JB_CPH_ASLEEP)
		return 0;
	o = &cs->open;
	__sync_fetch_and_add(&cause_asleep_nr, -1);
	kind = asleep_kind(o, &key);
	jb_cause_charge(&cs->ev, o, kind, key, c->now - o->off_ns);
	if (cs->nsubjects)
		jb_subjects_release(cs, c->tid, c->now);
	o->phase = JB_CPH_QUEUED;
	o->q_ns = c->now;
	o->throttled = c->throttled;
	if (!o->throttled)
		jb_cpu_watch_begin(c->cpu, c->tid, c->now, o);
	return 0;
}

/* The thread switches in inside a task: its stretch ends. */
__noinline int jb_cause_in(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_cause_open *o;
	__u64 key = 0;
	__u32 kind;

	if (!cs || !c || cs->ev.seq != c->seq || !cs->open.phase)
		return 0;
	o = &cs->open;
	o->early = 0;
	if (o->phase == JB_CPH_ASLEEP) { /* its wakeup went unseen: all asleep */
		kind = asleep_kind(o, &key);
		jb_cause_charge(&cs->ev, o, kind, key, c->now - o->off_ns);
		jb_causes_close(cs, c->tid, c->now);
		return 0;
	}
	__u64 span = c->now - o->q_ns, thr = 0;

	if (o->throttled) {
		/* Throttled until its cfs_rq was unthrottled (the kernel's own count
		 * of it); queued for a CPU after that. No unthrottle counted meanwhile
		 * (6.18 throttles a task on its return to user space: one preempted
		 * in the kernel runs again unthrottled) is queued time. */
		if (c->thr_now > o->thr_base)
			thr = c->thr_now - o->thr_base < span ? c->thr_now - o->thr_base : span;
		jb_cause_charge(&cs->ev, o, JB_CAUSE_THROTTLED, o->cgroup_id, thr);
		if (span > thr)
			jb_cause_charge(&cs->ev, o, o->win_kind ? o->win_kind : JB_CAUSE_RUNNABLE, o->win_key,
					span - thr);
	} else {
		if (o->win_kind) /* preempted (or woken) inside a kernel window */
			jb_cause_charge(&cs->ev, o, o->win_kind, o->win_key, span);
		else
			jb_cause_charge(&cs->ev, o, JB_CAUSE_RUNNABLE, 0, span);
		jb_cpu_watch_end(cs, c->tid);
	}
	o->phase = JB_CPH_NONE;
	return 0;
}

/*
 * The record, just before the task's, at its end: the thread is running,
 * so a stretch still open went unseen; a queued one is charged with the
 * run-queue delay counted meanwhile, another is left out and flagged (what
 * it holds is let go at the thread's next switch-out, which starts afresh).
 */
__noinline int jb_causes_send(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_cause_event *e;

	if (!cs || !c || cs->ev.seq != c->seq)
		return 0; /* never off the CPU in this task */
	/* Queued still, by the record: what ran on its CPU joins it first. */
	if (cs->open.phase == JB_CPH_QUEUED)
		jb_cpu_watch_end(cs, c->tid);
	e = reserve_event(sizeof(*e));
	if (!e)
		return 0;
	bpf_probe_read_kernel(e, sizeof(*e), &cs->ev);
	fill_header(&e->hdr, JB_EV_CAUSE, c->pid, c->tid, c->now);
	e->seq = c->seq;
	jb_io_fill(e, c->tid, c->seq);
	if (cs->open.phase && !jb_cause_unseen_in(e, &cs->open, c->unseen_queued))
		e->flags |= JB_CEF_UNSEEN;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* The same at a hang: the stretch still open is counted up to now, in the
 * record (not in the state). */
__noinline int jb_causes_send_hang(struct jb_causes *cs, struct jb_cctx *c)
{
	struct jb_cause_event *e;
	struct jb_cause_open *o;
	__u64 key = 0;
	__u32 kind = 0;

	if (!cs || !c || cs->ev.seq != c->seq)
		return 0;
	o = &cs->open;
	e = reserve_event(sizeof(*e));
	if (!e)
		return 0;
	bpf_probe_read_kernel(e, sizeof(*e), &cs->ev);
	fill_header(&e->hdr, JB_EV_CAUSE, c->pid, c->tid, c->now);
	e->seq = c->seq;
	jb_io_fill(e, c->tid, c->seq);
	__u64 since = 0;

	if (o->phase == JB_CPH_ASLEEP) {
		kind = asleep_kind(o, &key);
		since = o->off_ns;
	} else if (o->phase == JB_CPH_QUEUED) {
		kind = o->throttled ? JB_CAUSE_THROTTLED : o->win_kind ? o->win_kind : JB_CAUSE_RUNNABLE;
		key = o->throttled ? o->cgroup_id : o->win_kind ? o->win_key : 0;
		since = o->q_ns;
	}
	if (since && c->now > since) {
		jb_cause_charge(e, o, kind, key, c->now - since);
		e->flags |= JB_CEF_OPEN;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* ---- the glue: task_struct pointers, called from the hooks -------------- */

static __always_inline struct jb_causes *causes_of(struct task_struct *task, __u32 tid, bool create)
{
	struct jb_causes *cs, *zero;
	__u32 key = 0;

	if (state_in_task)
		return bpf_task_storage_get(&cause_state, task, 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	cs = bpf_map_lookup_elem(&cause_tid, &tid);
	if (cs || !create)
		return cs;
	zero = bpf_map_lookup_elem(&cause_zero, &key);
	if (!zero)
		return NULL;
	if (bpf_map_update_elem(&cause_tid, &tid, zero, BPF_NOEXIST) == -E2BIG)
		stat_inc(JB_STAT_CAUSES_FULL);
	return bpf_map_lookup_elem(&cause_tid, &tid);
}

static __always_inline void cctx_of(struct jb_cctx *c, __u32 tid, struct jb_thread *t, __u64 now)
{
	c->now = now;
	c->seq = t->seq;
	c->tid = tid;
	c->pid = t->pid;
	c->state = t->state;
	c->early = t->early;
	c->unseen_queued = t->unseen_queued_ns;
}

/* prev (current) leaves the CPU inside a task; t->state is set already. */
static __noinline void cause_switch_out(struct task_struct *prev, __u32 tid, struct jb_thread *t,
					__u64 now, bool preempt)
{
	struct jb_cctx c = {};

	cctx_of(&c, tid, t, now);
	c.preempt = preempt;
	jb_cause_out(causes_of(prev, tid, true), &c);
}

/* next switches in inside a task. */
static __noinline void cause_switch_in(struct task_struct *next, __u32 tid, struct jb_thread *t, __u64 now)
{
	struct jb_causes *cs = causes_of(next, tid, false);
	struct jb_cctx c = {};

	if (!cs || !cs->open.phase)
		return;
	cctx_of(&c, tid, t, now);
	if (cs->open.throttled)
		c.thr_now = cfs_throttled_ns(cs->open.thr_cfs, next);
	jb_cause_in(cs, &c);
}

/* sched_waking of a watched thread inside a task. */
static __noinline void cause_waking(void *ctx, struct task_struct *p, __u32 tid, struct jb_thread *t)
{
	struct jb_causes *cs = causes_of(p, tid, false);
	struct jb_cctx c = {};
	__u32 flags = 0;

	if (!cs || cs->open.phase == JB_CPH_QUEUED)
		return;
	flags = waker_flags(ctx);
	cctx_of(&c, tid, t, 0);
	jb_cause_waker(cs, &c, flags);
}

/* sched_wakeup of a watched thread asleep inside a task. */
static __noinline void cause_wakeup(struct task_struct *p, __u32 tid, struct jb_thread *t, __u64 now)
{
	struct jb_causes *cs = causes_of(p, tid, false);
	struct jb_cctx c = {};

	if (!cs || cs->open.phase != JB_CPH_ASLEEP)
		return;
	cctx_of(&c, tid, t, now);
	c.cpu = task_cpu_of(p);
	c.throttled = task_throttled(p, &cs->open);
	jb_cause_woken(cs, &c);
}

/* A task's long mark passed while its thread sleeps: follow its subjects now. */
static __noinline void causes_turned_long(struct task_struct *task, __u32 tid, struct jb_thread *t)
{
	struct jb_causes *cs;
	struct jb_cctx c = {};

	if (state_in_task && !task)
		return;
	cs = causes_of(task, tid, false);
	if (!cs || cs->ev.seq != t->seq || cs->open.phase != JB_CPH_ASLEEP || cs->open.watched)
		return;
	cctx_of(&c, tid, t, bpf_ktime_get_ns());
	jb_subjects_watch(cs, &c);
}

/* The task's JB_EV_CAUSE, just before its record (hang: so far). */
static __noinline void causes_send(struct task_struct *task, __u32 tid, struct jb_thread *t, __u64 now,
				   bool hang)
{
	struct jb_cctx c = {};

	if (state_in_task && !task)
		return;
	cctx_of(&c, tid, t, now);
	if (hang)
		jb_causes_send_hang(causes_of(task, tid, false), &c);
	else
		jb_causes_send(causes_of(task, tid, false), &c);
}

/* The thread exits: what it holds is let go. */
static __noinline void causes_forget(struct task_struct *task, __u32 tid)
{
	if (state_in_task && !task)
		return;
	jb_causes_close(causes_of(task, tid, false), tid, bpf_ktime_get_ns());
	if (!state_in_task)
		bpf_map_delete_elem(&cause_tid, &tid);
}

/* Every sched_switch: the machine-wide parts, at one load each while idle. */
static __always_inline void causes_any_switch(bool btf, bool preempt, struct task_struct *prev,
					      struct task_struct *next, __u64 *now)
{
	if (!causes_enabled || (cause_queued_nr <= 0 && subjects_nr <= 0))
		return;
	if (!*now)
		*now = bpf_ktime_get_ns();
	__u32 prev_tid = TASK_FIELD(btf, prev, pid), prev_pid = TASK_FIELD(btf, prev, tgid);

	if (cause_queued_nr > 0)
		jb_cpu_watch_switch(prev_tid, prev_pid, *now);
	if (subjects_nr > 0) {
		__u64 st = (__u32)task_state(btf, prev);

		jb_subject_out(prev_tid, prev_pid, st | (preempt ? 1ull << 63 : 0), *now);
		jb_subject_in(TASK_FIELD(btf, next, pid), TASK_FIELD(btf, next, tgid), *now);
	}
}

/* sched_waking of a subject (any thread), in its waker's context. */
static __noinline void subject_waking(void *ctx, __u32 tid)
{
	__u32 flags = 0;

	if (!bpf_map_lookup_elem(&subjects, &tid))
		return;
	flags = waker_flags(ctx);
	jb_subject_waker(tid, flags);
}

#endif /* JANKBPF_CAUSES_BPF_H */
