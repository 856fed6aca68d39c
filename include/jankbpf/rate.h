/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-process token buckets of off-CPU captures (--offcpu-rate) and of
 * records (--record-rate, and per uid --record-rate-uid), included from the
 * BPF side and from the unit tests.
 *
 * A bucket of `per_sec` tokens, refilled at `per_sec` a second, kept as one
 * word: `full_at`, the time at which the bucket is full again (0 or any time
 * past: full). Each token taken pushes it one refill interval further; a
 * token is there while full_at - now leaves room for one more interval
 * below a full bucket's worth. One word so that BPF can update it with a
 * single compare-and-swap, without a lock (the verifier refuses
 * bpf_spin_lock in raw_tp programs, which the scan watchdog uses).
 */
#ifndef JANKBPF_RATE_H
#define JANKBPF_RATE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define JB_RATE_MAX 100000 /* --offcpu-rate ceiling: a 10 us interval */

/*
 * Takes one token at `now` (ns) from a bucket of `tokens` tokens refilled
 * at `per_sec` (1..JB_RATE_MAX) a second: the new full_at, or 0 when the
 * bucket is empty (refused, the bucket is left as it was).
 */
static inline __u64 jb_rate_take_burst(__u64 full_at, __u64 now, __u32 per_sec, __u32 tokens)
{
	__u64 interval = 1000000000ull / per_sec;
	__u64 burst = (__u64)tokens * interval; /* a full bucket, in ns */
	__u64 base = full_at > now ? full_at : now;

	/* Already full_at - now of the bucket is spent; one more must fit. */
	if (base - now + interval > burst)
		return 0;
	return base + interval;
}

/* A bucket of `per_sec` tokens (one second's worth): --offcpu-rate's. */
static inline __u64 jb_rate_take(__u64 full_at, __u64 now, __u32 per_sec)
{
	return jb_rate_take_burst(full_at, now, per_sec, per_sec);
}

/*
 * --record-rate and --record-rate-uid: a bucket per process (by tgid) and
 * per uid in LRU maps, with what it refused. `limited` counts the jank and
 * hang records not sent; userspace reads it per process.
 */
struct jb_record_bucket {
	__u64 full_at;
	__u64 limited;
};

#endif /* JANKBPF_RATE_H */
