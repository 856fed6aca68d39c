/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records shared by the BPF programs and userspace: fixed-width structs only,
 * included from both sides. Every ring-buffer record starts with a
 * `struct jb_header`, and userspace dispatches on its `type` with one switch.
 * Two rings carry them: `captures` the bulky JB_EV_OFFCPU (17 KB) and
 * JB_EV_WAKER records, `events` all the small ones, so a process that
 * sleeps often inside long tasks cannot crowd out other processes' janks.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns); userspace turns
 * them into epoch milliseconds.
 */
#ifndef JANKBPF_EVENTS_H
#define JANKBPF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define JB_COMM_LEN 16
#define JB_NAME_LEN 64    /* runnable names read at a marker */
#define JB_MAX_DEPTH 64   /* marker nesting counted per thread */

/* What bounds a task (jb_task_event.boundary). */
enum jb_boundary {
	JB_BOUND_SYSCALL = 0,      /* from a wait's return to the next wait or marker */
	JB_BOUND_MARKER = 1,       /* a marker's span: outermost begin to its end */
	JB_BOUND_AFTER_MARKER = 2, /* from a marker's end to the next wait or marker */
};

/* Marker cookies: the marker's id in the low 32 bits, and flags. */
#define JB_MARKER_NAME_ARG (1ull << 32) /* USDT: a string first argument names the runnable */

enum jb_event_type {
	JB_EV_TASK_END = 1, /* a task that reached the threshold has ended */
	JB_EV_CROSSING = 2, /* a running task just crossed the threshold */
	JB_EV_HANG = 3,     /* a running task is still stuck after hang_ns */
	JB_EV_EXIT = 4,     /* a watched process exited (its last thread) */
	JB_EV_EARLY = 5,    /* a running task passed the sampling mark (a third
			     * of the threshold): stacks are wanted from now */
	JB_EV_OFFCPU = 6,   /* a long task's thread went to sleep: its stacks */
	JB_EV_WAKER = 7,    /* who woke that thread */
	JB_EV_TRACE = 8,    /* a running task passed the trace bound */
	JB_EV_TRACKED = 9,  /* a thread is watched from now (with markers: look
			     * for marked binaries its process maps) */
	JB_EV_SAMPLED = 10, /* a sample of an eager_pids process is in the perf
			     * ring (a bare jb_header): read it now */
	JB_EV_UNARMED = 11, /* a task began with no watchdog armed (a bare
			     * jb_header): it only wakes the reader, whose
			     * switch-in arms the thread's timer */
	JB_EV_FRAME = 12,   /* a Wayland client's frame event (struct
			     * jb_frame_event, on the `frames` ring) */
	JB_EV_CAUSE = 13,   /* why a task was not running: sent just before
			     * its JB_EV_TASK_END or JB_EV_HANG */
	JB_EV_SUBJECT = 14, /* a thread followed while a long task waited for
			     * it (its owner, a peer): what it did meanwhile */
};

/* Where a watched thread is, for the per-task state breakdown. */
enum jb_thread_state {
	JB_ST_RUNNING = 0,  /* on a CPU */
	JB_ST_RUNNABLE = 1, /* woken or preempted, waiting for a CPU */
	JB_ST_SLEEPING = 2, /* S: interruptible sleep */
	JB_ST_BLOCKED = 3,  /* D: uninterruptible sleep, usually I/O */
	JB_ST_NR = 4,
};

/*
 * Counters in the `stats` per-CPU array; userspace sums over CPUs. The one
 * list of them: X(ID, field, meaning) gives the BPF side JB_STAT_<ID> and
 * userspace its KernelStats field (src/bpf/kernel_stats.h).
 */
