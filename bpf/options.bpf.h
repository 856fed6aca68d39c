/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Options set by userspace before load (const volatile rodata: the verifier
 * prunes what they switch off), and the one counter userspace reads through
 * the mmapped .bss.
 */
#ifndef JANKBPF_OPTIONS_BPF_H
#define JANKBPF_OPTIONS_BPF_H

#define CLOCK_MONOTONIC 1
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_NOLOAD 0x400

/* Options, set by userspace between open and load. */
/* The wait-hook tracepoints: syscall number -> 1 + enum jb_wait_id (0: not
 * a wait). */
const volatile __u8 wait_of_nr[JB_MAX_SYSCALL_NR] = {};
/* A thread found inside an event-loop wait at attach (bpf/adopt.bpf.h)
 * names it by the number its registers hold: the same mapping, for the
 * event-loop waits only, native and (x86_64) ia32. */
const volatile __u8 adopt_wait_of_nr[JB_MAX_SYSCALL_NR] = {};
const volatile __u8 adopt_wait_of_nr32[JB_MAX_SYSCALL_NR] = {};
/* restart_syscall's number (native, ia32): a wait interrupted by a stop
 * (a signal, a debugger) and continued comes back as it, at the same pc. */
const volatile __u32 restart_nr = 0xffffffff, restart_nr32 = 0xffffffff;
const volatile __u64 threshold_ns = 150 * 1000000ull;
const volatile __u64 hang_ns = 3000 * 1000000ull;
const volatile __u64 ignore_startup_ns = 10 * 1000000000ull;
const volatile bool all_threads = false;   /* --threads all */
const volatile bool filter_pids = false;   /* only tgids in `procs` with TARGET */
const volatile bool filter_comm = false;   /* only group leaders named `comm` */
/* Targets were named (--pid, --comm, -- CMD): some may be JVMs whose loop
 * threads are watched (JB_PROCF_LOOP_THREADS). Off, the check is pruned. */
const volatile bool loop_threads_possible = false;
const volatile char target_comm[JB_COMM_LEN] = {};
const volatile __u32 self_tgid = 0;        /* never watch jankbpf itself */
/* Stacks: from early_ns into a task (0: no stacks), one per sample_period_ns,
 * up to sample_window_ns into it; off-CPU captures at switch-out. */
const volatile __u64 early_ns = 0;
const volatile __u64 sample_period_ns = 10 * 1000000ull;
const volatile __u64 sample_window_ns = 2000 * 1000000ull;
const volatile bool offcpu_enabled = false;
/* --offcpu-rate: off-CPU captures a second per process (0: no limit). */
const volatile __u32 offcpu_rate = 100;
/* The same rate for a uid's processes together, its bucket holding this many. */
const volatile __u32 offcpu_burst_uid = 60;
/* --record-rate, --record-rate-uid: long tasks reported a second per
 * process and per uid (0: no limit), each bucket holding `*_burst` tasks. */
const volatile __u32 record_rate = 0;
const volatile __u32 record_burst = 0;
const volatile __u32 record_rate_uid = 0;
const volatile __u32 record_burst_uid = 0;
/* Trace bound (0: no traces): a task past it gets a JB_EV_TRACE record. */
const volatile __u64 trace_ns = 0;
/* Markers: tell userspace of each thread tracked from now on, so it can
 * attach to marked binaries of that process that no probe covers yet. */
const volatile bool announce_tracked = false;
/*
 * Where per-thread state lives: task storage (the timer watchdog, on kernels
 * with bpf_task_from_pid) or the `threads` hash (the scan watchdog, whose
 * raw_tp and perf_event programs have no trusted task pointers and must
 * walk every watched thread). Task storage hangs off the task_struct: a
 * lookup is a pointer chase instead of hashing the tid, on every hook.
 */
const volatile bool state_in_task = false;
/* The kfunc is there (6.2+): the timer callback can find the task again.
 * Userspace decides, so a test can take the 6.1 path on a newer kernel. */
const volatile bool use_task_from_pid = false;
/* The scan watchdog: threads inside a task are listed in `in_task` for its
 * tick to walk. */
const volatile bool scan_watchdog = false;
/* The kernel's tick rate (CONFIG_HZ, from its config; 0: unknown): a task
 * whose jiffies say it is short ends without a clock read. */
const volatile __u32 tick_hz = 0;

/* Test seam (JANKBPF_TEST_HIDE_RETURNS): with syscall tracepoints, hide
 * the return of a wait a thread was found inside at attach, as trampolines
 * would, so the host's tests reach bpf/adopt.bpf.h's path. */
const volatile bool test_hide_adopted_return = false;
/* Test seam (JANKBPF_TEST_HIDE_SWITCHES_TO): a tid whose switch-ins
 * sched_switch ignores, as if no tracepoint showed them. */
const volatile __u32 test_hide_switches_to = 0;
/* Test seam (JANKBPF_TEST_HIDE_SWITCHES_FROM): a tid whose switch-outs
 * sched_switch ignores, as a kernel hides the switch to a host agent's
 * thread. */
const volatile __u32 test_hide_switches_from = 0;

/* Threads found asleep inside a wait by the attach-time task walk. */
__u32 adopted_nr = 0;

/* Threads now inside a task past early_ns: userspace keeps the sampling
 * clocks on while this is non-zero and off otherwise (read through the
 * mmapped .bss, no syscall). */
__s64 long_tasks = 0;

/* Entries added to `unarmed` since sched_switch last looked: one global
 * load on every switch while it is 0. */
__u32 unarmed_nr = 0;

/* Processes with JB_PROCF_LOOP_THREADS (set by userspace): while 0, a
 * thread that is not a main thread costs one global load more. */
__u32 loop_thread_procs = 0;

#endif /* JANKBPF_OPTIONS_BPF_H */
