/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Causes `fault` and `io`: major page faults and block I/O a watched thread
 * waits for inside a task (README, "Why"). Included by causes.bpf.h.
 *
 * Evidence, all of it at moments the kernel gives us:
 *  - At the switch-out in D (uninterruptible) of a thread inside a task, its
 *    saved user registers say whether it is in a syscall. None: it came in
 *    by an exception, a page fault, and waits for the page (a major fault;
 *    a minor one does not sleep). In a file I/O syscall (fsync, read, ...)
 *    or with block requests of its own in flight: block I/O.
 *  - exceptions:page_fault_user (x86 only) gives the faulting address at
 *    the fault's entry, in the thread's context; its last one is the
 *    address of the fault it then sleeps in. Other arches have no such
 *    tracepoint: the fault is known, its address is not.
 *  - block:block_rq_issue in the thread's own context (its plug flushed as
 *    it submits or goes to sleep) names its requests: device, bytes; their
 *    block_rq_complete gives the device latency. A request dispatched later
 *    from another context (kblockd, a completion) is not seen as its own.
 *
 * Cost: the fault and issue hooks stop at one lookup of the current thread
 * (as the wait hooks do) unless it is a watched thread inside a task; the
 * completion hook, in interrupt context, stops at one global load while no
 * request of such a thread is in flight.
 */
#ifndef JANKBPF_CAUSES_IO_BPF_H
#define JANKBPF_CAUSES_IO_BPF_H

/* Per watched thread that faulted or issued I/O in its current task. LRU:
 * a thread that exits or stops being watched just ages out. */
struct jb_io_thread {
	__u64 seq;          /* the task these are of */
	__u64 fault_addr;   /* its last page fault entry's address */
	__u64 counted_addr; /* the last one counted in io.faults */
	__u32 inflight;     /* its requests issued and not completed */
	__u32 pad;
	struct jb_cause_io io;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct jb_io_thread);
} io_threads SEC(".maps");

/* Requests of such threads in flight, by struct request address. */
struct jb_io_rq {
	__u64 issue_ns;
	__u64 seq;
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct jb_io_rq);
} io_rqs SEC(".maps");

__s64 io_rqs_nr = 0; /* entries in io_rqs: the completion hook stops at this while 0 */

#define JB_MINORBITS 20

/* The io state of thread tid for task seq; made afresh when create. */
static __always_inline struct jb_io_thread *io_thread_of(__u32 tid, __u64 seq, bool create)
{
	struct jb_io_thread *it = bpf_map_lookup_elem(&io_threads, &tid);
	struct jb_io_thread fresh = {};

	if (it && it->seq == seq)
		return it;
	if (!create)
		return NULL;
	fresh.seq = seq;
	bpf_map_update_elem(&io_threads, &tid, &fresh, BPF_ANY);
	return bpf_map_lookup_elem(&io_threads, &tid);
}

/* The current thread if it is watched and inside a task. */
static __always_inline struct jb_thread *io_watched_current(__u32 *tid)
{
	struct jb_thread *t;

	if (!causes_enabled)
		return NULL;
	*tid = (__u32)bpf_get_current_pid_tgid();
	t = thread_of_current(*tid);
	return t && t->in_task ? t : NULL;
}

struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* A request's device as the kernel's dev_t (major << 20 | minor). */
static __always_inline __u32 rq_dev(struct request *rq)
{
	__u32 dev = 0;
	struct gendisk *disk = NULL;

	if (bpf_core_field_exists(rq->part))
		dev = BPF_CORE_READ(rq, part, bd_dev);
	if (dev)
		return dev;
	if (bpf_core_field_exists(rq->q->disk))
		disk = BPF_CORE_READ(rq, q, disk);
	else if (bpf_core_field_exists(((struct request___old *)rq)->rq_disk))
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	if (!disk)
		return 0;
	return (__u32)BPF_CORE_READ(disk, major) << JB_MINORBITS | (__u32)BPF_CORE_READ(disk, first_minor);
}

/* exceptions:page_fault_user: the address a watched thread faults on. */
static __always_inline void io_on_fault(__u64 addr)
{
	struct jb_io_thread *it;
	struct jb_thread *t;
	__u32 tid;

	t = io_watched_current(&tid);
	if (!t)
		return;
	it = io_thread_of(tid, t->seq, true);
	if (it)
		it->fault_addr = addr;
}

