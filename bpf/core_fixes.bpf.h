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

/*
 * `btf`: task is a trusted pointer (a tp_btf argument, an acquired task),
 * read with a plain load; else with a probe read (raw_tp). A constant at
 * every call site. The sched_switch path read it with a probe-read helper
 * call on every switch-out of a watched thread.
 */
static __always_inline long task_state(bool btf, struct task_struct *task)
{
	struct task_struct___pre514 *old = (void *)task;

	if (bpf_core_field_exists(task->__state))
		return btf ? task->__state : BPF_CORE_READ(task, __state);
	return btf ? old->state : BPF_CORE_READ(old, state);
}

#endif /* JANKBPF_CORE_FIXES_BPF_H */
