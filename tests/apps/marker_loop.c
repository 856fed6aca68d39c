// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * marker_loop: an epoll event loop that runs several named callbacks per
 * wakeup, each dispatch marked three ways, for jankbpf's --marker tests:
 *   - calls to mark_begin(name) / mark_end(name)        BINARY:mark_begin,BINARY:mark_end
 *   - the callback runs inside run_one(name, ...)       BINARY:run_one,BINARY:run_one%return
 *   - USDT probes mloop:begin(name) / mloop:end(name)  BINARY:mloop:begin,BINARY:mloop:end
 *     guarded by their semaphores: the probes (and the label they pass) cost
 *     nothing until a tracer attaches, and the truth says whether one was.
 * A syscall-bounded task is a whole wakeup (all its callbacks); a marked one
 * is one callback.
 *
 *   marker_loop [--start-delay S] [--start-on-signal] [--gap MS] ROUND...
 *     --start-on-signal: the start delay (then 3600 s by default) ends at
 *     SIGUSR2, by its timerfd firing: the loop is idle in epoll_wait until
 *     then, as an app is when a tracer attaches to it. Each SIGUSR2 ends
 *     the idle wait then (with a long --gap: one round per signal).
 *     ROUND: comma-separated callbacks NAME:KIND:MS, run back to back after
 *     one epoll_wait return; rounds are GAP ms apart (default 200).
 *       spin   burn MS ms of CPU inside the marks
 *       sleep  nanosleep MS ms inside the marks
 *       nest   inside the marks: spin MS/4, then a nested marked dispatch
 *              NAME.inner that spins MS/4 and runs a nested wait (epoll_wait
 *              on its own epoll, MS/4 ms timeout), then spin to MS
 *       bare   MS ms of CPU outside any mark (work between dispatches)
 *
 * Truth on stdout, CLOCK_MONOTONIC ns:
 *   {"ready":true,"pid":P}
 *   {"cb":NAME,"round":R,"kind":K,"begin_ns","end_ns","dur_ns","sema":N}
 *       begin right before the first mark, end right after the last;
 *       sema: the begin probe's semaphore (> 0 while USDT is attached)
 *   {"round":R,"begin_ns","end_ns","dur_ns"}  wait return -> next wait entry
 *   {"done":true}
 */
#define _GNU_SOURCE
#define _SDT_HAS_SEMAPHORES 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/sdt.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* The USDT semaphores: the kernel counts attached probes in them. */
__extension__ unsigned short mloop_begin_semaphore __attribute__((unused, section(".probes")));
__extension__ unsigned short mloop_end_semaphore __attribute__((unused, section(".probes")));

#define MARK __attribute__((noinline, noipa, used))

enum kind { SPIN, SLEEP, NEST, BARE };
static const char *const kind_names[] = {"spin", "sleep", "nest", "bare"};