/* block:block_rq_issue. A request seen before is issued again (a requeue):
 * its latency starts over; else it is the current thread's, if watched. */
static __always_inline void io_on_issue(struct request *rq)
{
	struct jb_io_rq r = {}, *old;
	struct jb_io_thread *it;
	struct jb_thread *t;
	__u64 key = (__u64)rq;
	__u32 tid;

	if (!causes_enabled)
		return;
	if (io_rqs_nr > 0) {
		old = bpf_map_lookup_elem(&io_rqs, &key);
		if (old) {
			old->issue_ns = bpf_ktime_get_ns();
			return;
		}
	}
	t = io_watched_current(&tid);
	if (!t)
		return;
	it = io_thread_of(tid, t->seq, true);
	if (!it)
		return;
	it->io.rqs++;
	it->io.bytes += BPF_CORE_READ(rq, __data_len);
	it->io.dev = rq_dev(rq);
	r.issue_ns = bpf_ktime_get_ns();
	r.seq = t->seq;
	r.tid = tid;
	if (bpf_map_update_elem(&io_rqs, &key, &r, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&io_rqs_nr, 1);
		it->inflight++;
	}
}

/* block:block_rq_complete: a followed request's device latency. */
static __always_inline void io_on_complete(struct request *rq)
{
	struct jb_io_thread *it;
	struct jb_io_rq *r;
	__u64 key = (__u64)rq, lat, seq;
	__u32 tid;

	if (!causes_enabled || io_rqs_nr <= 0)
		return;
	r = bpf_map_lookup_elem(&io_rqs, &key);
	if (!r)
		return;
	lat = bpf_ktime_get_ns() - r->issue_ns;
	tid = r->tid;
	seq = r->seq;
	if (bpf_map_delete_elem(&io_rqs, &key) == 0)
		__sync_fetch_and_add(&io_rqs_nr, -1);
	it = io_thread_of(tid, seq, false);
	if (!it)
		return;
	it->io.done++;
	it->io.lat_ns += lat;
	if (lat > it->io.lat_max_ns)
		it->io.lat_max_ns = lat;
	if (it->inflight)
		it->inflight--;
}

/*
 * At the switch-out in D of a watched thread inside a task (its syscall
 * evidence read): a page fault (no syscall) or block I/O (a file I/O
 * syscall, or its requests in flight). arg0 becomes the faulting address
 * where known.
 */
__noinline int jb_io_evidence(struct jb_cause_open *o, __u32 tid, __u64 seq)
{
	struct jb_io_thread *it;
	__u32 cls = JB_SC_NONE;

	if (!o)
		return 0;
	it = bpf_map_lookup_elem(&io_threads, &tid);
	if (it && it->seq != seq)
		it = NULL;
	/* -1: an exception (x86's page fault stores it, arm64 every non-svc
	 * entry); an x86 interrupt leaves ~vector (<= -33): the cgroup freezer
	 * on return to user, not a fault. */
	if (o->nr == -1) {
		o->flags |= JB_CSF_FAULT;
		o->arg0 = o->arg1 = 0;
		if (!it || !it->fault_addr)
			return 0;
		__u64 a = it->fault_addr;

		o->arg0 = a;
		o->flags |= JB_CSF_FAULT_ADDR;
		if (a == it->counted_addr)
			return 0; /* the same fault, asleep again */
		it->counted_addr = a;
		it->io.faults++;
		if (!it->io.fault_lo || a < it->io.fault_lo)
			it->io.fault_lo = a;
		if (a > it->io.fault_hi)
			it->io.fault_hi = a;
		return 0;
	}
	if (o->nr >= 0 && o->nr < JB_MAX_SYSCALL_NR && !(o->flags & JB_CSF_COMPAT))
		cls = cause_class_of_nr[o->nr];
	if (cls == JB_SC_FILE_IO || (it && it->inflight))
		o->flags |= JB_CSF_IO;
	return 0;
}

/* Into the task's JB_EV_CAUSE record. */
__noinline int jb_io_fill(struct jb_cause_event *e, __u32 tid, __u64 seq)
{
	struct jb_io_thread *it;

	if (!e)
		return 0;
	it = bpf_map_lookup_elem(&io_threads, &tid);
	if (!it || it->seq != seq)
		return 0;
	e->io = it->io;
	return 0;
}

#endif /* JANKBPF_CAUSES_IO_BPF_H */
