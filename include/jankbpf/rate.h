/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-process token bucket of off-CPU captures (--offcpu-rate), included
 * from the BPF side and from the unit tests.
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
 * Takes one token at `now` (ns) from a bucket of `per_sec` (1..JB_RATE_MAX)
 * tokens refilled at `per_sec` a second: the new full_at, or 0 when the
 * bucket is empty (the capture is refused, the bucket is left as it was).
 */
static inline __u64 jb_rate_take(__u64 full_at, __u64 now, __u32 per_sec)
{
	__u64 interval = 1000000000ull / per_sec;
	__u64 burst = (__u64)per_sec * interval; /* a full bucket, in ns */
	__u64 base = full_at > now ? full_at : now;

	/* Already full_at - now of the bucket is spent; one more must fit. */
	if (base - now + interval > burst)
		return 0;
	return base + interval;
}

#endif /* JANKBPF_RATE_H */
