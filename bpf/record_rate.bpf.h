/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --record-rate and --record-rate-uid: how many long tasks a second one
 * process, and one uid, may have reported (issue 26: 400 processes with
 * 110 ms tasks made 2,600 records a second and overflowed the events ring
 * that everyone's records share). One decision per task, at its first
 * record: a task refused sends nothing -- no early mark (so no samples, no
 * pin), no crossing, no trace, no hang, no jank -- and each record it would
 * have sent is counted in its process's and uid's buckets.
 */
#ifndef JANKBPF_RECORD_RATE_BPF_H
#define JANKBPF_RECORD_RATE_BPF_H

enum jb_rate_state {
	JB_RATE_UNDECIDED = 0,
	JB_RATE_TAKEN = 1,   /* a token was taken: its records go out */
	JB_RATE_REFUSED = 2, /* over a rate: its records are counted, not sent */
};

static __always_inline bool record_limits(void)
{
	return record_rate || record_rate_uid;
}

/*
 * Tries to take a lost race again: another CPU taking a token from the same
 * bucket between our read and our compare-and-swap has not used it up. A
 * race once counted as an empty bucket, and the soak (7fbc665: 20 processes
 * of one uid, 10 janks a second against a bucket of 1,000) lost 2 of 18,000
 * janks that way, counted as rate-limited. Each lost try means another CPU
 * took its token, so a few tries cover all but a pile-up of CPUs; what
 * even they lose is counted as refused.
 */
#define JB_RATE_TRIES 8

/*
 * Takes a token from the bucket whose one word is `*full_at`: false when it
 * is empty. With `peek`, only says whether one is there.
 */
static __always_inline bool full_at_take(__u64 *full_at, __u64 now, __u32 per_sec, __u32 burst, bool peek)
{
	__u64 old = *(volatile __u64 *)full_at, next, seen;

	for (int i = 0; i < JB_RATE_TRIES; i++) {
		next = jb_rate_take_burst(old, now, per_sec, burst);
		if (peek || !next)
			return next != 0;
		seen = __sync_val_compare_and_swap(full_at, old, next);
		if (seen == old)
			return true;
		old = seen;
	}
	return false;  /* counted as refused, as a bucket that is empty */
}

/*
 * Takes a token from `key`'s bucket in `map` (made full if missing): false
 * when it is empty. With `peek`, only says whether one is there.
 */
static __always_inline bool bucket_take(void *map, __u32 key, __u32 per_sec, __u32 burst, __u64 now,
					bool peek)
{
	struct jb_record_bucket *b, fresh = {};

	if (!per_sec)
		return true;
	b = bpf_map_lookup_elem(map, &key);
	if (!b) {
		bpf_map_update_elem(map, &key, &fresh, BPF_NOEXIST);
		b = bpf_map_lookup_elem(map, &key);
		if (!b)
			return true;  /* nothing to count against */
	}
	return full_at_take(&b->full_at, now, per_sec, burst, peek);
}

/*
 * The events ring over half full (a burst faster than its reader, or a
 * reader starved of CPU): a reported task costs ~3 KB there (its early
 * mark, its end, its cause), so a uid's bucket of 1,000 is 3 MB, three
 * rings. While it is, a uid gets an eighth of its bucket: one user's 400
 * processes ending their tasks together cannot fill what every user's
 * records share (CI on 6f54552: 118 lost), and a uid that was quiet still
 * has its tokens.
 */
static __always_inline __u32 uid_burst_now(void)
{
	__u32 b = record_burst_uid;

	if (b >= 16 && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2)
		b /= 8;
	return b;
}

/*
 * The process's token, then its uid's: JB_RATE_TAKEN or JB_RATE_REFUSED.
 * The uid's is looked at first, so a process's token is not spent on a
 * task its uid refuses (only a race for the uid's last token still can).
 */
static __noinline __u32 record_token(__u32 tgid, __u32 uid, __u64 now, bool peek)
{
	__u32 uid_burst = uid_burst_now();

	if (!bucket_take(&uid_bucket, uid, record_rate_uid, uid_burst, now, true))
		return JB_RATE_REFUSED;
	if (!bucket_take(&record_bucket, tgid, record_rate, record_burst, now, peek))
		return JB_RATE_REFUSED;
	if (!peek && !bucket_take(&uid_bucket, uid, record_rate_uid, uid_burst, now, false))
		return JB_RATE_REFUSED;
	return peek ? JB_RATE_UNDECIDED : JB_RATE_TAKEN;
}

/*
 * Whether this task's crossing, trace, hang or end record may go out (the
 * first one takes the token for the whole task).
 */
static __always_inline bool record_allowed(struct jb_thread *t, __u64 now)
{
	if (!record_limits())
		return true;
	if (t->rate == JB_RATE_UNDECIDED)
		t->rate = record_token(t->pid, t->uid, now, false);
	return t->rate == JB_RATE_TAKEN;
}

/*
 * At the early mark (stacks wanted from now): a task of a process (or uid)
 * whose bucket is empty is refused now, so it costs nothing more; with a
 * token there, it is taken later, only if the task turns long.
 */
static __always_inline bool early_allowed(struct jb_thread *t, __u64 now)
{
	if (!record_limits() || t->rate == JB_RATE_TAKEN)
		return true;
	if (t->rate == JB_RATE_UNDECIDED)
		t->rate = record_token(t->pid, t->uid, now, true);
	return t->rate != JB_RATE_REFUSED;
}

static __always_inline void count_in(void *map, __u32 key)
{
	struct jb_record_bucket *b = bpf_map_lookup_elem(map, &key), fresh = {};

	if (!b) {
		bpf_map_update_elem(map, &key, &fresh, BPF_NOEXIST);
		b = bpf_map_lookup_elem(map, &key);
	}
	if (b)
		__sync_fetch_and_add(&b->limited, 1);
}

/* A jank or hang record this task would have sent, not sent: counted. */
static __noinline void count_refused(__u32 tgid, __u32 uid)
{
	count_in(&record_bucket, tgid);
	count_in(&uid_bucket, uid);
	stat_inc(JB_STAT_RECORD_RATE);
}

#endif /* JANKBPF_RECORD_RATE_BPF_H */
