// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stack_loop: an epoll event loop whose long tasks have known call stacks,
 * for jankbpf's stack tests. Built like shipped binaries: -O2 without frame
 * pointers, so only DWARF CFI can unwind it.
 *
 *   stack_loop START_DELAY_S TASK...
 *     deep:MS    main -> run_task -> outer -> middle -> inner, spinning in inner
 *     ab:MSA:MSB phase_a spins MSA ms, then phase_b spins MSB ms (one task)
 *     block:MS   read() on a pipe until the "jt-waker" thread writes to it
 *                MS ms later
 *     relay:N:MS N times: a 100 us nanosleep, then block:MS (a long sleep
 *                right after a short one, as a lock's hand-off before a wait)
 *     spinblock:MSA:MSB  phase_a spins MSA ms, then block:MSB (one task)
 * Each task runs from one epoll_wait return to the next; 200 ms idle between.
 * Prints one line per task: "task KIND BEGIN_NS END_NS" (CLOCK_MONOTONIC).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* volatile sinks keep the compiler from folding the spins away. */
static volatile uint64_t sink;

#define NOINLINE __attribute__((noinline))

/* The work loops do not call out (no vDSO frames), so every sample's leaf
 * is the function itself. */
static NOINLINE void spin_here(uint64_t until)
{
	uint64_t x = sink;
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
	} while (now_ns() < until);
}

NOINLINE void inner(unsigned ms)
{
	spin_here(now_ns() + ms * 1000000ull);
	sink++; /* not a tail call */
}

NOINLINE void middle(unsigned ms)
{
	inner(ms);
	sink++;
}

NOINLINE void outer(unsigned ms)
{
	middle(ms);
	sink++;
}

NOINLINE void phase_a(unsigned ms)
{
	spin_here(now_ns() + ms * 1000000ull);
	sink++;
}

NOINLINE void phase_b(unsigned ms)
{
	spin_here(now_ns() + ms * 1000000ull);
	sink++;
}

static int pipefd[2];
static unsigned waker_delay_ms;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int armed;

static void *waker(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "jt-waker");
	for (;;) {
		pthread_mutex_lock(&mu);
		while (!armed)
			pthread_cond_wait(&cv, &mu);
		armed = 0;
		pthread_mutex_unlock(&mu);
		usleep(waker_delay_ms * 1000);
		char c = 1;
		if (write(pipefd[1], &c, 1) != 1)
			abort();
	}
	return NULL;
}

NOINLINE void wait_for_pipe(unsigned ms)
{
	pthread_mutex_lock(&mu);
	waker_delay_ms = ms;
	armed = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	char c;
	if (read(pipefd[0], &c, 1) != 1)
		abort();
	sink++;
}

static NOINLINE void run_task(const char *spec)
{
	unsigned a = 0, b = 0;
	if (sscanf(spec, "deep:%u", &a) == 1)
		outer(a);
	else if (sscanf(spec, "ab:%u:%u", &a, &b) == 2) {
		phase_a(a);
		phase_b(b);
	} else if (sscanf(spec, "spinblock:%u:%u", &a, &b) == 2) {
		phase_a(a);
		wait_for_pipe(b);
	} else if (sscanf(spec, "block:%u", &a) == 1)
		wait_for_pipe(a);
	else if (sscanf(spec, "relay:%u:%u", &a, &b) == 2) {
		for (unsigned i = 0; i < a; i++) {
			usleep(100);
			wait_for_pipe(b);
		}
	} else {
		fprintf(stderr, "stack_loop: unknown task '%s'\n", spec);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: stack_loop START_DELAY_S deep:MS|ab:MSA:MSB|block:MS|relay:N:MS|spinblock:MSA:MSB...\n");
		return 2;
	}
	pthread_t t;
	if (pipe(pipefd) || pthread_create(&t, NULL, waker, NULL))
		return 1;
	int ep = epoll_create1(0);
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	struct epoll_event ev = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	setvbuf(stdout, NULL, _IOLBF, 0);

	double delay = atof(argv[1]);
	struct itimerspec its = {.it_value = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9) + 1}};
	for (int i = 2; i <= argc; i++) {
		timerfd_settime(tfd, 0, &its, NULL);
		struct epoll_event out;
		if (epoll_wait(ep, &out, 1, -1) != 1)
			return 1;
		uint64_t expirations, begin = now_ns();
		if (read(tfd, &expirations, sizeof expirations) < 0)
			return 1;
		if (i == argc)
			break;
		run_task(argv[i]);
		uint64_t end = now_ns();
		printf("task %s %llu %llu\n", argv[i], (unsigned long long)begin,
		       (unsigned long long)end);
		its.it_value.tv_sec = 0;
		its.it_value.tv_nsec = 200 * 1000000;
	}
	return 0;
}
