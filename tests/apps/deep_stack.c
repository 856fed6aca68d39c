// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * deep_stack: an epoll event loop whose long task spins at the bottom of a
 * deep recursion with big frames, for jankbpf's --stack-size test: from the
 * spin up to main the stack holds DEPTH frames of about 2 KB each, so with
 * DEPTH 16 (~33 KB) a 16 KB user stack copy (the default) cannot reach
 * main, and a 64 KB one can. Built like shipped binaries (-O2 without frame
 * pointers), so only DWARF CFI can unwind it.
 *
 *   deep_stack START_DELAY_S MS DEPTH
 *     one task: descend DEPTH levels of deep_frame, spin MS ms at the bottom
 * Prints "task BEGIN_NS END_NS DEPTH FRAME_BYTES" (CLOCK_MONOTONIC), where
 * FRAME_BYTES is the distance between two levels' frames as the program saw
 * it.
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
#define FRAME_BYTES 2048

static volatile uint64_t sink;
static uintptr_t frame_at[2];  /* the addresses of levels 1 and 2's buffers */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static NOINLINE void spin_at_bottom(uint64_t until)
{
	uint64_t x = sink;
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
	} while (now_ns() < until);
}

/* A frame of FRAME_BYTES the compiler must keep: the buffer is written
 * before the call and read after it (so neither the buffer nor the call can
 * go: no tail call, no shrinking). */
NOINLINE void deep_frame(unsigned level, unsigned depth, uint64_t until)
{
	volatile unsigned char buf[FRAME_BYTES];
	buf[0] = (unsigned char)level;
	buf[FRAME_BYTES - 1] = (unsigned char)depth;
	if (level <= 2)
		frame_at[level - 1] = (uintptr_t)buf;
	if (level < depth)
		deep_frame(level + 1, depth, until);
	else
		spin_at_bottom(until);
	sink += buf[0] + buf[FRAME_BYTES - 1];
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: deep_stack START_DELAY_S MS DEPTH\n");
		return 2;
	}
	double delay = atof(argv[1]);
	unsigned ms = (unsigned)atoi(argv[2]), depth = (unsigned)atoi(argv[3]);
	if (depth < 2 || depth > 30) {
		fprintf(stderr, "deep_stack: DEPTH 2..30 (a 64 KB copy must hold it)\n");
		return 2;
	}
	int ep = epoll_create1(0);
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	struct epoll_event ev = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Wait, run the task, wait once more (its end), and exit. */
	struct itimerspec its = {.it_value = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9) + 1}};
	timerfd_settime(tfd, 0, &its, NULL);
	struct epoll_event out;
	uint64_t expirations;
	if (epoll_wait(ep, &out, 1, -1) != 1 || read(tfd, &expirations, sizeof expirations) < 0)
		return 1;
	uint64_t begin = now_ns();
	deep_frame(1, depth, begin + ms * 1000000ull);
	uint64_t end = now_ns();
	printf("task %llu %llu %u %lld\n", (unsigned long long)begin, (unsigned long long)end, depth,
	       (long long)(frame_at[0] - frame_at[1]));
	its.it_value.tv_sec = 0;
	its.it_value.tv_nsec = 200 * 1000000;
	timerfd_settime(tfd, 0, &its, NULL);
	if (epoll_wait(ep, &out, 1, -1) != 1)
		return 1;
	return 0;
}
