/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared steps: find, track or forget a watched thread; count; reserve a
 * record or count the drop; fill a record header; the eligibility rules
 * (main thread, --pid, --comm, self).
 */
#ifndef JANKBPF_COMMON_BPF_H
#define JANKBPF_COMMON_BPF_H

/*
 * The state of a watched thread, or NULL. `task` must be a trusted pointer
 * (tp_btf argument, bpf_get_current_task_btf) when state_in_task; the hash
 * path (scan watchdog, whose programs have none) uses only the tid. The
 * branch on the read-only flag is pruned by the verifier at load.
 */
static __always_inline __u64 *tid_word(__u32 tid)
{
	__u32 i = tid >> 6;

	return bpf_map_lookup_elem(&tid_bits, &i);
}

/* Set before a tid's entry is made, cleared after it is deleted: a clear bit
 * means no entry (a set one may be stale: then the lookup says). */
static __always_inline bool tid_may_have_state(__u32 tid)
{
	__u64 *w = tid_word(tid);

	return !w || (*w & (1ull << (tid & 63)));
}

static __always_inline void tid_mark(__u32 tid)
{
	__u64 *w = tid_word(tid);

	if (w)
		__sync_fetch_and_or(w, 1ull << (tid & 63));
}

static __always_inline void tid_unmark(__u32 tid)
{
	__u64 *w = tid_word(tid);

	if (w)
		__sync_fetch_and_and(w, ~(1ull << (tid & 63)));
}

static __always_inline struct jb_thread *thread_of(struct task_struct *task, __u32 tid)
{
	if (state_in_task)
		return bpf_task_storage_get(&thread_state, task, 0, 0);
	if (!tid_may_have_state(tid))
		return NULL;
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline struct jb_thread *thread_of_current(__u32 tid)
{
	if (state_in_task)
		return bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(), 0, 0);
	if (!tid_may_have_state(tid))
		return NULL;
	return bpf_map_lookup_elem(&threads, &tid);
}

/*
 * A task_struct field: a plain load from a trusted tp_btf argument, a
 * probe read from a raw_tp one. `btf` is a constant at every call site.
 */
#define TASK_FIELD(btf, task, field) ((btf) ? (task)->field : BPF_CORE_READ(task, field))

/*
 * The state of a task the scheduler hands us, or NULL. sched_switch and
 * sched_wakeup run for every task on the machine: a thread that cannot be
 * watched (not a main thread, unless --threads all) is turned away on the
 * task_struct's own fields, before any map lookup.
 */
static __always_inline struct jb_thread *sched_thread_of(bool btf, struct task_struct *task,
							 __u32 *tid)
{
	*tid = TASK_FIELD(btf, task, pid);
	/* A JVM's loop threads are tracked too: then the lookup decides. */
	if (!all_threads && *tid != TASK_FIELD(btf, task, tgid) &&
	    !(loop_threads_possible && loop_thread_procs))
		return NULL;
	/* No local storage on the task at all (the idle task, a kernel thread,
	 * a process never seen in a wait): turned away on its own field too,
	 * without the lookup helper (issue 30: a third of a switch's cost). */
	if (btf && state_in_task && bpf_core_field_exists(task->bpf_storage) && !task->bpf_storage)
		return NULL;
	return thread_of(task, *tid);
}

static __always_inline void thread_forget(struct task_struct *task, __u32 tid)
{
	if (state_in_task) {
		bpf_task_storage_delete(&thread_state, task);
	} else {
		bpf_map_delete_elem(&threads, &tid);
		tid_unmark(tid);
	}
	if (offcpu_enabled && !state_in_task)
		bpf_map_delete_elem(&offcpu_stash_tid, &tid);
}

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		*v += 1;
}

/* A small record in the `events` ring, or NULL with the drop counted. */
static __always_inline void *reserve_event(__u64 size)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e)
		stat_inc(JB_STAT_RB_DROPS);
	return e;
}

static __always_inline void fill_header(struct jb_header *h, __u32 type, __u32 pid, __u32 tid,
					__u64 now)
{
	h->type = type;
	h->pid = pid;
	h->tid = tid;
	h->time_ns = now;
}

/* Main threads only (unless --threads all): one compare spares every other
 * thread a lookup. `id` is bpf_get_current_pid_tgid(). */