#define JB_STATS(X)                                                                                  \
	X(TASKS, tasks, "tasks that ended on watched threads")                                          \
	X(RB_DROPS, ringbuf_drops, "small records lost: the `events` ring was full")                     \
	X(THREADS_FULL, threads_map_full, "watched threads not tracked: map full")                       \
	X(TIMER_FAIL, timer_failures, "watchdog timers that could not be armed")                         \
	X(SAMPLES, samples, "on-CPU stack samples let through")                                          \
	X(OFFCPU, offcpu, "off-CPU captures made")                                                       \
	X(UNSEEN_SWITCH, unseen_switches, "a watched thread ran after a switch-in no tracepoint showed") \
	X(STASH_FULL, stash_full, "off-CPU captures not made: the tid stash was full")                   \
	X(PROCS_FULL, procs_full, "janked processes whose exit goes unreported: map full")               \
	X(SCAN_FULL, scan_full, "tasks the scan watchdog cannot see live: in_task full")                 \
	X(OFFCPU_RING_FULL, offcpu_ring_full, "off-CPU captures and wakers lost: `captures` ring full")   \
	X(OFFCPU_RATE, offcpu_rate_limited, "off-CPU captures not sent: the process's --offcpu-rate")    \
	X(TIMERS_FULL, timers_map_full, "watchdog timers not made: the `timers` map was full")           \
	X(FRAME_EVENTS_LOST, frame_events_lost, "Wayland frame events lost: the `frames` ring was full")  \
	X(FRAME_SAMPLES, frame_samples, "on-CPU samples of frames past their deadline")                 \
	X(RECORD_RATE, records_rate_limited, "jank and hang records not sent: over --record-rate(-uid)")          \
	X(CAUSES_FULL, causes_full, "tasks without causes: the `cause_tid` map was full")                 \
	X(SUBJECTS_FULL, subjects_full, "owners/peers not followed: the `subjects` map was full")          \
	X(SUBJECT_SAMPLES_CAPPED, subject_samples_capped, "samples of owners/peers over their cap")   \
	X(WAKERS_UNKNOWN, wakers_unknown, "wakeups in tasks before the interrupt text was read: not blamed")

#define JB_STAT_ENUM(id, field, meaning) JB_STAT_##id,
enum jb_stat {
	JB_STATS(JB_STAT_ENUM)
	JB_STAT_NR,
};
#undef JB_STAT_ENUM

/* bits of jb_task_event.flags */
#define JB_TASKF_CROSSED (1u << 0) /* the crossing was seen while running */
#define JB_TASKF_UNRECOVERED (1u << 2) /* ended by the thread's exit, not a wait */
#define JB_TASKF_SWITCH_IN (1u << 3) /* began at the switch-in out of a wait found
					 * at attach, whose return no hook shows */

/* bits of jb_proc.flags */
#define JB_PROCF_TARGET (1u << 0) /* named by --pid / --comm / -- CMD */
#define JB_PROCF_JANKED (1u << 1) /* has had a jank: report its exit */
/* A JVM (userspace found libjvm.so): its threads that wait in epoll are
 * event loops (NIO selectors), watched like main threads. */
#define JB_PROCF_LOOP_THREADS (1u << 2)

struct jb_header {
	__u32 type; /* enum jb_event_type */
	__u32 pid;  /* tgid */
	__u32 tid;
	__u32 pad;
	__u64 time_ns; /* when the record was made */
};

/* JB_EV_TASK_END, JB_EV_CROSSING and JB_EV_HANG */
struct jb_task_event {
	struct jb_header hdr;
	__u64 begin_ns;               /* task start: return of the wait */
	__u64 end_ns;                 /* task end, or now while it still runs */
	__u64 state_ns[JB_ST_NR];     /* breakdown; sums to end_ns - begin_ns */
	__u64 seq;                    /* per-thread task number: ties events */
	__u64 proc_start_ns;          /* group leader start, CLOCK_MONOTONIC */
	__u32 uid;
	__u32 wait_syscall;           /* enum jb_wait_id (jankbpf/hooks.h) of its wait */
	__u32 flags;                  /* JB_TASKF_* */
	__u32 threshold_ms;
	char comm[JB_COMM_LEN];       /* thread name */
	char proc_comm[JB_COMM_LEN];  /* group leader name */
	__u64 delivery_ns;            /* wakeup that ended the wait -> its return */
	__u32 boundary;               /* enum jb_boundary */
	__u32 marker_id;              /* with JB_BOUND_MARKER: which marker */
	char runnable_name[JB_NAME_LEN]; /* read at the marker ("" if none) */
};

