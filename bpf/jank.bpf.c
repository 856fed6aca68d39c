// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jankbpf kernel side: measures every task of every watched thread and tells
 * userspace only about the ones that reach the threshold. One object, one
 * skeleton; the logic lives in headers by concern, and this file holds only
 * the entry points, in the order of a task's life:
 *
 *   core_fixes.bpf.h  fields renamed across kernels
 *   options.bpf.h     what userspace set before load
 *   maps.bpf.h        per-thread state and every map
 *   common.bpf.h      shared steps: find/track a thread, count, reserve a record
 *   record_rate.bpf.h --record-rate(-uid): which long tasks may be reported
 *   accounting.bpf.h  the running/runnable/sleeping/blocked split
 *   causes.bpf.h      why it was not running: slices, CPU thieves, subjects
 *   tasks.bpf.h       begin and end of a task, its record
 *   stacks.bpf.h      sample slots, off-CPU captures, wakers
 *   watchdog.bpf.h    crossing, trace bound and hang of a running task
 *   adopt.bpf.h       threads found asleep inside a wait at attach
 *   sched.bpf.h       switch, wakeup, exit, exec
 *   waits.bpf.h       the waits that bound tasks (include/jankbpf/hooks.h)
 *   markers.bpf.h     a runtime's own dispatch marks
 *   frames.bpf.h      Wayland clients' frames (libwayland-client uprobes)
 *   causes_kernel.bpf.h  causes inside the kernel: reclaim, compaction, kernel locks
 *
 * A task is the span from the return of an event-loop wait to the thread's
 * next entry into one (or a marker's span). The waits are hooked with BPF
 * trampolines on their kernel functions where the kernel has them (a
 * process that never waits pays nothing), else with per-syscall
 * tracepoints.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "jankbpf/events.h"
#include "jankbpf/hooks.h"
#include "jankbpf/rate.h"
#include "user_regs.bpf.h"
#include "core_fixes.bpf.h"

#include "options.bpf.h"
#include "maps.bpf.h"
#include "common.bpf.h"
#include "record_rate.bpf.h"
#include "accounting.bpf.h"
#include "causes.bpf.h"
#include "tasks.bpf.h"
#include "stacks.bpf.h"
#include "watchdog.bpf.h"
#include "adopt.bpf.h"
#include "sched.bpf.h"
#include "waits.bpf.h"
#include "markers.bpf.h"
#include "frames.bpf.h"
#include "causes_kernel.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* ---- waits: the syscalls of include/jankbpf/hooks.h --------------------- */

/*
 * As tracepoints: one program per direction and kind, attached by userspace
 * to each wait's sys_enter_/sys_exit_ tracepoint; the syscall's number (the
 * tracepoint's `nr`) names the wait through wait_of_nr. Four programs to
 * verify instead of one pair per syscall: the start is shorter by that much.
 * The wait's id, not its number, travels in the record (the same on every
 * arch).
 */
static __always_inline __u32 wait_of(long nr)
{
	if (nr < 0 || nr >= JB_MAX_SYSCALL_NR)
		return JB_WAIT_NR;
	return wait_of_nr[nr] ? wait_of_nr[nr] - 1 : JB_WAIT_NR;
}

SEC("tracepoint")
int jb_tp_wait_enter(struct syscall_trace_enter *ctx)
{
	return on_wait_enter(wait_of(ctx->nr));
}

SEC("tracepoint")
int jb_tp_wait_exit(struct syscall_trace_exit *ctx)
{
	__u32 id = wait_of(ctx->nr);

	return id < JB_WAIT_NR ? on_wait_exit(id) : 0;
}

SEC("tracepoint")
int jb_tp_cwait_enter(struct syscall_trace_enter *ctx)
{
	return on_child_wait_enter(wait_of(ctx->nr));
}

SEC("tracepoint")
int jb_tp_cwait_exit(struct syscall_trace_exit *ctx)
{
	__u32 id = wait_of(ctx->nr);

	return id < JB_WAIT_NR ? on_child_wait_exit(id) : 0;
}

/*
 * The same hooks as two raw tracepoints on every syscall's entry and exit
 * (x86_64 without trampolines, src/bpf/program_select.cpp): a raw
 * tracepoint's link detaches in about a millisecond, where each syscall
 * tracepoint's perf event waits for two grace periods under the kernel's
 * event_mutex as it closes (~40 ms each, one after another: most of a
 * second at the stop). The number names the wait as above; 32-bit syscalls
 * are numbered otherwise and left out, as the syscall tracepoints leave
 * them out. raw_child_of_nr: the child waits; setpgid_nr: the shell jobs'.
 */
const volatile __u8 raw_child_of_nr[JB_MAX_SYSCALL_NR] = {};
const volatile __s32 setpgid_nr = -1;

static __always_inline int raw_syscall(long nr, struct pt_regs *regs, bool enter)
{
	if (nr < 0 || nr >= JB_MAX_SYSCALL_NR)
		return 0;
	__u8 w = wait_of_nr[nr];

	if (!w && !(enter && nr == setpgid_nr))
		return 0;
	if (JB_TASK_IN_COMPAT_SYSCALL((struct task_struct *)bpf_get_current_task()))
		return 0;
	if (!w)
		return on_setpgid((__s32)JB_SYSCALL_ARG0(regs, false));
	if (raw_child_of_nr[nr])
		return enter ? on_child_wait_enter(w - 1) : on_child_wait_exit(w - 1);
	return enter ? on_wait_enter(w - 1) : on_wait_exit(w - 1);
}

/* tp_btf: the registers are read by a load, not a helper call (this runs
 * on every syscall of every process). */
SEC("tp_btf/sys_enter")
int BPF_PROG(jb_raw_sys_enter, struct pt_regs *regs, long id)
{
	return raw_syscall(id, regs, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(jb_raw_sys_exit, struct pt_regs *regs, long ret)
{
#if defined(__TARGET_ARCH_x86)
	long nr = (long)regs->orig_ax;
#else
	long nr = (long)regs->syscallno;
#endif
	return raw_syscall(nr, regs, false);
}

SEC("tracepoint/syscalls/sys_enter_setpgid")
int jb_job_setpgid(struct syscall_trace_enter *ctx)
{
	return on_setpgid((__s32)ctx->args[0]);
}

/*
 * The same hooks as BPF trampolines on the syscalls' kernel functions, where
 * the kernel has them: an attached syscall tracepoint puts every syscall of
 * every task on the slow path; fentry/fexit cost only the callers of the
 * function hooked. Userspace sets each program's target by name (slot 0 the
 * arch's native entry point, slots 1-2 the ia32 ones 32-bit processes call
 * on x86_64) and loads those whose function the kernel has.
 */
#define FN_WAIT_SLOT(kind, name, slot, on_enter, on_exit)                     \
	SEC("fentry")                                                         \
	int jb_##kind##fenter##slot##_##name(void *ctx)                       \
	{                                                                     \
		return on_enter(JB_WAIT_##name);                              \
	}                                                                     \
	SEC("fexit")                                                          \
	int jb_##kind##fexit##slot##_##name(void *ctx)                        \
	{                                                                     \
		return on_exit(JB_WAIT_##name);                               \
	}
#define FN_WAIT(kind, name, on_enter, on_exit)                                \
	FN_WAIT_SLOT(kind, name, 0, on_enter, on_exit)                        \
	FN_WAIT_SLOT(kind, name, 1, on_enter, on_exit)                        \
	FN_WAIT_SLOT(kind, name, 2, on_enter, on_exit)
#define FN_EVENT_WAIT(name) FN_WAIT(, name, on_wait_enter, on_wait_exit)
#define FN_CHILD_WAIT(name) FN_WAIT(cw, name, on_child_wait_enter, on_child_wait_exit)
JB_EVENT_WAITS(FN_EVENT_WAIT)
JB_CHILD_WAITS(FN_CHILD_WAIT)

SEC("fentry")
int BPF_PROG(jb_fsetpgid0, struct pt_regs *regs)
{
	return on_setpgid((__s32)JB_SYSCALL_ARG0(regs, false));
}

SEC("fentry")
int BPF_PROG(jb_fsetpgid1, struct pt_regs *regs)
{
	return on_setpgid((__s32)JB_SYSCALL_ARG0(regs, true));
}

/*
 * Once after the attach, with trampolines: every thread asleep inside a
 * wait whose return no trampoline will show (bpf/adopt.bpf.h).
 */
SEC("iter/task")
int jb_adopt(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;

	if (task)
		adopt_task(task);
	return 0;
}

/* ---- markers ------------------------------------------------------------ */

SEC("uprobe")
int jb_mark_begin(struct pt_regs *ctx)
{
	return marker_begin(ctx, bpf_get_attach_cookie(ctx), false);
}

SEC("uprobe")
int jb_mark_end(struct pt_regs *ctx)
{
	return marker_end();
}

SEC("usdt")
int jb_usdt_begin(struct pt_regs *ctx)
{
	return marker_begin(ctx, bpf_usdt_cookie(ctx), true);
}

SEC("usdt")
int jb_usdt_end(struct pt_regs *ctx)
{
	return marker_end();
}

/* ---- frames: libwayland-client's requests, listeners and events --------- */

SEC("uprobe")
int jb_wl_request(struct pt_regs *ctx)
{
	return wl_request(ctx);
}

SEC("uprobe")
int jb_wl_listener(struct pt_regs *ctx)
{
	return wl_listener(ctx);
}

SEC("uprobe")
int jb_wl_event(struct pt_regs *ctx)
{
	return wl_event(ctx);
}

/* A Wayland main thread's own cpu-clock: stacks of its frames past their deadline. */
SEC("perf_event")
int jb_frame_sample(void *ctx)
{
	return frame_sample();
}

/* ---- the scheduler: tp_btf (timer watchdog) or raw_tp (scan) ------------ */

SEC("tp_btf/sched_switch")
int BPF_PROG(jb_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	switch_hook(ctx, true, preempt, prev, next);
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(jb_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	switch_hook(ctx, false, preempt, prev, next);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(jb_wakeup_btf, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(jb_wakeup_raw, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_btf, struct task_struct *p)
{
	on_wakeup(true, p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(jb_wakeup_new_raw, struct task_struct *p)
{
	on_wakeup(false, p);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(jb_waking_btf, struct task_struct *p)
{
	waking_hook(ctx, true, p);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(jb_waking_raw, struct task_struct *p)
{
	waking_hook(ctx, false, p);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(jb_exec_btf, struct task_struct *p, pid_t old_pid)
{
	on_exec(old_pid);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(jb_exec_raw, struct task_struct *p, pid_t old_pid)
{
	on_exec(old_pid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jb_exit_btf, struct task_struct *task)
{
	__u32 tid = task->pid;

	on_exit(true, task);
	bpf_map_delete_elem(&timers, &tid); /* cancels a pending timer */
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(jb_exit_raw, struct task_struct *task)
{
	on_exit(false, task);
	return 0;
}

/* ---- causes fault and io (causes_io.bpf.h); attached one by one, as the
 * kernel has them (page_fault_user is x86's only) ----------------------- */

SEC("raw_tp/page_fault_user")
int BPF_PROG(jb_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	io_on_fault(address);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(jb_rq_issue, struct request *rq)
{
	io_on_issue(rq);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(jb_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	io_on_complete(rq);
	return 0;
}

/* ---- stacks and the scan watchdog: cpu-clock perf events ---------------- */

/*
 * The on-CPU sampler: a cpu-clock perf event per CPU, on only while some
 * watched task is long (long_tasks > 0). A sample is kept (and perf copies
 * the user registers and stack) only for a watched thread past early_ns, one
 * per sample_period_ns; every other tick costs a map lookup.
 */
SEC("perf_event")
int jb_sample(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_thread *t = thread_of_current(tid);

	__u64 now = bpf_ktime_get_ns();

	if (!t || !take_sample_slot(t, now)) {
		/* An owner or peer a long task waits for (causes.bpf.h). */
		if (causes_enabled && subjects_nr > 0 &&
		    jb_subject_sample(tid, bpf_get_current_pid_tgid() >> 32, now))
			return 1;
		return 0;
	}
	stat_inc(JB_STAT_SAMPLES);
	if (bpf_map_lookup_elem(&eager_pids, &t->pid)) {
		/* The ring's wakeup runs after this handler has written the sample. */
		struct jb_header *h = reserve_event(sizeof(*h));

		if (h) {
			fill_header(h, JB_EV_SAMPLED, t->pid, tid, now);
			bpf_ringbuf_submit(h, 0);
		}
	}
	return 1;
}

SEC("perf_event")
int jb_scan(void *ctx)
{
	bpf_for_each_map_elem(&in_task, scan_one, NULL, 0);
	return 0;
}
