/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one arch-specific piece of the BPF side: copying a task's user
 * registers out of pt_regs in the order perf's PERF_SAMPLE_REGS_USER uses
 * for the mask in src/arch/regs.h, so off-CPU captures and perf samples
 * feed the same unwinder.
 */
#ifndef JANKBPF_USER_REGS_BPF_H
#define JANKBPF_USER_REGS_BPF_H

#include "jankbpf/events.h"

#if defined(__TARGET_ARCH_x86)
/* mask 0xff01ff: ax bx cx dx si di bp sp ip r8..r15 */
#define JB_USER_REGS 17
static __always_inline void jb_copy_user_regs(__u64 *out, struct pt_regs *r)
{
	out[0] = BPF_CORE_READ(r, ax);
	out[1] = BPF_CORE_READ(r, bx);
	out[2] = BPF_CORE_READ(r, cx);
	out[3] = BPF_CORE_READ(r, dx);
	out[4] = BPF_CORE_READ(r, si);
	out[5] = BPF_CORE_READ(r, di);
	out[6] = BPF_CORE_READ(r, bp);
	out[7] = BPF_CORE_READ(r, sp);
	out[8] = BPF_CORE_READ(r, ip);
	out[9] = BPF_CORE_READ(r, r8);
	out[10] = BPF_CORE_READ(r, r9);
	out[11] = BPF_CORE_READ(r, r10);
	out[12] = BPF_CORE_READ(r, r11);
	out[13] = BPF_CORE_READ(r, r12);
	out[14] = BPF_CORE_READ(r, r13);
	out[15] = BPF_CORE_READ(r, r14);
	out[16] = BPF_CORE_READ(r, r15);
}
#define JB_USER_SP(regs) ((regs)[7])
/* A syscall's first argument in the pt_regs its kernel function gets
 * (ia32 entry points take them in the i386 order). */
#define JB_SYSCALL_ARG0(regs, compat) \
	((compat) ? BPF_CORE_READ((regs), bx) : BPF_CORE_READ((regs), di))
/* A task's user registers at its kernel entry: the syscall it is in (a page
 * fault puts its error code there, an interrupt its vector), the user pc. */
#define JB_REGS_SYSCALL_NR(regs) ((__u64)BPF_CORE_READ((regs), orig_ax))
#define JB_REGS_PC(regs) ((__u64)BPF_CORE_READ((regs), ip))
/* Inside a 32-bit (ia32) syscall: TS_COMPAT in thread_info.status, set at
 * a compat entry and cleared on the way back to user space. */
#define JB_TS_COMPAT 0x0002
#define JB_TASK_IN_COMPAT_SYSCALL(task) ((BPF_CORE_READ((task), thread_info.status) & JB_TS_COMPAT) != 0)
#elif defined(__TARGET_ARCH_arm64)
/* mask 0x1ffffffff: x0..x30, sp, pc */
#define JB_USER_REGS 33
static __always_inline void jb_copy_user_regs(__u64 *out, struct pt_regs *r)
{
	bpf_probe_read_kernel(out, 33 * sizeof(__u64), &r->user_regs);
}
#define JB_USER_SP(regs) ((regs)[31])
#define JB_SYSCALL_ARG0(regs, compat) BPF_CORE_READ((regs), regs[0])
/* -1 (NO_SYSCALL) outside a syscall: every other exception entry sets it. */
#define JB_REGS_SYSCALL_NR(regs) ((__u64)(__s64)BPF_CORE_READ((regs), syscallno))
#define JB_REGS_PC(regs) ((__u64)BPF_CORE_READ((regs), pc))
#define JB_TASK_IN_COMPAT_SYSCALL(task) false
#else
#error "jankbpf's BPF side supports x86 and arm64"
#endif

_Static_assert(JB_USER_REGS <= JB_MAX_USER_REGS, "register array too small");

#endif