/*
 * Causes (bpf/causes.bpf.h, src/cause/): the kinds a task's non-running
 * time is split into. Their order is the priority order: a stretch of time
 * whose evidence fits several kinds goes to the first.
 */
enum jb_cause_kind {
	JB_CAUSE_NONE = 0,
	JB_CAUSE_THROTTLED = 1,   /* cfs bandwidth: the task group's quota ran out */
	JB_CAUSE_RECLAIM = 2,     /* direct reclaim */
	JB_CAUSE_COMPACTION = 3,  /* direct compaction */
	JB_CAUSE_FAULT = 4,       /* major page faults */
	JB_CAUSE_IO = 5,          /* block I/O */
	JB_CAUSE_KERNEL_LOCK = 6, /* a contended kernel lock */
	JB_CAUSE_LOCK = 7,        /* a futex wait woken by a thread (a user lock) */
	JB_CAUSE_PEER = 8,        /* another wait, woken by a thread or process */
	JB_CAUSE_RUNNABLE = 9,    /* queued for a CPU */
	JB_CAUSE_SLEEP = 10,      /* a timed sleep, a wait's timeout */
	JB_CAUSE_OTHER = 11,      /* the rest */
	JB_CAUSE_NR = 12,
};

/* Classes of syscalls the causes need to tell apart (cause_class_of_nr). */
enum jb_syscall_class {
	JB_SC_NONE = 0,
	JB_SC_FUTEX = 1,        /* futex(2): the address, a wait op, an owner */
	JB_SC_FUTEX_WAITV = 2,  /* futex_waitv(2) */
	JB_SC_SLEEP = 3,        /* nanosleep, clock_nanosleep */
	JB_SC_TIMED = 4,        /* poll family: a timeout may end it */
	JB_SC_FILE_IO = 5,      /* fsync, read, write, ...: a D-state sleep in it is block I/O */
};

/* bits of jb_cause_slice.flags (of its longest stretch) */
#define JB_CSF_WOKEN (1u << 0)      /* a sched_waking named the waker */
#define JB_CSF_IRQ (1u << 1)        /* woken from an interrupt: never blamed */
#define JB_CSF_FUTEX_WAIT (1u << 2) /* a futex wait op; claim read */
#define JB_CSF_CLAIM_READ (1u << 3) /* the owner claim could be read */
#define JB_CSF_PI (1u << 4)         /* a PI futex: the claim is the futex word's tid */
#define JB_CSF_BLOCKED (1u << 5)    /* asleep in D (uninterruptible) */
#define JB_CSF_PREEMPTED (1u << 6)  /* queued by a preemption, not a wakeup */
#define JB_CSF_COMPAT (1u << 7)     /* a 32-bit syscall (its own numbers) */
#define JB_CSF_FOREIGN (1u << 8)    /* subject: a claim naming another process's thread, not followed */
#define JB_CSF_KTHREAD (1u << 9)    /* woken by a kernel thread: the kernel's doing, never blamed */
#define JB_CSF_CTX_UNKNOWN (1u << 10) /* woken before the interrupt text was read: maybe an
				       * interrupt, in whatever it interrupted; never blamed */
/* No waker to name: an interrupt, or a context not known. */
#define JB_CSF_NO_WAKER (JB_CSF_IRQ | JB_CSF_CTX_UNKNOWN)
/* fault and io (bpf/causes_io.bpf.h); high bits, apart from the other kinds' */
#define JB_CSF_FAULT (1u << 24)      /* asleep in D outside any syscall: a page fault */
#define JB_CSF_FAULT_ADDR (1u << 25) /* arg0 is the faulting address (exceptions:page_fault_user) */
#define JB_CSF_IO (1u << 26)         /* asleep in D in file I/O, or with its block requests in flight */

