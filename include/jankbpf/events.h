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
	X(RECORD_RATE, records_rate_limited, "jank and hang records not sent: over --record-rate(-uid)")

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
