/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Frames of Wayland clients (issue 28), seen through libwayland-client's own
 * entry points, attached to the library file for every process that maps it:
 *
 *   wl_proxy_marshal_array_flags  every request (all the marshal variants
 *                                 call it): wl_surface.frame, .commit,
 *                                 .destroy, wp_presentation.feedback
 *   wl_proxy_add_listener         names the proxy a frame or feedback
 *                                 request just made (its new id)
 *   the library's ffi_call PLT    every event dispatched to a listener
 *     stub                        (wl_closure_invoke): wl_callback.done,
 *                                 wp_presentation_feedback.presented and
 *                                 .discarded, wl_output.mode, clock_id
 *
 * Objects are told apart by their interface's name string and their
 * protocol id, read from the proxy (struct wl_object's interface,
 * implementation, id, then wl_proxy's display and queue: unchanged since
 * libwayland 1.0); an event's opcode by the listener function called. Only
 * the watched threads' events are read; a process that does not speak
 * Wayland never traps here. Everything else -- which frame a commit ends,
 * its deadline and jank type -- is userspace's (src/frame/).
 *
 * The kernel keeps one thing itself: each thread's open frame and its
 * deadline, so that jb_frame_sample (a cpu-clock event per Wayland main
 * thread, ticking only while it runs) keeps stacks of a frame past its
 * deadline from that moment on.
 */
#ifndef JANKBPF_FRAMES_BPF_H
#define JANKBPF_FRAMES_BPF_H

/* A function's sixth argument in a uprobe's user registers (libbpf's
 * bpf_tracing.h stops at the fifth on the libbpf Debian 12 ships). */
#if defined(__TARGET_ARCH_x86)
#define JB_UPROBE_ARG6(ctx) ((ctx)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define JB_UPROBE_ARG6(ctx) (((struct user_pt_regs *)(ctx))->regs[5])
#endif

/* Options (rodata). */
const volatile bool frames_enabled = false;
const volatile __u64 frame_interval_ns = 16666667; /* until the process's own is known */
const volatile __u64 frame_sample_period_ns = 4000000;

/* Userspace drains the frames ring on a timer while this is set (mmapped
 * .bss): records need not wake it. */
__u32 frames_polled = 0;

/* Per watched thread that takes part in frames. */
struct jb_frame_thread {
	__u64 open_ns;        /* its open frame began (0: none) */
	__u64 deadline_ns;
	__u64 last_sample_ns;
	__u32 surface;        /* of the open frame */
	__u32 pend_kind;      /* the request whose new proxy the next add_listener names */
	__u32 pend_surface;
	__u32 pad;
};

#define JB_PEND_FRAME 1
#define JB_PEND_FEEDBACK 2

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct jb_frame_thread);
} frame_threads SEC(".maps");

/* A frame callback or feedback object of a connection -> its wl_surface. */
struct jb_wl_key {
	__u64 display;
	__u32 tgid;
	__u32 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct jb_wl_key);
	__type(value, __u32);
} frame_callbacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct jb_wl_key);
	__type(value, __u32);
} frame_feedbacks SEC(".maps");

/* A process's refresh interval, once userspace knows it (flag, output, feedback). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} frame_interval SEC(".maps");

/* Frame events: a few per frame, drained by userspace every 500 ms. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} frames SEC(".maps");

/* The head of a proxy: struct wl_object, then wl_proxy's display and queue. */
struct jb_wl_proxy {
	__u64 interface;
	__u64 implementation;
	__u32 id;
	__u32 pad;
	__u64 display;
	__u64 queue;
};

enum jb_wl_iface {
	JB_WL_OTHER = 0,
	JB_WL_SURFACE,
	JB_WL_CALLBACK,
	JB_WL_PRESENTATION,
	JB_WL_FEEDBACK,
	JB_WL_OUTPUT,
};

#define JB_WL_NAME 32

/*
 * What each interface a process's proxies point at is, so that its name is
 * read once: (process, its start, the wl_interface's address) -> 1 + enum
 * jb_wl_iface. An interface is static data of the library or program that
 * defines it; the start time tells a reused pid apart.
 */