/* bits of jb_cause_event.flags */
#define JB_CEF_UNSEEN (1u << 0)     /* a stretch whose end went unseen was left out */
#define JB_CEF_OPEN (1u << 1)       /* a hang: the stretch still open is counted to now */

#define JB_CAUSE_SLOTS 8
#define JB_CAUSE_TASKS 4

/*
 * kernel_lock: a contended kernel lock (lock:contention_begin in the
 * thread's context): its address, the kernel's LCB_F_* flags (the class)
 * and ours, the owner the lock records (rwsem, mutex) and its kernel stack.
 */
#define JB_KLOCK_FRAMES 16
#define JB_LCB_SPIN (1u << 0)       /* the kernel's LCB_F_* */
#define JB_LCB_READ (1u << 1)
#define JB_LCB_WRITE (1u << 2)
#define JB_LCB_RT (1u << 3)
#define JB_LCB_PERCPU (1u << 4)
#define JB_LCB_MUTEX (1u << 5)
#define JB_KLF_MMAP (1u << 16)          /* it is the thread's own mm->mmap_lock */
#define JB_KLF_OWNER (1u << 17)         /* the lock named an owner task */
#define JB_KLF_READER_OWNED (1u << 18)  /* rwsem held by readers: the owner is the last reader (a hint) */

struct jb_klock_info {
	__u64 addr;
	__u32 flags;         /* JB_LCB_* | JB_KLF_* */
	__u32 owner_pid, owner_tid;
	__s32 owner_frames;  /* frames in owner_stack; < 0: -errno, not taken */
	char owner_comm[JB_COMM_LEN];
	__u64 owner_stack[JB_KLOCK_FRAMES];
};

/*
 * One slice: a kind and an identity (key, by kind: throttled the cgroup's
 * kernfs id, lock the futex address, peer pid << 32 | tid of the waker,
 * sleep the syscall, other state << 32 | syscall, runnable 0, kernel_lock
 * the lock's address, reclaim the memory cgroup's kernfs id (0: direct
 * reclaim), compaction 0), its time
 * and stretches, and the evidence of its longest stretch.
 */
struct jb_cause_slice {
	__u64 key;
	__u64 ns;
	__u64 max_ns;       /* its longest stretch */
	__u64 max_off_ns;   /* that stretch's switch-out: pairs it with an off-CPU capture */
	__u64 arg0, arg1;   /* that stretch's syscall arguments (lock: addr, op) */
	__u64 cgroup_id;    /* throttled: the task group's cgroup (kernfs id) */
	__u32 kind;         /* enum jb_cause_kind */
	__u32 count;        /* stretches merged */
	__s32 nr;           /* the syscall it slept in (-1: none) */
	__u32 claim;        /* lock: the owner tid glibc's mutex names (a claim) */
	__u32 waker_pid, waker_tid;
	__u32 flags;        /* JB_CSF_* */
	__u32 hierarchy_id; /* throttled: the cgroup's hierarchy (0: v2) */
	char waker_comm[JB_COMM_LEN];
	struct jb_klock_info klock; /* kernel_lock: the lock of its longest stretch */
};

/* A task that ran on the CPU a watched thread queued on, meanwhile. */
struct jb_cpu_task {
	__u32 pid, tid;
	__u64 ns;           /* 0: an empty entry */
	char comm[JB_COMM_LEN];
};

/* The first JB_CAUSE_TASKS processes that ran there (by tgid), and the rest. */
struct jb_cpu_tasks {
	struct jb_cpu_task task[JB_CAUSE_TASKS];
	__u64 other_ns;
};

/*
 * Block I/O and major faults of the thread in its task (bpf/causes_io.bpf.h):
 * the requests issued in its own context and their device latency (issue
 * to completion), and the range of addresses of its major faults.
 */
