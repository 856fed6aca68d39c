// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jobs_loop: what a job-control shell does with its children, without a
 * terminal, for the kernel lane's child-wait checks (bpf/waits.bpf.h). The
 * main thread waits in poll() (its event loop), then per step:
 *
 *   job:MS     forks a child that sleeps MS ms, puts it in a process group
 *              of its own (setpgid, as a shell starts a job) and sleeps in
 *              wait4 until it exits: the shell is idle, no jank
 *   system:MS  the same without setpgid (as system() does): the wait is
 *              part of the task, a jank of about MS ms
 *
 *   jobs_loop START_DELAY_MS STEP...
 *
 * Prints "KIND BEGIN_NS END_NS" (CLOCK_MONOTONIC) per step: from the poll
 * return before it to the child's reaping; 200 ms of poll() between steps.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int run_child(long ms, int own_group)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

		nanosleep(&ts, NULL);
		_exit(0);
	}
	/* A shell calls setpgid in both parent and child (whichever runs
	 * first); the parent's is the one the BPF side sees. */
	if (own_group && setpgid(pid, pid) != 0)
		return -1;
	if (wait4(pid, &status, 0, NULL) != pid)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: jobs_loop START_DELAY_MS job:MS|system:MS...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	poll(NULL, 0, atoi(argv[1]));
	for (int i = 2; i < argc; i++) {
		char *colon = strchr(argv[i], ':');
		long ms = colon ? strtol(colon + 1, NULL, 10) : -1;
		int job = colon && !strncmp(argv[i], "job", (size_t)(colon - argv[i]));
		int sys = colon && !strncmp(argv[i], "system", (size_t)(colon - argv[i]));

		if (ms < 0 || ms > 60000 || (!job && !sys)) {
			fprintf(stderr, "jobs_loop: bad step '%s' (job:MS or system:MS)\n", argv[i]);
			return 2;
		}
		uint64_t begin = now_ns();
		if (run_child(ms, job) != 0) {
			perror("jobs_loop: child");
			return 1;
		}
		printf("%s %llu %llu\n", job ? "job" : "system", (unsigned long long)begin,
		       (unsigned long long)now_ns());
		poll(NULL, 0, 200);
	}
	return 0;
}
