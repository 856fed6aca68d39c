/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every syscall whose entry and return bound tasks, in one table: the BPF
 * side generates its programs from it (bpf/jank.bpf.c) and userspace its
 * list of them (src/bpf/hooks.cpp), so nobody picks programs by parsing
 * their names. An architecture lacks some (arm64 has no epoll_wait, poll or
 * select); userspace loads only the hooks whose kernel function or
 * tracepoint exists.
 */
#ifndef JANKBPF_HOOKS_H
#define JANKBPF_HOOKS_H

/* Event-loop waits: entry ends the task, return starts the next. The epoll
 * waits first: a JVM's loop threads are watched in those only
 * (eligible_wait in bpf/common.bpf.h). */
#define JB_EVENT_WAITS(X) \
	X(epoll_wait) X(epoll_pwait) X(epoll_pwait2) X(poll) X(ppoll) X(select) X(pselect6)
/* A job-control shell's waits for its foreground job (see bpf/waits.bpf.h). */
#define JB_CHILD_WAITS(X) X(wait4) X(waitid)

/* Syscall numbers below this index the BPF side's wait_of_nr table. */
#define JB_MAX_SYSCALL_NR 512

/* jb_task_event.wait_syscall: which wait a task began from. */
enum jb_wait_id {
#define JB_X(name) JB_WAIT_##name,
	JB_EVENT_WAITS(JB_X) JB_CHILD_WAITS(JB_X)
#undef JB_X
	JB_WAIT_NR,
};

#endif /* JANKBPF_HOOKS_H */
