// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stack_vdso_loop: an epoll/timerfd event loop whose CPU tasks spend much
 * of their time in clock_gettime (libc -> vDSO), the case issue 9 found
 * broken on a real arm64 kernel. Built like shipped binaries (-O2 without
 * frame pointers); scripts/capture-aarch64-fixtures.sh --kernel samples it
 * in a VM running Debian's arm64 kernel.
 *
 *   stack_vdso_loop START_DELAY_S TASK_MS COUNT
 *
 * Each task: main -> top_work -> mid_work -> leaf_spin, leaf_spin spinning
 * and reading CLOCK_MONOTONIC until TASK_MS have passed. 200 ms idle in
 * epoll_wait between tasks. Prints "task BEGIN_NS END_NS" (CLOCK_MONOTONIC)
 * per task.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

NOINLINE void leaf_spin(uint64_t until)
{
	uint64_t x = sink;
	do {
		for (int i = 0; i < 200; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
	} while (now_ns() < until);
}

NOINLINE void mid_work(unsigned ms)
{
	leaf_spin(now_ns() + ms * 1000000ull);
	sink++; /* not a tail call */
}

NOINLINE void top_work(unsigned ms)
{
	mid_work(ms);
	sink++;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stack_vdso_loop START_DELAY_S TASK_MS COUNT\n");
		return 2;
	}
	double delay = atof(argv[1]);
	unsigned ms = (unsigned)atoi(argv[2]);
	int count = atoi(argv[3]);
	int ep = epoll_create1(0);
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	struct epoll_event ev = {.events = EPOLLIN};
	if (ep < 0 || tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct itimerspec its = {.it_value = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9) + 1}};
	for (int i = 0; i < count; i++) {
		timerfd_settime(tfd, 0, &its, NULL);
		struct epoll_event out;
		if (epoll_wait(ep, &out, 1, -1) != 1)
			return 1;
		uint64_t expirations;
		if (read(tfd, &expirations, sizeof expirations) < 0)
			return 1;
		uint64_t begin = now_ns();
		top_work(ms);
		uint64_t end = now_ns();
		printf("task %llu %llu\n", (unsigned long long)begin, (unsigned long long)end);
		its.it_value.tv_sec = 0;
		its.it_value.tv_nsec = 200 * 1000000;
	}
	return 0;
}
