/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Fields renamed across kernels, read the way each kernel has them (CO-RE:
 * the branch the running kernel lacks is dead at load time).
 */
#ifndef JANKBPF_CORE_FIXES_BPF_H
#define JANKBPF_CORE_FIXES_BPF_H

/* task_struct::state became __state in 5.14. */
struct task_struct___pre514 {
	volatile long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *task)
{
	struct task_struct___pre514 *old = (void *)task;

	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ(old, state);
}

#endif /* JANKBPF_CORE_FIXES_BPF_H */