struct jb_cause_io {
	__u64 fault_lo, fault_hi; /* faulting addresses seen (x86 page_fault_user); 0: none */
	__u64 bytes;              /* of the requests issued */
	__u64 lat_ns;             /* device latency, summed over completed requests */
	__u64 lat_max_ns;
	__u32 faults;             /* faulting addresses seen */
	__u32 rqs;                /* requests issued */
	__u32 done;               /* of them completed while followed */
	__u32 dev;                /* the last request's device (kernel dev_t: major << 20 | minor) */
};

/* JB_EV_CAUSE: hdr.pid/tid the thread; seq its task. */
struct jb_cause_event {
	struct jb_header hdr;
	__u64 seq;
	__u64 kind_ns[JB_CAUSE_NR];  /* every kind's total, slots or not */
	__u32 nslices;
	__u32 flags;                 /* JB_CEF_* */
	__u32 preempted;             /* stretches begun by a preemption */
	__u32 pad;
	struct jb_cause_slice slices[JB_CAUSE_SLOTS];
	struct jb_cpu_tasks cpu;     /* ran on the CPUs it queued on, meanwhile */
	struct jb_cause_io io;       /* its block I/O and major faults */
	/* Kernel windows (reclaim, compaction, kernel_lock): wall time inside
	 * them in the task (on and off the CPU), how many, and the memory
	 * cgroup of the last memcg reclaim (kernfs id, hierarchy). */
	__u64 win_ns[JB_CAUSE_NR];
	__u32 win_count[JB_CAUSE_NR];
	__u64 reclaim_cgroup_id;
	__u32 reclaim_hierarchy_id;
	__u32 reclaim_memcg;         /* the last reclaim was a memcg's */
};

/* Why a subject was followed (jb_subject_event.role). */
enum jb_subject_role {
	JB_SUBJ_OWNER = 1,  /* the owner glibc's mutex names (a claim) */
	JB_SUBJ_PEER = 2,   /* woke this thread before: a likely peer */
	JB_SUBJ_CHAIN = 3,  /* the owner of the lock a subject itself waited on */
};

/*
 * JB_EV_SUBJECT: hdr.pid/tid the watched thread; seq its task. A thread it
 * may be waiting for, followed from since_ns to until_ns: its state split
 * (the part before its first switch seen is inferred from that switch:
 * switched out, it was running; switched in, queued; woken, asleep), the
 * wait it slept in last and who woke it. Its samples are in the perf ring.
 */
struct jb_subject_event {
	struct jb_header hdr;
	__u64 seq;
	__u64 since_ns, until_ns;
	__u64 state_ns[JB_ST_NR];
	__u64 wait_addr;       /* its own last wait: arg0 (futex address) */
	__u32 tid, pid;        /* the subject; pid 0 when it never switched */
	__u32 role;            /* enum jb_subject_role */
	__u32 samples;         /* its samples let through */
	__u32 samples_capped;  /* over the cap */
	__s32 wait_nr;         /* the syscall it slept in last (-1: none) */
	__u32 wait_claim;      /* that wait's owner claim */
	__u32 waker_pid, waker_tid; /* who woke it during the watch */
	__u32 via;             /* chain: the subject whose wait named it */
	__u32 flags;           /* JB_CSF_* of its last wait and wakeup */
	__u32 pad;
	char comm[JB_COMM_LEN];
	char waker_comm[JB_COMM_LEN];
};

/* JB_EV_EXIT */
struct jb_exit_event {
	struct jb_header hdr;
	__s32 exit_code;
	__u32 flags; /* JB_PROCF_* of the process */
	char comm[JB_COMM_LEN];
};

#define JB_MAX_USER_REGS 33       /* arm64: x0..x30, sp, pc */
#define JB_OFFCPU_STACK 16384     /* bytes of user stack copied at switch-out */
#define JB_KSTACK_DEPTH 64
#define JB_WAKER_DEPTH 32

