// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * glib_loop: a GLib main loop for jankbpf's GLib marker tests. Fast named
 * timeouts tick all along ("fast-tick" every 10 ms, "fast-tock" every 7 ms);
 * once, a named timeout "slow-timeout" blocks the loop for SLOW_MS.
 *
 *   glib_loop START_DELAY_S [SLOW_MS]     (SLOW_MS default 300)
 *
 * Built twice. glib_loop runs on the system's GLib as it is (Debian's has no
 * SDT probes, so jankbpf falls back to uprobes on g_main_context_dispatch).
 * glib_loop_sdt (-DGLIB_SDT) also carries GLib's own probe definitions,
 * glib:main__before_dispatch(name, source, dispatch, callback, user_data)
 * and glib:main__after_dispatch(name, source, dispatch, need_destroy),
 * fired around every callback as GLib builds with --enable-dtrace fire them
 * around every dispatch: `--marker glib=glib_loop_sdt` takes the USDT path.
 *
 * Truth on stdout (CLOCK_MONOTONIC ns):
 *   {"ready":true,"pid":P}
 *   {"source":"slow-timeout","begin_ns","end_ns","dur_ns"}  the slow callback
 *   {"done":true,"fast":N}                                  fast dispatches run
 */
#define _GNU_SOURCE
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef GLIB_SDT
#include <sys/sdt.h>
#define BEFORE_DISPATCH(cb, data)                                                             \
	do {                                                                                  \
		GSource *s_ = g_main_current_source();                                        \
		DTRACE_PROBE5(glib, main__before_dispatch, g_source_get_name(s_), s_, NULL,  \
			      (void *)(cb), (data));                                          \
	} while (0)
#define AFTER_DISPATCH(again)                                                                 \
	do {                                                                                  \
		GSource *s_ = g_main_current_source();                                        \
		DTRACE_PROBE4(glib, main__after_dispatch, g_source_get_name(s_), s_, NULL,   \
			      (int)!(again));                                                 \
	} while (0)
#else
#define BEFORE_DISPATCH(cb, data) do { } while (0)
#define AFTER_DISPATCH(again) do { } while (0)
#endif

static unsigned slow_ms = 300;
static unsigned long fast;
static GMainLoop *loop;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static gboolean fast_cb(gpointer data)
{
	BEFORE_DISPATCH(fast_cb, data);
	uint64_t until = now_ns() + 50000;
	while (now_ns() < until)
		;
	fast++;
	AFTER_DISPATCH(TRUE);
	return G_SOURCE_CONTINUE;
}

static gboolean slow_cb(gpointer data)
{
	BEFORE_DISPATCH(slow_cb, data);
	uint64_t b = now_ns();
	g_usleep(slow_ms * 1000); /* blocks the loop */
	uint64_t e = now_ns();
	printf("{\"source\":\"slow-timeout\",\"begin_ns\":%llu,\"end_ns\":%llu,\"dur_ns\":%llu}\n",
	       (unsigned long long)b, (unsigned long long)e, (unsigned long long)(e - b));
	AFTER_DISPATCH(FALSE);
	return G_SOURCE_REMOVE;
}

static gboolean quit_cb(gpointer data)
{
	BEFORE_DISPATCH(quit_cb, data);
	g_main_loop_quit(loop);
	AFTER_DISPATCH(FALSE);
	return G_SOURCE_REMOVE;
}

static void add_timeout(const char *name, unsigned ms, GSourceFunc fn)
{
	GSource *s = g_timeout_source_new(ms);
	g_source_set_name(s, name);
	g_source_set_callback(s, fn, NULL, NULL);
	g_source_attach(s, NULL);
	g_source_unref(s);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: glib_loop START_DELAY_S [SLOW_MS]\n");
		return 2;
	}
	double delay = atof(argv[1]);
	if (argc > 2)
		slow_ms = (unsigned)atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	loop = g_main_loop_new(NULL, FALSE);
	add_timeout("fast-tick", 10, fast_cb);
	add_timeout("fast-tock", 7, fast_cb);
	add_timeout("slow-timeout", (unsigned)(delay * 1000), slow_cb);
	add_timeout("quit", (unsigned)(delay * 1000) + slow_ms + 700, quit_cb);
	printf("{\"ready\":true,\"pid\":%d}\n", (int)getpid());
	g_main_loop_run(loop);
	printf("{\"done\":true,\"fast\":%lu}\n", fast);
	g_main_loop_unref(loop);
	return 0;
}
