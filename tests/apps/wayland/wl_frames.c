/*
 * wl_frames: a Wayland client that draws on frame callbacks, as a toolkit
 * does, and plants slow frames of known lengths among fast ones, for
 * jankbpf's frame tests and bench. Plain libwayland-client: shm buffers,
 * xdg-shell toplevels, presentation feedback (when the compositor has
 * wp_presentation), wl_output's mode for the refresh.
 *
 *   wl_frames [--surfaces N] [--frames N] [--warmup-ms MS] [--slow I:MS,...]
 *             [--stall I:MS] [--no-feedback] [--spin-us US]
 *
 * Frame i (counted per surface from the end of the warm-up) begins when the
 * surface's frame callback is dispatched and ends at its wl_surface.commit.
 * --slow I:MS makes frame I of the first surface spin MS ms of CPU in
 * slow_draw(); --stall I:MS makes it sleep MS ms before committing (a
 * client that stops committing); --spin-us spins that long in every frame.
 * Ground truth on stdout, one JSON object per line: the refresh, then per
 * frame {"surface","frame","start_ns","end_ns","ms","planted_ms"} with
 * CLOCK_MONOTONIC times and the presentation times it was told, then
 * "done" with the CPU time the counted frames cost the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <wayland-client.h>

#include "presentation-time-client-protocol.h"
#include "xdg-shell-client-protocol.h"

#define W 64
#define H 64
#define MAX_SURFACES 2
#define MAX_PLANTS 64

struct buffer {
	struct wl_buffer *wl;
	void *data;
	bool busy;
};

struct surface {
	int index;
	struct wl_surface *wl;
	struct xdg_surface *xdg;
	struct xdg_toplevel *toplevel;
	struct buffer buffers[2];
	bool configured;
	long frame;           /* frames since the warm-up ended (-1 during it) */
	uint32_t color;
};

static struct {
	struct wl_display *display;
	struct wl_compositor *compositor;
	struct wl_shm *shm;
	struct xdg_wm_base *wm_base;
	struct wp_presentation *presentation;
	struct wl_output *output;
	int32_t refresh_mhz;
	uint32_t clock_id;
	uint64_t warmup_end_ns;
	long frames;
	int nsurfaces;
	bool feedback;
	long spin_us;
	long slow_frame[MAX_PLANTS], slow_ms[MAX_PLANTS];
	int nslow;
	long stall_frame, stall_ms;
	int done_surfaces;
	uint64_t counted_cpu_ns, counted_wall_ns;  /* the process's CPU and time at frame 0 */
	struct surface surfaces[MAX_SURFACES];
} app = {.frames = 300, .nsurfaces = 1, .feedback = true, .stall_frame = -1};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_until(uint64_t end)
{
	volatile uint64_t x = 0;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x += (uint64_t)i * x;
}