struct jb_iface_key {
	__u64 interface;
	__u64 proc_start_ns;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct jb_iface_key);
	__type(value, __u8);
} wl_ifaces SEC(".maps");

static __always_inline bool name_is(const char *name, const char *lit, int n)
{
	for (int i = 0; i < n; i++)
		if (name[i] != lit[i])
			return false;
	return true;
}

/* Which interface a proxy is, by its wl_interface's name. */
static __noinline __u32 wl_iface_name(__u64 interface)
{
	char name[JB_WL_NAME] = {};
	__u64 name_ptr = 0;

	if (!interface || bpf_probe_read_user(&name_ptr, sizeof(name_ptr), (void *)interface) || !name_ptr)
		return JB_WL_OTHER;
	if (bpf_probe_read_user_str(name, sizeof(name), (void *)name_ptr) <= 0)
		return JB_WL_OTHER;
	if (name[0] == 'w' && name[1] == 'l' && name[2] == '_') {
		if (name_is(name, "wl_surface", 11))
			return JB_WL_SURFACE;
		if (name_is(name, "wl_callback", 12))
			return JB_WL_CALLBACK;
		if (name_is(name, "wl_output", 10))
			return JB_WL_OUTPUT;
	} else if (name[0] == 'w' && name[1] == 'p' && name[2] == '_') {
		if (name_is(name, "wp_presentation", 16))
			return JB_WL_PRESENTATION;
		if (name_is(name, "wp_presentation_feedback", 25))
			return JB_WL_FEEDBACK;
	}
	return JB_WL_OTHER;
}

static __always_inline __u32 wl_iface_of(struct jb_thread *t, __u64 interface)
{
	struct jb_iface_key key = {.interface = interface, .proc_start_ns = t->proc_start_ns, .tgid = t->pid};
	__u8 *cached = bpf_map_lookup_elem(&wl_ifaces, &key);
	__u8 kind;

	if (cached)
		return *cached - 1;
	kind = wl_iface_name(interface);
	__u8 v = kind + 1;
	bpf_map_update_elem(&wl_ifaces, &key, &v, BPF_ANY);
	return kind;
}

/*
 * The listener functions of a process whose events are of no interest
 * here (a wl_buffer's release, wl_display's delete_id, input): (process,
 * its start, the function) -> 1 + the interface first seen calling it. An
 * event for such a function costs a lookup instead of three reads. (A
 * function a client used both for such an event and as a frame callback's
 * done would hide its frames: clients give frame callbacks a handler of
 * their own.)
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct jb_iface_key);
	__type(value, __u8);
} wl_fns SEC(".maps");

/* The current thread, if it is watched; frames are measured only past the
 * startup time (`checking`), while what the compositor says of itself (its
 * clock, the outputs' modes) is wanted from the first event. */
static __always_inline struct jb_thread *frame_thread_ok(__u64 id, bool checking)
{
	struct jb_thread *t;

	if (!eligible_thread(id))
		return NULL;
	t = thread_of_current((__u32)id);
	if (!t || (checking && bpf_ktime_get_ns() - t->proc_start_ns < ignore_startup_ns))
		return NULL;
	return t;
}

static __always_inline struct jb_frame_thread *frame_thread_of(__u32 tid, bool create)
{
	struct jb_frame_thread *ft = bpf_map_lookup_elem(&frame_threads, &tid);

	if (ft || !create)
		return ft;
	struct jb_frame_thread fresh = {};
	bpf_map_update_elem(&frame_threads, &tid, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&frame_threads, &tid);
}

/* What one frame event says (BPF functions take at most five arguments). */
struct jb_frame_what {
	__u32 kind, object, surface, flags;
	__u64 display;
	__u32 args[8];
};