static volatile const char *current;
static volatile uint64_t sink;
static int nested_ep;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_until(uint64_t t)
{
	uint64_t x = sink;
	while (now_ns() < t)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

MARK void mark_begin(const char *name)
{
	current = name;
	__asm__ volatile("" ::: "memory");
}

MARK void mark_end(const char *name)
{
	current = name;
	__asm__ volatile("" ::: "memory");
}

static void dispatch(const char *name, enum kind k, unsigned ms);

MARK void run_one(const char *name, enum kind k, unsigned ms)
{
	uint64_t t0 = now_ns(), end = t0 + ms * 1000000ull;
	switch (k) {
	case SPIN:
	case BARE:
		spin_until(end);
		break;
	case SLEEP: {
		struct timespec ts = {(time_t)(end / 1000000000ull), (long)(end % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			;
		break;
	}
	case NEST: {
		char inner[80];
		struct epoll_event ev;
		spin_until(t0 + ms * 250000ull);
		snprintf(inner, sizeof inner, "%s.inner", name);
		/* A nested dispatch with a nested loop's wait inside it. */
		dispatch(inner, SPIN, ms / 4);
		epoll_wait(nested_ep, &ev, 1, (int)(ms / 4));
		spin_until(end);
		break;
	}
	}
	__asm__ volatile("" ::: "memory");
}

static void dispatch(const char *name, enum kind k, unsigned ms)
{
	if (*(volatile unsigned short *)&mloop_begin_semaphore)
		STAP_PROBE1(mloop, begin, name);
	mark_begin(name);
	run_one(name, k, ms);
	mark_end(name);
	if (*(volatile unsigned short *)&mloop_end_semaphore)
		STAP_PROBE1(mloop, end, name);
}

static void run_round(const char *spec, int round)
{
	char *copy = strdup(spec), *save = NULL;
	for (char *cb = strtok_r(copy, ",", &save); cb; cb = strtok_r(NULL, ",", &save)) {
		char name[64], kind[16];
		unsigned ms;
		int k;
		if (sscanf(cb, "%63[^:]:%15[^:]:%u", name, kind, &ms) != 3) {
			fprintf(stderr, "marker_loop: bad callback '%s' (NAME:KIND:MS)\n", cb);
			exit(2);
		}
		for (k = 0; k < 4; k++)
			if (!strcmp(kind, kind_names[k]))
				break;
		if (k == 4) {
			fprintf(stderr, "marker_loop: unknown kind '%s' (spin, sleep, nest, bare)\n", kind);
			exit(2);
		}
		unsigned sema = *(volatile unsigned short *)&mloop_begin_semaphore;
		uint64_t b = now_ns();
		if (k == BARE)
			spin_until(b + ms * 1000000ull); /* outside every mark */
		else
			dispatch(name, (enum kind)k, ms);
		uint64_t e = now_ns();
		printf("{\"cb\":\"%s\",\"round\":%d,\"kind\":\"%s\",\"begin_ns\":%llu,\"end_ns\":%llu,"
		       "\"dur_ns\":%llu,\"sema\":%u}\n",
		       name, round, kind, (unsigned long long)b, (unsigned long long)e,
		       (unsigned long long)(e - b), sema);
	}
	free(copy);
}

/* --start-on-signal: SIGUSR2 fires the loop's timerfd now. */
static int start_tfd = -1;

static void *start_signal_main(void *arg)
{
	sigset_t set;
	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	for (;;) {
		if (sigwaitinfo(&set, NULL) != SIGUSR2)
			continue;
		struct itimerspec now = {.it_value = {0, 1}};
		timerfd_settime(start_tfd, 0, &now, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double delay = 0;
	unsigned gap = 200;
	int on_signal = 0, have_delay = 0;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--start-on-signal")) {
			on_signal = 1;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			return 2;
		if (!strcmp(argv[i], "--start-delay"))
			delay = atof(argv[i + 1]), have_delay = 1;
		else if (!strcmp(argv[i], "--gap"))
			gap = (unsigned)atoi(argv[i + 1]);
		else {
			fprintf(stderr, "usage: marker_loop [--start-delay S] [--start-on-signal] [--gap MS] ROUND...\n");
			return 2;
		}
	}
	if (on_signal && !have_delay)
		delay = 3600;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	nested_ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	if (ep < 0 || tfd < 0 || nested_ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev))
		return 1;
	if (on_signal) {
		sigset_t set;
		pthread_t th;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		start_tfd = tfd;
		if (pthread_create(&th, NULL, start_signal_main, NULL))
			return 1;
	}
	printf("{\"ready\":true,\"pid\":%d}\n", (int)getpid());

	uint64_t first = (uint64_t)(delay * 1e9) + 1;
	struct itimerspec its = {.it_value = {(time_t)(first / 1000000000ull), (long)(first % 1000000000ull)}};
	uint64_t t_in = 0, t_out = 0, round_begin = 0;
	for (int r = 0; i + r <= argc; r++) {
		timerfd_settime(tfd, 0, &its, NULL);
		struct epoll_event out;
		t_in = now_ns();
		if (r > 0)
			printf("{\"round\":%d,\"begin_ns\":%llu,\"end_ns\":%llu,\"dur_ns\":%llu}\n", r,
			       (unsigned long long)round_begin, (unsigned long long)t_in,
			       (unsigned long long)(t_in - round_begin));
		if (epoll_wait(ep, &out, 1, -1) != 1)
			return 1;
		t_out = now_ns();
		uint64_t expirations;
		if (read(tfd, &expirations, sizeof expirations) < 0)
			return 1;
		if (i + r == argc)
			break;
		round_begin = t_out;
		run_round(argv[i + r], r + 1);
		its.it_value.tv_sec = gap / 1000;
		its.it_value.tv_nsec = (long)(gap % 1000) * 1000000;
	}
	printf("{\"done\":true}\n");
	return 0;
}