/*
 * JB_EV_OFFCPU: what a perf sample would have held had the clock fired
 * while the thread was blocked. Registers are in PERF_SAMPLE_REGS_USER
 * order for the arch's mask (src/arch/regs.h); the stack starts at the
 * user SP.
 */
struct jb_offcpu_event {
	struct jb_header hdr;
	__u64 seq;                 /* task number on the thread */
	__u32 state;               /* JB_ST_SLEEPING or JB_ST_BLOCKED */
	__u32 kstack_bytes;        /* valid bytes of kstack */
	__u32 ustack_bytes;        /* valid bytes of ustack */
	__u32 nr_regs;             /* valid entries of regs (0: no user regs) */
	__u64 regs[JB_MAX_USER_REGS];
	__u64 kstack[JB_KSTACK_DEPTH];
	__u8 ustack[JB_OFFCPU_STACK];
};

/* JB_EV_WAKER: hdr.pid/tid are the woken thread. */
struct jb_waker_event {
	struct jb_header hdr;
	__u64 seq;
	__u32 waker_pid;
	__u32 waker_tid;
	char waker_comm[JB_COMM_LEN];
	__u32 kstack_bytes;
	__u32 ustack_bytes;        /* frame-pointer user stack, may be short */
	__u64 kstack[JB_WAKER_DEPTH];
	__u64 ustack[JB_WAKER_DEPTH];
};

/* JB_EV_TRACKED */
struct jb_tracked_event {
	struct jb_header hdr;
	__u64 proc_start_ns; /* group leader start: tells a reused pid apart */
};

/*
 * JB_EV_FRAME: what a Wayland client asked for or was told, seen in
 * libwayland-client (bpf/frames.bpf.h). Objects are protocol object ids,
 * per connection (`display`); times are the header's.
 */
enum jb_frame_kind {
	JB_FR_BEGIN = 1,     /* a wl_surface.frame callback's done was dispatched:
			      * args[0] its timestamp (ms), flags JB_FRF_* */
	JB_FR_COMMIT = 2,    /* wl_surface.commit */
	JB_FR_FEEDBACK = 3,  /* wp_presentation.feedback for `surface`'s next commit:
			      * `object` the feedback */
	JB_FR_PRESENTED = 4, /* that feedback's presented: args tv_sec_hi, tv_sec_lo,
			      * tv_nsec, refresh, seq_hi, seq_lo, flags */
	JB_FR_DISCARDED = 5, /* that feedback's discarded */
	JB_FR_OUTPUT_MODE = 6, /* wl_output.mode: args flags, width, height, refresh (mHz) */
	JB_FR_CLOCK = 7,     /* wp_presentation.clock_id: args[0] the clock */
	JB_FR_DESTROY = 8,   /* wl_surface.destroy */
};

#define JB_FRF_OTHER_QUEUE (1u << 0) /* dispatched on a queue not the display's default
				      * (EGL's or Vulkan's swap throttling) */
#define JB_FRF_IN_TASK (1u << 1)     /* the thread was inside a task: task_* are set */

struct jb_frame_event {
	struct jb_header hdr;
	__u32 kind;              /* enum jb_frame_kind */
	__u32 object;            /* the object the event is about */
	__u32 surface;           /* the wl_surface (0: none) */
	__u32 flags;             /* JB_FRF_* */
	__u64 display;           /* the connection's wl_display */
	__u64 task_seq;          /* the thread's current task (with JB_FRF_IN_TASK) */
	__u64 task_begin_ns;
	__u64 exec_ns;           /* the thread's se.sum_exec_runtime now */
	__u64 delay_ns;          /* its sched_info.run_delay now */
	__u64 state_ns[JB_ST_NR];/* the current task's split so far */
	__u64 delivery_ns;       /* that task's delivery: its wakeup -> the wait's return */
	__u32 args[8];
};

/* Value of the `procs` map, keyed by tgid. */
struct jb_proc {
	__u32 flags; /* JB_PROCF_* */
};

#endif /* JANKBPF_EVENTS_H */