/* A frame event with the thread's scheduler counters and its task's split. */
static __noinline void emit_frame(struct jb_thread *t, struct jb_frame_what *w, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct jb_frame_event *e = bpf_ringbuf_reserve(&frames, sizeof(*e), 0);
	struct sched_counts c;
	__u32 flags = w->flags;

	if (!e) {
		stat_inc(JB_STAT_FRAME_EVENTS_LOST);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_header(&e->hdr, JB_EV_FRAME, id >> 32, (__u32)id, now);
	e->kind = w->kind;
	e->object = w->object;
	e->surface = w->surface;
	e->display = w->display;
	if (t->in_task) {
		flags |= JB_FRF_IN_TASK;
		e->task_seq = t->seq;
		e->task_begin_ns = t->begin_ns;
		e->delivery_ns = t->delivery_ns;
		split_now(t, now, e->state_ns);
	}
	e->flags = flags;
	current_counts(&c);
	e->exec_ns = c.exec_ns;
	e->delay_ns = c.delay_ns;
	for (int i = 0; i < 8; i++)
		e->args[i] = w->args[i];
	bpf_ringbuf_submit(e, frames_polled ? BPF_RB_NO_WAKEUP : 0);
}

static __always_inline __u64 interval_of(__u32 tgid)
{
	__u64 *v = bpf_map_lookup_elem(&frame_interval, &tgid);

	return v && *v ? *v : frame_interval_ns;
}

/*
 * A late frame's thread slept inside it: the capture stashed when it went
 * to sleep (stacks.bpf.h), if it is of this task and of this frame, is sent
 * as a long task's would be (within --offcpu-rate).
 */
static __noinline void frame_offcpu(__u32 tid, struct jb_thread *t, __u64 open_ns)
{
	struct jb_offcpu_event *e;

	if (!t->in_task || t->stash_seq != t->seq)
		return;
	e = stash_of(bpf_get_current_task_btf(), tid, false);
	if (!e || e->seq != t->seq || e->hdr.time_ns < open_ns)
		return;
	if (offcpu_token(t->pid, t->uid, bpf_ktime_get_ns()))
		send_offcpu(t, e);
	else
		t->stash_seq = 0;
}

/* wl_proxy_marshal_array_flags(proxy, opcode, interface, version, flags, args) */
static __noinline int wl_request(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct jb_thread *t = frame_thread_ok(id, true);
	struct jb_frame_what w = {};
	struct jb_frame_thread *ft;
	struct jb_wl_proxy p;
	__u32 opcode, kind;

	if (!t)
		return 0;
	if (bpf_probe_read_user(&p, sizeof(p), (void *)PT_REGS_PARM1(ctx)))
		return 0;
	opcode = (__u32)PT_REGS_PARM2(ctx);
	kind = wl_iface_of(t, p.interface);
	if (kind == JB_WL_SURFACE) {
		w.object = p.id;
		w.surface = p.id;
		w.display = p.display;
		if (opcode == 3) {         /* frame: its callback is named by add_listener */
			ft = frame_thread_of((__u32)id, true);
			if (ft) {
				ft->pend_kind = JB_PEND_FRAME;
				ft->pend_surface = p.id;
			}
		} else if (opcode == 6) {  /* commit */
			ft = frame_thread_of((__u32)id, false);
			if (ft && ft->open_ns && ft->surface == p.id) {
				/* Past its deadline, the frame's off-CPU stack (where it
				 * last slept, stashed at that switch-out) goes out too. */
				if (offcpu_enabled && bpf_ktime_get_ns() > ft->deadline_ns)
					frame_offcpu((__u32)id, t, ft->open_ns);
				ft->open_ns = 0;
			}
			w.kind = JB_FR_COMMIT;
			emit_frame(t, &w, bpf_ktime_get_ns());
		} else if (opcode == 0) {  /* destroy */
			w.kind = JB_FR_DESTROY;
			emit_frame(t, &w, bpf_ktime_get_ns());
		}
	} else if (kind == JB_WL_PRESENTATION && opcode == 1) {
		/* feedback(surface, new_id): args[0].o is the surface's proxy */
		__u64 surface_proxy = 0;
		struct jb_wl_proxy s;

		if (bpf_probe_read_user(&surface_proxy, sizeof(surface_proxy), (void *)JB_UPROBE_ARG6(ctx)) ||
		    !surface_proxy || bpf_probe_read_user(&s, sizeof(s), (void *)surface_proxy))
			return 0;
		ft = frame_thread_of((__u32)id, true);
		if (ft) {
			ft->pend_kind = JB_PEND_FEEDBACK;
			ft->pend_surface = s.id;
		}
	}
	return 0;
}

/* wl_proxy_add_listener(proxy, implementation, data): the new frame callback or feedback. */
static __noinline int wl_listener(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jb_frame_what w = {};
	struct jb_frame_thread *ft;
	struct jb_thread *t;
	struct jb_wl_proxy p;
	struct jb_wl_key key = {};
	__u32 kind, pend, surface;

	ft = bpf_map_lookup_elem(&frame_threads, &tid);
	if (!ft || !ft->pend_kind)
		return 0;
	pend = ft->pend_kind;
	surface = ft->pend_surface;
	ft->pend_kind = 0;
	t = thread_of_current(tid);
	if (!t || bpf_probe_read_user(&p, sizeof(p), (void *)PT_REGS_PARM1(ctx)))
		return 0;
	kind = wl_iface_of(t, p.interface);
	key.display = p.display;
	key.tgid = id >> 32;
	key.id = p.id;
	if (pend == JB_PEND_FRAME && kind == JB_WL_CALLBACK) {
		bpf_map_update_elem(&frame_callbacks, &key, &surface, BPF_ANY);
	} else if (pend == JB_PEND_FEEDBACK && kind == JB_WL_FEEDBACK) {
		bpf_map_update_elem(&frame_feedbacks, &key, &surface, BPF_ANY);
		w.kind = JB_FR_FEEDBACK;
		w.object = p.id;
		w.surface = surface;
		w.display = p.display;
		emit_frame(t, &w, bpf_ktime_get_ns());
	}
	return 0;
}

/* The arguments of an event whose signature is all 'u'/'i': each a slot of
 * closure->args (union wl_argument, 8 bytes), contiguous from *avalue[2]. */
static __always_inline bool event_args(__u64 *avalue, __u32 *out, int n)
{
	__u64 first = 0, slots[8] = {};

	if (bpf_probe_read_user(&first, sizeof(first), &avalue[2]) || !first)
		return false;
	if (bpf_probe_read_user(slots, n * sizeof(__u64), (void *)first))
		return false;
	for (int i = 0; i < 8; i++)
		if (i < n)
			out[i] = (__u32)slots[i];
	return true;
}

/* wl_callback.done of a frame callback: a frame of its surface begins. */
static __noinline int wl_frame_done(struct jb_thread *t, struct jb_wl_key *key, struct jb_wl_proxy *p,
				    __u64 *avalue)
{
	__u64 now = bpf_ktime_get_ns(), default_queue = 0;
	struct jb_frame_what w = {};
	struct jb_frame_thread *ft;
	__u32 *surface = bpf_map_lookup_elem(&frame_callbacks, key);

	if (!surface)
		return 0;
	w.surface = *surface;
	bpf_map_delete_elem(&frame_callbacks, key);
	event_args(avalue, w.args, 1);
	/* The display's own proxy holds its default queue. */
	if (!bpf_probe_read_user(&default_queue, sizeof(default_queue),
				 (void *)(p->display + __builtin_offsetof(struct jb_wl_proxy, queue))) &&
	    default_queue && default_queue != p->queue)
		w.flags |= JB_FRF_OTHER_QUEUE;
	ft = frame_thread_of((__u32)bpf_get_current_pid_tgid(), true);
	if (ft) {
		ft->open_ns = now;
		ft->deadline_ns = now + interval_of(key->tgid);
		ft->surface = w.surface;
		ft->last_sample_ns = 0;
	}
	w.kind = JB_FR_BEGIN;
	w.object = p->id;
	w.display = p->display;
	emit_frame(t, &w, now);
	return 0;
}

/* ffi_call(cif, fn, rvalue, avalue) from wl_closure_invoke: avalue[1]
 * points at the target object pointer, `fn` is implementation[opcode]. */
static __noinline int wl_event(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct jb_thread *t = frame_thread_ok(id, false);
	__u64 *avalue = (__u64 *)PT_REGS_PARM4(ctx);
	__u64 fn = PT_REGS_PARM2(ctx);
	__u64 target_slot = 0, target = 0, impl[3] = {};
	struct jb_frame_what w = {};
	struct jb_wl_proxy p;
	struct jb_wl_key key = {};
	__u32 kind, *surface;

	if (!t)
		return 0;
	struct jb_iface_key fkey = {.interface = fn, .proc_start_ns = t->proc_start_ns, .tgid = t->pid};
	__u8 *seen = bpf_map_lookup_elem(&wl_fns, &fkey);

	if (seen && (*seen == JB_WL_OTHER + 1 || *seen == JB_WL_SURFACE + 1))
		return 0;
	if (bpf_probe_read_user(&target_slot, sizeof(target_slot), &avalue[1]) || !target_slot ||
	    bpf_probe_read_user(&target, sizeof(target), (void *)target_slot) || !target ||
	    bpf_probe_read_user(&p, sizeof(p), (void *)target))
		return 0;
	kind = wl_iface_of(t, p.interface);
	if (!seen) {
		__u8 v = kind + 1;
		bpf_map_update_elem(&wl_fns, &fkey, &v, BPF_ANY);
	}
	if (kind == JB_WL_OTHER || kind == JB_WL_SURFACE)
		return 0;
	/* Frames and their feedback only past the startup time. */
	if ((kind == JB_WL_CALLBACK || kind == JB_WL_FEEDBACK) &&
	    bpf_ktime_get_ns() - t->proc_start_ns < ignore_startup_ns)
		return 0;
	key.display = p.display;
	key.tgid = id >> 32;
	key.id = p.id;
	if (kind == JB_WL_CALLBACK)  /* done(callback_data): its only event */
		return wl_frame_done(t, &key, &p, avalue);
	if (bpf_probe_read_user(impl, sizeof(impl), (void *)p.implementation))
		return 0;
	w.object = p.id;
	w.display = p.display;
	/* An event of these interfaces that is none of the ones wanted here
	 * (sync_output, wl_output's geometry, done, scale): its function is
	 * skipped from now on. */
	if (!(kind == JB_WL_FEEDBACK && (fn == impl[1] || fn == impl[2])) &&
	    !(kind == JB_WL_OUTPUT && fn == impl[1]) && !(kind == JB_WL_PRESENTATION && fn == impl[0])) {
		__u8 skip = JB_WL_OTHER + 1;

		bpf_map_update_elem(&wl_fns, &fkey, &skip, BPF_ANY);
		return 0;
	}
	if (kind == JB_WL_FEEDBACK) {  /* presented, discarded */
		surface = bpf_map_lookup_elem(&frame_feedbacks, &key);
		if (!surface)
			return 0;
		w.surface = *surface;
		bpf_map_delete_elem(&frame_feedbacks, &key);
		if (fn == impl[1]) {
			if (!event_args(avalue, w.args, 7))
				return 0;
			w.kind = JB_FR_PRESENTED;
		} else {
			w.kind = JB_FR_DISCARDED;
		}
	} else if (kind == JB_WL_OUTPUT && fn == impl[1]) {  /* mode(flags, width, height, refresh) */
		if (!event_args(avalue, w.args, 4))
			return 0;
		w.kind = JB_FR_OUTPUT_MODE;
	} else if (kind == JB_WL_PRESENTATION && fn == impl[0]) {  /* clock_id(clk_id) */
		if (!event_args(avalue, w.args, 1))
			return 0;
		w.kind = JB_FR_CLOCK;
	} else {
		return 0;
	}
	emit_frame(t, &w, bpf_ktime_get_ns());
	return 0;
}

/*
 * The per-thread cpu-clock of a Wayland main thread: it ticks only while the
 * thread runs. A stack is kept once its open frame has passed its deadline,
 * one per frame_sample_period_ns, for at most sample_window_ns of the frame.
 */
static __always_inline int frame_sample(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct jb_frame_thread *ft = bpf_map_lookup_elem(&frame_threads, &tid);
	__u64 now;

	if (!ft || !ft->open_ns)
		return 0;
	now = bpf_ktime_get_ns();
	if (now < ft->deadline_ns || now - ft->open_ns > sample_window_ns)
		return 0;
	if (ft->last_sample_ns &&
	    now - ft->last_sample_ns < frame_sample_period_ns - frame_sample_period_ns / 10)
		return 0;
	ft->last_sample_ns = now;
	stat_inc(JB_STAT_FRAME_SAMPLES);
	return 1;
}

#endif /* JANKBPF_FRAMES_BPF_H */
