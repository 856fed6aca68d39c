/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-thread state and every map: task storage or tid hashes for that
 * state, the timers, the off-CPU stashes, the two rings, the counters.
 */
#ifndef JANKBPF_MAPS_BPF_H
#define JANKBPF_MAPS_BPF_H

/* Per watched thread. Created at its first eligible wait; removed at exit. */
struct jb_thread {
	__u64 begin_ns;       /* start of the current task */
	__u64 last_ns;        /* last state change inside the task */
	__u64 state_ns[JB_ST_NR];
	__u64 seq;            /* tasks started on this thread */
	__u64 proc_start_ns;
	__u32 pid;
	__u32 state;          /* enum jb_thread_state, tracked in and out of tasks */
	__u32 wait_nr;        /* the wait the current task began from */
	__u32 armed;          /* watchdog timer pending (timer mode) */
	__u64 last_sample_ns; /* last stack taken in this task (on or off CPU) */
	/* An off-CPU capture of this task's thread since it last ran (0: none),
	 * and last_sample_ns before that capture took the period's slot. */
	__u64 capture_ns;
	__u64 slot_before_ns;
	__u64 last_capture_ns; /* last capture of a sleep in this task */
	__u8 in_task;
	__u8 crossed;
	__u8 hung;
	__u8 early;           /* past early_ns: counted in long_tasks */
	__u8 offcpu_pending;  /* an off-CPU capture awaits its waker */
	__u8 traced;          /* past trace_ns */
	__u8 in_wait;         /* between entry into a wait and its return */
	__u8 fresh_wait;      /* the wait returned, no marker task began since */
	__u8 job_wait;        /* in a child wait that ended the task (shell job) */
	__u8 job_started;     /* this task put a child in a process group */
	__u8 woken;           /* woken while asleep in the wait: wake_delay_ns is set */
	/* Found asleep inside a wait at attach (bpf/adopt.bpf.h): no hook will
	 * show that wait's return. */
	__u8 unseen_return;
	__u8 provisional;     /* switched in out of it: not yet seen to have left it */
	__u8 began_at_switch; /* the current task began at such a switch-in */
	__u64 wait_regs_nr;   /* that wait: the syscall number in its user registers */
	__u64 wait_regs_pc;   /* and the user pc it returns to */
	__u64 wake_ns;        /* its wakeup (delivery: no run_delay at a switch-in) */
	__u64 stash_seq;      /* task whose off-CPU capture is stashed, unsent */
	/* sched_info.run_delay at the last wakeup while asleep in the wait: what
	 * it gained by the wait's return is the delivery, with no clock read. */
	__u64 wake_delay_ns;
	__u64 begin_jiffies;  /* jiffies at begin_ns: most ends need no clock */
	/* The kernel's counters at the last switch-out, wakeup or task begin. */
	__u64 snap_exec_ns;   /* se.sum_exec_runtime: CPU time */
	__u64 snap_delay_ns;  /* sched_info.run_delay: time queued for a CPU */
	/* run_delay gained over the last switch-in found unseen (account_unseen):
	 * read only right after, by the causes of the stretch it ended. */
	__u64 unseen_queued_ns;
	__u64 delivery_ns;    /* current task: that wakeup to the wait's return */
	/* Markers: begin/end nesting depth; while > 0 waits bound no task. */
	__u32 depth;
	__u32 boundary;       /* enum jb_boundary of the current task */
	__u32 marker_id;      /* the marker whose span the current task is */
	__u32 pad2;
	char rname[JB_NAME_LEN]; /* the runnable's name read at the marker, or "" */
	__u32 uid;            /* when first tracked: the --record-rate-uid bucket it takes from */
	__u8 rate;            /* the current task's record token: enum jb_rate_state */
};

/* Scan watchdog: per watched thread, by tid (userspace shrinks it to one
 * entry when state_in_task). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_thread);
} threads SEC(".maps");

/*
 * With the state in `threads`: one bit per tid that may have an entry there
 * (userspace sizes it to pid_max). A thread whose bit is clear is turned
 * away by an array load the verifier inlines, not a hash lookup: sched_switch
 * and sched_wakeup run for every task on the machine (issue 27, the tax on
 * unwatched processes). A tid past the end is looked up as before.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tid_bits SEC(".maps");

/* Timer watchdog: per watched thread, on its task_struct. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct jb_thread);
} thread_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_proc);
} procs SEC(".maps");

/*
 * Processes whose samples must reach userspace at once (Python: its frames
 * are read from its memory while they still describe the sample). Others'
 * samples wait in the perf ring until it is half full or their task ends.
 * Written by userspace only; LRU, since a process that never janks sends no
 * exit record to remove it by.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} eager_pids SEC(".maps");

/*
 * Timers live in a map of their own: the verifier refuses any map holding a
 * bpf_timer in tracepoint/raw_tp/perf_event programs, so only the tp_btf
 * programs and the timer callback may reference this one.
 */
struct jb_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct jb_timer);
} timers SEC(".maps");

/*
 * Timer watchdog: threads inside a task with no timer armed. A timer is
 * armed at a switch-in, and a thread already asleep in its wait when
 * jankbpf started is first seen at that wait's return, a tracepoint or
 * uprobe that may not start one: its first task would go unwatched until
 * it happened to be preempted. The next sched_switch anywhere arms it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} unarmed SEC(".maps");

/* The small records (tasks, exits, trace triggers): ~4,000 between two
 * reads, whatever the off-CPU captures do. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* Off-CPU captures and their wakers: room for ~240 captures (17 KB each)
 * between two reads. A full ring loses captures, never a jank record. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} captures SEC(".maps");

/* --offcpu-rate: each process's token bucket (include/jankbpf/rate.h), by
 * tgid. LRU: a process pushed out just starts again with a full bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_bucket SEC(".maps");

/* --offcpu-rate for a uid's processes together (stacks.bpf.h). LRU too. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct jb_record_bucket);
} offcpu_uid_bucket SEC(".maps");

/* --record-rate and --record-rate-uid: the buckets (include/jankbpf/rate.h),
 * by tgid and by uid. LRU: one pushed out starts again full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct jb_record_bucket);
} record_bucket SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct jb_record_bucket);
} uid_bucket SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, JB_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * The last off-CPU capture of each watched thread, made at every blocking
 * switch-out inside a task: a thread that blocks before its task is long and
 * stays blocked has no other moment at which its user stack can be read.
 * Task storage, so it lives only as long as the thread and costs nothing for
 * threads that never block inside a task.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct jb_offcpu_event);
} offcpu_stash SEC(".maps");

/*
 * The same stash by tid, where per-thread state lives in the `threads` hash:
 * on kernels without bpf_task_from_pid (6.1) the timer callback, and the
 * scan watchdog always, have only a tid to find the thread by. Preallocated
 * (a capture is made in sched_switch); userspace sizes it, one entry when
 * the task-storage stash is in use.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct jb_offcpu_event);
} offcpu_stash_tid SEC(".maps");

/* A 17 KB value cannot be built on the BPF stack: new stash entries are
 * inserted from this per-CPU scratch and then overwritten in place. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jb_offcpu_event);
} offcpu_scratch SEC(".maps");

/*
 * Scan watchdog: the tids of watched threads now inside a task. The tick
 * walks this small table instead of the 16,384 buckets of `threads`: that
 * walk took ~0.2 ms natively every 5 ms, and under emulation (a slow or
 * nested VM) longer than the tick itself.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} in_task SEC(".maps");

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;

#endif /* JANKBPF_MAPS_BPF_H */