static __always_inline bool eligible_thread(__u64 id)
{
	return all_threads || (__u32)id == id >> 32;
}

/*
 * A wait that bounds tasks of this thread: a main thread's (or any, with
 * --threads all) event-loop wait, or an epoll wait of any thread of a
 * process userspace marked JB_PROCF_LOOP_THREADS (a JVM, whose NIO
 * selectors are its event loops; its other threads park in futexes or poll
 * a socket, which must not bound tasks). Unmarked processes pay a global
 * load; none at all without named targets.
 */
static __always_inline bool eligible_wait(__u64 id, __u32 wait_id)
{
	struct jb_proc *p;
	__u32 tgid = id >> 32;

	if (eligible_thread(id))
		return true;
	if (!loop_threads_possible || !loop_thread_procs || wait_id > JB_WAIT_epoll_pwait2)
		return false;
	p = bpf_map_lookup_elem(&procs, &tgid);
	return p && (p->flags & JB_PROCF_LOOP_THREADS);
}

static __always_inline bool comm_matches(struct task_struct *leader)
{
	char comm[JB_COMM_LEN];

	BPF_CORE_READ_STR_INTO(&comm, leader, comm);
	for (int i = 0; i < JB_COMM_LEN; i++) {
		if (comm[i] != target_comm[i])
			return false;
		if (comm[i] == 0)
			break;
	}
	return true;
}

/*
 * Whether a thread of this process may be watched: never jankbpf itself;
 * with --pid / -- CMD a target; with --comm a leader of that name (then
 * recorded as a target, so its exit is reported).
 */
static __always_inline bool watch_process(struct task_struct *leader, __u32 tgid)
{
	struct jb_proc *proc;

	if (tgid == self_tgid)
		return false;
	if (filter_pids) {
		proc = bpf_map_lookup_elem(&procs, &tgid);
		if (!proc || !(proc->flags & JB_PROCF_TARGET))
			return false;
	}
	if (filter_comm) {
		if (!comm_matches(leader))
			return false;
		struct jb_proc p = {.flags = JB_PROCF_TARGET};
		if (bpf_map_update_elem(&procs, &tgid, &p, BPF_NOEXIST) == -E2BIG)
			stat_inc(JB_STAT_PROCS_FULL);
	}
	return true;
}

/* With markers: userspace looks for marked binaries this process maps. */
static __always_inline void announce_thread(__u32 tgid, __u32 tid, __u64 proc_start_ns)
{
	if (!announce_tracked)
		return;
	struct jb_tracked_event *e = reserve_event(sizeof(*e));

	if (e) {
		fill_header(&e->hdr, JB_EV_TRACKED, tgid, tid, bpf_ktime_get_ns());
		e->proc_start_ns = proc_start_ns;
		bpf_ringbuf_submit(e, 0);
	}
}

/* Decides whether the current thread is one we watch, and starts tracking
 * it; `loop_thread`: its wait made it eligible (eligible_wait). */
static __noinline struct jb_thread *track_current(__u32 tid, __u32 tgid, bool loop_thread)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);
	struct jb_thread fresh = {};

	if (!loop_thread && !eligible_thread((__u64)tgid << 32 | tid))
		return NULL;
	if (!watch_process(leader, tgid))
		return NULL;

	fresh.pid = tgid;
	fresh.uid = (__u32)bpf_get_current_uid_gid();
	fresh.state = JB_ST_RUNNING;
	fresh.proc_start_ns = BPF_CORE_READ(leader, start_time);
	if (state_in_task) {
		/* Only the thread itself creates its state: this is the first time. */
		struct jb_thread *t = bpf_task_storage_get(&thread_state, bpf_get_current_task_btf(),
							   &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) {
			stat_inc(JB_STAT_THREADS_FULL);
			return NULL;
		}
	} else {
		tid_mark(tid);
		if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST)) {
			if (!bpf_map_lookup_elem(&threads, &tid))
				stat_inc(JB_STAT_THREADS_FULL);
			return bpf_map_lookup_elem(&threads, &tid);
		}
	}
	announce_thread(tgid, tid, fresh.proc_start_ns);
	return thread_of_current(tid);
}

#endif /* JANKBPF_COMMON_BPF_H */