/* The planted slow frame's work: a named function its stacks must show. */
__attribute__((noinline)) static void slow_draw(long ms)
{
	spin_until(now_ns() + (uint64_t)ms * 1000000ull);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void stalled_draw(long ms)
{
	usleep((useconds_t)ms * 1000);
	__asm__ volatile("" ::: "memory");
}

static void buffer_release(void *data, struct wl_buffer *b)
{
	(void)b;
	((struct buffer *)data)->busy = false;
}
static const struct wl_buffer_listener buffer_listener = {buffer_release};

static void make_buffers(struct surface *s)
{
	const int stride = W * 4, size = stride * H;
	int fd = memfd_create("wl_frames", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, size * 2) < 0) {
		perror("wl_frames: shm");
		exit(1);
	}
	uint8_t *pool_data = mmap(NULL, size * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	struct wl_shm_pool *pool = wl_shm_create_pool(app.shm, fd, size * 2);
	for (int i = 0; i < 2; i++) {
		s->buffers[i].wl = wl_shm_pool_create_buffer(pool, i * size, W, H, stride, WL_SHM_FORMAT_XRGB8888);
		s->buffers[i].data = pool_data + i * size;
		wl_buffer_add_listener(s->buffers[i].wl, &buffer_listener, &s->buffers[i]);
	}
	wl_shm_pool_destroy(pool);
	close(fd);
}

static void feedback_sync_output(void *d, struct wp_presentation_feedback *f, struct wl_output *o)
{
	(void)d, (void)f, (void)o;
}
/* Which frame a feedback is for: the frame index packed with the surface. */
static void *frame_tag(const struct surface *s) { return (void *)(intptr_t)((s->frame + 2) * 4 + s->index); }

static void feedback_presented(void *d, struct wp_presentation_feedback *f, uint32_t sec_hi, uint32_t sec_lo,
			       uint32_t nsec, uint32_t refresh, uint32_t seq_hi, uint32_t seq_lo, uint32_t flags)
{
	intptr_t tag = (intptr_t)d;
	uint64_t t = ((uint64_t)sec_hi << 32 | sec_lo) * 1000000000ull + nsec;

	(void)seq_hi, (void)seq_lo, (void)flags;
	if (tag / 4 - 2 >= 0)
		printf("{\"presented\":{\"surface\":%d,\"frame\":%ld,\"ns\":%llu,\"clock\":%u,\"refresh_ns\":%u}}\n",
		       (int)(tag % 4), (long)(tag / 4 - 2), (unsigned long long)t, app.clock_id, refresh);
	wp_presentation_feedback_destroy(f);
}
static void feedback_discarded(void *d, struct wp_presentation_feedback *f)
{
	intptr_t tag = (intptr_t)d;

	if (tag / 4 - 2 >= 0)
		printf("{\"discarded\":{\"surface\":%d,\"frame\":%ld}}\n", (int)(tag % 4), (long)(tag / 4 - 2));
	wp_presentation_feedback_destroy(f);
}
static void presentation_clock(void *d, struct wp_presentation *p, uint32_t clk)
{
	(void)d, (void)p;
	app.clock_id = clk;
}
static const struct wp_presentation_listener presentation_listener = {presentation_clock};
static const struct wp_presentation_feedback_listener feedback_listener = {
	feedback_sync_output, feedback_presented, feedback_discarded};

static void frame_done(void *data, struct wl_callback *cb, uint32_t time);
static const struct wl_callback_listener frame_listener = {frame_done};

/* Draws the next frame of `s` and commits it; `start` is when it began. */
static void draw(struct surface *s, uint64_t start)
{
	long planted = 0;
	struct buffer *b = !s->buffers[0].busy ? &s->buffers[0] : !s->buffers[1].busy ? &s->buffers[1] : NULL;

	if (s->index == 0 && s->frame >= 0) {
		for (int i = 0; i < app.nslow; i++)
			if (app.slow_frame[i] == s->frame) {
				planted = app.slow_ms[i];
				slow_draw(planted);
			}
		if (s->frame == app.stall_frame) {
			planted = app.stall_ms;
			stalled_draw(planted);
		}
	}
	if (app.spin_us)
		spin_until(now_ns() + (uint64_t)app.spin_us * 1000ull);
	s->color += 0x010203;
	if (b) {
		uint32_t *px = b->data;
		for (int i = 0; i < W * H; i++)
			px[i] = s->color;
		b->busy = true;
		wl_surface_attach(s->wl, b->wl, 0, 0);
		wl_surface_damage_buffer(s->wl, 0, 0, W, H);
	}
	struct wl_callback *cb = wl_surface_frame(s->wl);
	wl_callback_add_listener(cb, &frame_listener, s);
	if (app.presentation && app.feedback) {
		struct wp_presentation_feedback *f = wp_presentation_feedback(app.presentation, s->wl);
		wp_presentation_feedback_add_listener(f, &feedback_listener, frame_tag(s));
	}
	uint64_t end = now_ns();
	wl_surface_commit(s->wl);
	if (s->frame >= 0 && start)
		printf("{\"surface\":%d,\"frame\":%ld,\"start_ns\":%llu,\"end_ns\":%llu,\"ms\":%.3f,\"planted_ms\":%ld}\n",
		       s->index, s->frame, (unsigned long long)start, (unsigned long long)end, (end - start) / 1e6,
		       planted);
}

static void frame_done(void *data, struct wl_callback *cb, uint32_t time)
{
	struct surface *s = data;
	uint64_t start = now_ns();

	if (getenv("WL_FRAMES_DEBUG_TIME")) {
		struct timespec r;
		clock_gettime(CLOCK_MONOTONIC_RAW, &r);
		fprintf(stderr, "done time %u ms, now mono %llu ms raw %llu ms\n", time, (unsigned long long)(start / 1000000),
			(unsigned long long)(r.tv_sec * 1000ull + r.tv_nsec / 1000000));
	}
	wl_callback_destroy(cb);
	if (s->frame < 0 && start >= app.warmup_end_ns) {
		s->frame = 0;
		if (!app.counted_wall_ns) {
			app.counted_wall_ns = start;
			app.counted_cpu_ns = cpu_ns();
		}
	}
	else if (s->frame >= 0)
		s->frame++;
	if (s->frame >= app.frames) {
		app.done_surfaces++;
		return;  /* no more frames: this surface goes idle */
	}
	draw(s, start);
}

static void xdg_surface_configure(void *data, struct xdg_surface *x, uint32_t serial)
{
	struct surface *s = data;

	xdg_surface_ack_configure(x, serial);
	if (!s->configured) {
		s->configured = true;
		draw(s, 0);
	}
}
static const struct xdg_surface_listener xdg_surface_listener = {xdg_surface_configure};

static void toplevel_configure(void *d, struct xdg_toplevel *t, int32_t w, int32_t h, struct wl_array *st)
{
	(void)d, (void)t, (void)w, (void)h, (void)st;
}
static void toplevel_close(void *d, struct xdg_toplevel *t) { (void)d, (void)t; }
static const struct xdg_toplevel_listener toplevel_listener = {toplevel_configure, toplevel_close};

static void wm_ping(void *d, struct xdg_wm_base *b, uint32_t serial)
{
	(void)d;
	xdg_wm_base_pong(b, serial);
}
static const struct xdg_wm_base_listener wm_listener = {wm_ping};

static void output_geometry(void *d, struct wl_output *o, int32_t x, int32_t y, int32_t pw, int32_t ph,
			    int32_t sub, const char *make, const char *model, int32_t tr)
{
	(void)d, (void)o, (void)x, (void)y, (void)pw, (void)ph, (void)sub, (void)make, (void)model, (void)tr;
}
static void output_mode(void *d, struct wl_output *o, uint32_t flags, int32_t w, int32_t h, int32_t refresh)
{
	(void)d, (void)o, (void)w, (void)h;
	if (flags & WL_OUTPUT_MODE_CURRENT)
		app.refresh_mhz = refresh;
}
static void output_done(void *d, struct wl_output *o) { (void)d, (void)o; }
static void output_scale(void *d, struct wl_output *o, int32_t f) { (void)d, (void)o, (void)f; }
static const struct wl_output_listener output_listener = {output_geometry, output_mode, output_done, output_scale};

static void registry_global(void *d, struct wl_registry *r, uint32_t name, const char *iface, uint32_t version)
{
	(void)d;
	if (!strcmp(iface, wl_compositor_interface.name))
		app.compositor = wl_registry_bind(r, name, &wl_compositor_interface, 4);
	else if (!strcmp(iface, wl_shm_interface.name))
		app.shm = wl_registry_bind(r, name, &wl_shm_interface, 1);
	else if (!strcmp(iface, xdg_wm_base_interface.name)) {
		app.wm_base = wl_registry_bind(r, name, &xdg_wm_base_interface, 1);
		xdg_wm_base_add_listener(app.wm_base, &wm_listener, NULL);
	} else if (!strcmp(iface, wp_presentation_interface.name)) {
		app.presentation = wl_registry_bind(r, name, &wp_presentation_interface, 1);
		wp_presentation_add_listener(app.presentation, &presentation_listener, NULL);
	} else if (!strcmp(iface, wl_output_interface.name) && !app.output) {
		app.output = wl_registry_bind(r, name, &wl_output_interface, version < 2 ? version : 2);
		wl_output_add_listener(app.output, &output_listener, NULL);
	}
}
static void registry_remove(void *d, struct wl_registry *r, uint32_t name) { (void)d, (void)r, (void)name; }
static const struct wl_registry_listener registry_listener = {registry_global, registry_remove};

static void parse_args(int argc, char **argv)
{
	long warmup_ms = 3500;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-feedback")) {
			app.feedback = false;
			continue;
		}
		if (!v) {
			fprintf(stderr, "wl_frames: %s needs a value\n", a);
			exit(2);
		}
		i++;
		if (!strcmp(a, "--surfaces"))
			app.nsurfaces = atoi(v) < 1 ? 1 : atoi(v) > MAX_SURFACES ? MAX_SURFACES : atoi(v);
		else if (!strcmp(a, "--frames"))
			app.frames = atol(v);
		else if (!strcmp(a, "--warmup-ms"))
			warmup_ms = atol(v);
		else if (!strcmp(a, "--spin-us"))
			app.spin_us = atol(v);
		else if (!strcmp(a, "--stall")) {
			if (sscanf(v, "%ld:%ld", &app.stall_frame, &app.stall_ms) != 2) {
				fprintf(stderr, "wl_frames: --stall I:MS\n");
				exit(2);
			}
		} else if (!strcmp(a, "--slow")) {
			char *copy = strdup(v), *save = NULL;
			for (char *t = strtok_r(copy, ",", &save); t && app.nslow < MAX_PLANTS; t = strtok_r(NULL, ",", &save))
				if (sscanf(t, "%ld:%ld", &app.slow_frame[app.nslow], &app.slow_ms[app.nslow]) == 2)
					app.nslow++;
			free(copy);
		} else {
			fprintf(stderr, "wl_frames: unknown option %s\n", a);
			exit(2);
		}
	}
	app.warmup_end_ns = now_ns() + (uint64_t)warmup_ms * 1000000ull;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv);
	app.display = wl_display_connect(NULL);
	if (!app.display) {
		fprintf(stderr, "wl_frames: cannot connect to the Wayland display: %s\n", strerror(errno));
		return 1;
	}
	struct wl_registry *reg = wl_display_get_registry(app.display);
	wl_registry_add_listener(reg, &registry_listener, NULL);
	wl_display_roundtrip(app.display);
	wl_display_roundtrip(app.display);  /* the output's mode */
	if (!app.compositor || !app.shm || !app.wm_base) {
		fprintf(stderr, "wl_frames: the compositor lacks wl_compositor, wl_shm or xdg_wm_base\n");
		return 1;
	}
	printf("{\"pid\":%d,\"refresh_mhz\":%d,\"presentation\":%s}\n", getpid(), app.refresh_mhz,
	       app.presentation ? "true" : "false");
	for (int i = 0; i < app.nsurfaces; i++) {
		struct surface *s = &app.surfaces[i];
		s->index = i;
		s->frame = -1;
		s->color = 0x203040u * (uint32_t)(i + 1);
		s->wl = wl_compositor_create_surface(app.compositor);
		s->xdg = xdg_wm_base_get_xdg_surface(app.wm_base, s->wl);
		xdg_surface_add_listener(s->xdg, &xdg_surface_listener, s);
		s->toplevel = xdg_surface_get_toplevel(s->xdg);
		xdg_toplevel_add_listener(s->toplevel, &toplevel_listener, s);
		xdg_toplevel_set_title(s->toplevel, i ? "wl_frames second" : "wl_frames");
		make_buffers(s);
		wl_surface_commit(s->wl);
		/* Its protocol id (jankbpf's "wl_surface@N"): 3 when the last
		 * roundtrip's callback id was already given back, else a new one. */
		printf("{\"surface_id\":{\"surface\":%d,\"id\":%u}}\n", i, wl_proxy_get_id((struct wl_proxy *)s->wl));
	}
	/* The event loop: poll(2) on the display, as toolkits wait. */
	while (app.done_surfaces < app.nsurfaces) {
		while (wl_display_prepare_read(app.display) != 0)
			wl_display_dispatch_pending(app.display);
		wl_display_flush(app.display);
		struct pollfd p = {wl_display_get_fd(app.display), POLLIN, 0};
		if (poll(&p, 1, 5000) <= 0) {
			wl_display_cancel_read(app.display);
			fprintf(stderr, "wl_frames: no event for 5 s\n");
			return 1;
		}
		if (wl_display_read_events(app.display) < 0)
			return 1;
		wl_display_dispatch_pending(app.display);
	}
	/* What the counted frames cost this process (the bench's per-frame cost). */
	printf("{\"done\":true,\"cpu_ns\":%llu,\"wall_ns\":%llu}\n",
	       (unsigned long long)(cpu_ns() - app.counted_cpu_ns), (unsigned long long)(now_ns() - app.counted_wall_ns));
	wl_display_disconnect(app.display);
	return 0;
}
