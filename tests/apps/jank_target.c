// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jank_target: a purpose-built event-loop application for jankbpf's tests.
 *
 * The main thread runs an event loop around one wait syscall (epoll_wait,
 * epoll_pwait, epoll_pwait2, poll, ppoll, select or pselect6, called with
 * syscall() so the kernel sees exactly that one). The loop is driven by fds
 * becoming ready, as a real application's is: a timerfd for idle gaps and the
 * start delay, an eventfd for back-to-back dispatches. Each dispatch runs one
 * scripted task and returns to the wait, so a "task" in jankbpf's sense (wait
 * return -> next wait entry) is exactly one scripted step.
 *
 * Ground truth goes to stdout (or --truth FILE) as JSON lines, one per task,
 * with CLOCK_MONOTONIC begin (taken right after the wait returns) and end
 * (taken right before the next wait is entered). See usage() for the syntax
 * and the line schema.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* epoll_pwait2 has the same number on every architecture (asm-generic). */
#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

#define NS_PER_MS 1000000ull
#define IO_FILE_SIZE (64ull << 20) /* data file read by io:MS */
#define IO_BLOCK (4u << 20)        /* largest O_DIRECT read (one request) */
#define IO_MIN_BLOCK (64u << 10)   /* smallest, to end near the deadline */
#define HUGE_PAGE (2u << 20)
#define SHORT_WORK_NS 20000ull     /* work done by each short task */
#define SAMPLE_NS 1000000ull       /* --measure state sampling period */
#define MAX_STEPS 4096
#define MAX_WORKERS 64

/* ------------------------------------------------------------------------ */
/* wait syscalls                                                             */

enum loop_kind { L_EPOLL, L_EPOLL_PWAIT, L_EPOLL_PWAIT2, L_POLL, L_PPOLL, L_SELECT, L_PSELECT };

static const struct {
	const char *opt;     /* --loop value */
	const char *syscall; /* the syscall the kernel sees */
	int available;       /* exists on this architecture */
} loop_kinds[] = {
#ifdef SYS_epoll_wait
	[L_EPOLL] = {"epoll", "epoll_wait", 1},
#else
	[L_EPOLL] = {"epoll", "epoll_wait", 0},
#endif
	[L_EPOLL_PWAIT] = {"epoll_pwait", "epoll_pwait", 1},
	[L_EPOLL_PWAIT2] = {"epoll_pwait2", "epoll_pwait2", 1},
#ifdef SYS_poll
	[L_POLL] = {"poll", "poll", 1},
#else
	[L_POLL] = {"poll", "poll", 0},
#endif
	[L_PPOLL] = {"ppoll", "ppoll", 1},
#ifdef SYS_select
	[L_SELECT] = {"select", "select", 1},
#else
	[L_SELECT] = {"select", "select", 0},
#endif
	[L_PSELECT] = {"pselect", "pselect6", 1},
};
#define N_LOOP_KINDS (int)(sizeof(loop_kinds) / sizeof(loop_kinds[0]))

/* ------------------------------------------------------------------------ */
/* script                                                                    */

enum step_kind { K_SPIN, K_SLEEP, K_IO, K_RUNNABLE, K_SHORT, K_STUCK, K_EXIT, K_LATE, K_NAPS };
static const char *const kind_names[] = {"spin", "sleep", "io", "runnable", "short", "stuck", "exit", "late",
					 "naps"};
#define N_KINDS (int)(sizeof(kind_names) / sizeof(kind_names[0]))

struct step {
	enum step_kind kind;
	long arg;    /* ms, count or exit code; late: the delivery delay */
	long arg2;   /* late: ms the task spins once it runs */
	long repeat; /* xN */
};

struct script {
	struct step *steps;
	int n;
};

/* ------------------------------------------------------------------------ */
/* configuration and shared state                                            */

static struct {
	enum loop_kind loop;
	uint64_t gap_ns;
	uint64_t start_delay_ns;
	struct script main_script, worker_script;
	int nworkers;
	const char *io_dir;
	const char *truth_path;
	const char *name;
	int measure;
	int nice;
	int have_nice;
	int fifo;  /* --fifo PRIO: SCHED_FIFO for every thread (0: not) */
} cfg = {.loop = L_EPOLL, .gap_ns = 100 * NS_PER_MS, .io_dir = "/var/tmp"};

static FILE *truth;
static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t the_pid;

/* io:MS */
static int io_fd = -1;

/* stuck: released by SIGUSR1 (see signal_main) */
static pthread_mutex_t stuck_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stuck_cond = PTHREAD_COND_INITIALIZER;
static uint64_t release_gen;   /* bumped by every SIGUSR1 */
static int n_stuck;            /* tasks blocked in stuck right now */
static int pending_releases;   /* SIGUSR1s that came while none was stuck */

/* workers */
static atomic_int workers_left;
static struct loop *main_loop;

/* --start-on-signal: SIGUSR2 ends the idle wait (see signal_main) */
static atomic_int start_now;

/* --measure sampler */
static pthread_mutex_t sampler_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sampler_cond = PTHREAD_COND_INITIALIZER;
static int n_sampling;

struct loop {
	int index;             /* 0 = main thread, K = jt-worker-K */
	pid_t tid;
	char name[16];
	const struct script *script;
	int epfd, tfd, efd;
	int task_seq;
	void *io_buf;
	double io_ns_per_byte;  /* running estimate, sizes the last reads */
	uint64_t rng;
	/* runnable:MS hog, same CPU, preempts this thread */
	pthread_t hog;
	int has_hog;
	int hog_fifo;          /* 1: hog is SCHED_FIFO; 0: we go SCHED_IDLE */
	pthread_mutex_t hog_lock;
	pthread_cond_t hog_cond;
	int hog_go;
	uint64_t hog_deadline;
	uint64_t hog_start;    /* late: the hog sleeps until then, then spins */
	/* late:MS: armed by a preparatory dispatch, run by the next one */
	int late_pending;
	uint64_t late_wake;    /* when the timer that ends the wait fires */
	int late_cpu;
	cpu_set_t late_saved;
	atomic_int hog_busy;
	pthread_barrier_t *hog_ready;
	int sched_fd;          /* /proc/self/task/TID/schedstat: run delay */
	/* --measure */
	int stat_fd;           /* /proc/self/task/TID/stat */
	atomic_int sampling;
	atomic_long samples[3]; /* R, S, D */
	pthread_barrier_t *started;
};

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("jank_target: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void bad_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("jank_target: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(try --help)\n", stderr);
	exit(2);
}

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* One JSON object per line, flushed at once; lines from threads never mix. */
static void emit(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&truth_lock);
	fputs(buf, truth);
	fputc('\n', truth);
	fflush(truth);
	pthread_mutex_unlock(&truth_lock);
}

static void json_str(char *out, size_t n, const char *s)
{
	size_t j = 0;
	for (; *s && j + 7 < n; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[j++] = '\\';
			out[j++] = (char)c;
		} else if (c < 0x20) {
			j += (size_t)snprintf(out + j, n - j, "\\u%04x", c);
		} else {
			out[j++] = (char)c;
		}
	}
	out[j] = 0;
}

static void arm_timer(struct loop *L, uint64_t ns)
{
	struct itimerspec its = {0};
	if (ns == 0)
		ns = 1; /* 0 would disarm */
	its.it_value.tv_sec = (time_t)(ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(ns % 1000000000ull);
	if (timerfd_settime(L->tfd, 0, &its, NULL))
		die("timerfd_settime: %s", strerror(errno));
}

static int drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	if (r == (ssize_t)sizeof(v))
		return 1;
	if (r < 0 && errno != EAGAIN && errno != EINTR)
		die("read: %s", strerror(errno));
	return 0;
}

static void kick(int efd)
{
	uint64_t one = 1;
	if (write(efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		die("eventfd write: %s", strerror(errno));
}

/*
 * Block in the loop's wait syscall until the timerfd or eventfd is ready.
 * *t_in is taken right before the syscall is entered, *t_out right after it
 * returns: these are the task boundaries the kernel sees.
 */
static void do_wait(struct loop *L, uint64_t *t_in, uint64_t *t_out)
{
	struct epoll_event ev[4];
	struct pollfd pfd[2] = {{.fd = L->tfd, .events = POLLIN}, {.fd = L->efd, .events = POLLIN}};
	int maxfd = L->tfd > L->efd ? L->tfd : L->efd;
	fd_set rfds;
	long r;

	FD_ZERO(&rfds);
	FD_SET(L->tfd, &rfds);
	FD_SET(L->efd, &rfds);

	switch (cfg.loop) {
	case L_EPOLL:
#ifdef SYS_epoll_wait
		*t_in = now_ns();
		r = syscall(SYS_epoll_wait, L->epfd, ev, 4, -1);
		*t_out = now_ns();
		break;
#endif
	case L_EPOLL_PWAIT:
		*t_in = now_ns();
		r = syscall(SYS_epoll_pwait, L->epfd, ev, 4, -1, NULL, (size_t)8);
		*t_out = now_ns();
		break;
	case L_EPOLL_PWAIT2:
		*t_in = now_ns();
		r = syscall(SYS_epoll_pwait2, L->epfd, ev, 4, NULL, NULL, (size_t)8);
		*t_out = now_ns();
		break;
	case L_POLL:
#ifdef SYS_poll
		*t_in = now_ns();
		r = syscall(SYS_poll, pfd, 2, -1);
		*t_out = now_ns();
		break;
#endif
	case L_PPOLL:
		*t_in = now_ns();
		r = syscall(SYS_ppoll, pfd, 2, NULL, NULL, (size_t)8);
		*t_out = now_ns();
		break;
	case L_SELECT:
#ifdef SYS_select
		*t_in = now_ns();
		r = syscall(SYS_select, maxfd + 1, &rfds, NULL, NULL, NULL);
		*t_out = now_ns();
		break;
#endif
	case L_PSELECT:
	default:
		*t_in = now_ns();
		r = syscall(SYS_pselect6, maxfd + 1, &rfds, NULL, NULL, NULL, NULL);
		*t_out = now_ns();
		break;
	}
	if (r < 0 && errno != EINTR)
		die("%s: %s", loop_kinds[cfg.loop].syscall, strerror(errno));
}

/* ------------------------------------------------------------------------ */
/* --measure: the thread's own view of where a task's time went              */

struct meas {
	uint64_t cpu_ns;    /* CLOCK_THREAD_CPUTIME_ID: running */
	uint64_t delay_ns;  /* schedstat run_delay: runnable, waiting for a CPU */
};

/* The thread's schedstat run_delay: ns it has waited on a runqueue. */
static uint64_t run_delay_ns(struct loop *L)
{
	char buf[128];
	unsigned long long run = 0, delay = 0;
	if (L->sched_fd < 0)
		return 0;
	ssize_t n = pread(L->sched_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (sscanf(buf, "%llu %llu", &run, &delay) != 2)
		return 0;
	return delay;
}

static void meas_take(struct loop *L, struct meas *m)
{
	m->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	m->delay_ns = run_delay_ns(L);
}

static void sampling_set(struct loop *L, int on)
{
	if (!cfg.measure)
		return;
	pthread_mutex_lock(&sampler_lock);
	if (on) {
		for (int i = 0; i < 3; i++)
			atomic_store(&L->samples[i], 0);
		atomic_store(&L->sampling, 1);
		n_sampling++;
		pthread_cond_signal(&sampler_cond);
	} else {
		atomic_store(&L->sampling, 0);
		n_sampling--;
	}
	pthread_mutex_unlock(&sampler_lock);
}

static struct loop **all_loops;
static int n_loops;

/* Reads each sampled thread's state letter from /proc every SAMPLE_NS. */
static void *sampler_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "jt-sampler");
	for (;;) {
		pthread_mutex_lock(&sampler_lock);
		while (n_sampling == 0)
			pthread_cond_wait(&sampler_cond, &sampler_lock);
		pthread_mutex_unlock(&sampler_lock);
		for (int i = 0; i < n_loops; i++) {
			struct loop *L = all_loops[i];
			char buf[512];
			if (!atomic_load(&L->sampling) || L->stat_fd < 0)
				continue;
			ssize_t n = pread(L->stat_fd, buf, sizeof(buf) - 1, 0);
			if (n <= 0)
				continue;
			buf[n] = 0;
			char *p = strrchr(buf, ')');
			if (!p || p[1] != ' ')
				continue;
			switch (p[2]) {
			case 'R': atomic_fetch_add(&L->samples[0], 1); break;
			case 'S': atomic_fetch_add(&L->samples[1], 1); break;
			case 'D': atomic_fetch_add(&L->samples[2], 1); break;
			}
		}
		struct timespec ts = {0, (long)SAMPLE_NS};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* task bodies                                                               */

static void busy_until(uint64_t deadline)
{
	while (now_ns() < deadline)
		;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/*
 * Synchronous O_DIRECT reads of random blocks: the thread waits in D for
 * each one. What costs CPU in an O_DIRECT read is pinning the buffer's pages,
 * so reads are large (4 MiB, one request on virtio-blk) into a buffer backed
 * by transparent huge pages: on a 2-vCPU VM that is ~95% D, where 256 KiB
 * reads into 4 KiB pages were ~70%. Near the deadline the reads shrink so the
 * task ends close to it. Adds to *ops and *bytes.
 */
static void do_io(struct loop *L, uint64_t deadline, long *ops, uint64_t *bytes)
{
	uint64_t t = now_ns();
	while (t < deadline) {
		size_t len = IO_BLOCK;
		if (L->io_ns_per_byte > 0) {
			double fit = (double)(deadline - t) / L->io_ns_per_byte;
			if (fit < (double)IO_BLOCK)
				len = fit < (double)IO_MIN_BLOCK ? IO_MIN_BLOCK
								 : ((size_t)fit + IO_MIN_BLOCK - 1) / IO_MIN_BLOCK * IO_MIN_BLOCK;
		}
		off_t off = (off_t)(xorshift(&L->rng) % ((IO_FILE_SIZE - len) / IO_MIN_BLOCK + 1)) * IO_MIN_BLOCK;
		ssize_t r = pread(io_fd, L->io_buf, len, off);
		if (r < 0 && errno != EINTR)
			die("io read: %s", strerror(errno));
		uint64_t t2 = now_ns();
		if (r > 0 && len == IO_BLOCK) {
			double v = (double)(t2 - t) / (double)r;
			L->io_ns_per_byte = L->io_ns_per_byte > 0 ? 0.7 * L->io_ns_per_byte + 0.3 * v : v;
		}
		if (r > 0)
			*bytes += (uint64_t)r;
		(*ops)++;
		t = t2;
	}
}

/* A 2 MiB-aligned buffer, THP-backed where the kernel allows (madvise mode). */
static void *alloc_io_buf(void)
{
	size_t len = IO_BLOCK + HUGE_PAGE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	char *a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	madvise(a, IO_BLOCK, MADV_HUGEPAGE);
	memset(a, 0, IO_BLOCK); /* fault it in now, not in the first task */
	return a;
}

static void *hog_main(void *arg)
{
	struct loop *L = arg;
	char name[16];
	struct sched_param sp = {.sched_priority = 50};
	snprintf(name, sizeof(name), "jt-hog-%d", L->index);
	pthread_setname_np(pthread_self(), name);
	L->hog_fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
	pthread_barrier_wait(L->hog_ready);

	pthread_mutex_lock(&L->hog_lock);
	for (;;) {
		while (!L->hog_go)
			pthread_cond_wait(&L->hog_cond, &L->hog_lock);
		L->hog_go = 0;
		uint64_t deadline = L->hog_deadline, start = L->hog_start;
		pthread_mutex_unlock(&L->hog_lock);
		if (start) {
			struct timespec ts = {(time_t)(start / 1000000000ull), (long)(start % 1000000000ull)};
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
		}
		busy_until(deadline);
		atomic_store(&L->hog_busy, 0);
		pthread_mutex_lock(&L->hog_lock);
	}
	return NULL;
}

static void start_hog(struct loop *L)
{
	pthread_barrier_t b;
	pthread_barrier_init(&b, NULL, 2);
	L->hog_ready = &b;
	pthread_mutex_init(&L->hog_lock, NULL);
	pthread_cond_init(&L->hog_cond, NULL);
	if (pthread_create(&L->hog, NULL, hog_main, L))
		die("pthread_create hog");
	pthread_barrier_wait(&b);
	pthread_barrier_destroy(&b);
	L->hog_ready = NULL;
	L->has_hog = 1;
}

/*
 * Runnable but not running: pin this thread and the hog to the CPU we are on,
 * wake the hog (SCHED_FIFO, so it preempts us at once) and let it spin until
 * the deadline. We stay runnable behind it; if we do get the CPU (RT
 * throttling, fair server), we only yield. Without RT rights we make
 * ourselves SCHED_IDLE for the task instead, behind a normal hog.
 */
static int do_runnable(struct loop *L, uint64_t deadline)
{
	cpu_set_t saved, one;
	int cpu = sched_getcpu();
	if (cpu < 0)
		cpu = 0;
	if (sched_getaffinity(0, sizeof(saved), &saved))
		die("sched_getaffinity: %s", strerror(errno));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (pthread_setaffinity_np(L->hog, sizeof(one), &one) || sched_setaffinity(0, sizeof(one), &one))
		die("set affinity to CPU %d failed", cpu);

	struct sched_param sp0 = {0};
	if (!L->hog_fifo && pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp0))
		die("SCHED_IDLE: %s", strerror(errno));

	atomic_store(&L->hog_busy, 1);
	pthread_mutex_lock(&L->hog_lock);
	L->hog_deadline = deadline;
	L->hog_start = 0;
	L->hog_go = 1;
	pthread_mutex_unlock(&L->hog_lock);
	pthread_cond_signal(&L->hog_cond); /* the hog preempts us here */
	while (atomic_load(&L->hog_busy))
		sched_yield();

	if (!L->hog_fifo)
		pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp0);
	sched_setaffinity(0, sizeof(saved), &saved);
	return cpu;
}

/*
 * late:MS, first half (a short preparatory dispatch, no line of its own):
 * pin this thread and the hog to our CPU, let the hog sleep 20 ms and then
 * spin until MS ms past the moment our timer fires, and go back to the wait.
 * The timer's wakeup then finds the CPU taken by a SCHED_FIFO thread, so the
 * wait returns only when the hog stops: the wakeup is delivered MS ms late.
 */
#define LATE_LEAD_NS (20 * NS_PER_MS)
#define LATE_HOG_HEAD_NS (5 * NS_PER_MS)
static void late_prepare(struct loop *L, const struct step *st)
{
	cpu_set_t one;
	int cpu = sched_getcpu();
	if (cpu < 0)
		cpu = 0;
	if (sched_getaffinity(0, sizeof(L->late_saved), &L->late_saved))
		die("sched_getaffinity: %s", strerror(errno));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (pthread_setaffinity_np(L->hog, sizeof(one), &one) || sched_setaffinity(0, sizeof(one), &one))
		die("set affinity to CPU %d failed", cpu);
	struct sched_param sp0 = {0};
	if (!L->hog_fifo && pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp0))
		die("SCHED_IDLE: %s", strerror(errno));
	uint64_t now = now_ns();
	uint64_t hog_start = now + LATE_LEAD_NS;
	L->late_wake = hog_start + LATE_HOG_HEAD_NS;
	L->late_cpu = cpu;
	L->late_pending = 1;
	pthread_mutex_lock(&L->hog_lock);
	L->hog_start = hog_start;
	L->hog_deadline = L->late_wake + (uint64_t)st->arg * NS_PER_MS;
	L->hog_go = 1;
	pthread_mutex_unlock(&L->hog_lock);
	pthread_cond_signal(&L->hog_cond);
	arm_timer(L, L->late_wake - now_ns());
}

/* late:MS, second half, at the start of the task: undo the pinning. */
static void late_finish(struct loop *L)
{
	struct sched_param sp0 = {0};
	if (!L->hog_fifo)
		pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp0);
	sched_setaffinity(0, sizeof(L->late_saved), &L->late_saved);
	L->late_pending = 0;
}

/* Sleep (S, in futex) until SIGUSR1; a release that came early counts. */
static void do_stuck(void)
{
	pthread_mutex_lock(&stuck_lock);
	if (pending_releases > 0) {
		pending_releases--;
	} else {
		uint64_t gen = release_gen;
		n_stuck++;
		while (release_gen == gen)
			pthread_cond_wait(&stuck_cond, &stuck_lock);
		n_stuck--;
	}
	pthread_mutex_unlock(&stuck_lock);
}

static void *signal_main(void *arg)
{
	sigset_t set;
	(void)arg;
	pthread_setname_np(pthread_self(), "jt-signal");
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);
		/* SIGUSR2: the idle wait (start delay or gap) is over; the loop's
		 * timerfd fires now, so its wait returns for an fd, as a real
		 * event would end it. */
		if (sig == SIGUSR2) {
			atomic_store(&start_now, 1);
			if (main_loop)
				arm_timer(main_loop, 1);
		}
		if (sig != SIGUSR1)
			continue;
		pthread_mutex_lock(&stuck_lock);
		if (n_stuck > 0)
			release_gen++;
		else
			pending_releases++;
		pthread_cond_broadcast(&stuck_cond);
		pthread_mutex_unlock(&stuck_lock);
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* the event loop                                                            */

struct record {
	const struct step *st;
	int task;
	uint64_t begin, end;
	long count, target;
	uint64_t max_dur, min_dur, sum_dur;
	long io_ops;
	uint64_t io_bytes;
	long naps;
	int cpu;
	uint64_t wake;  /* late: when the timer that ended the wait fired */
	uint64_t edge_delay; /* run delay across the waits that begin and end it */
	struct meas m0, m1;
};

static const char *state_json(struct loop *L, struct record *R, char *buf, size_t n)
{
	if (!cfg.measure || R->st->kind == K_SHORT) {
		buf[0] = 0;
		return buf;
	}
	uint64_t dur = R->end - R->begin;
	int64_t running = (int64_t)(R->m1.cpu_ns - R->m0.cpu_ns);
	int64_t runnable = (int64_t)(R->m1.delay_ns - R->m0.delay_ns);
	int64_t off = (int64_t)dur - running - runnable;
	if (off < 0)
		off = 0;
	long s = atomic_load(&L->samples[1]), d = atomic_load(&L->samples[2]);
	int64_t blocked = (s + d) ? (int64_t)((double)off * (double)d / (double)(s + d)) : 0;
	if (s + d == 0) { /* never seen asleep: the rest is steal time while on CPU */
		running += off;
		off = 0;
	}
	snprintf(buf, n,
		 ",\"measured_ns\":{\"running\":%" PRId64 ",\"runnable\":%" PRId64 ",\"sleeping\":%" PRId64
		 ",\"blocked_io\":%" PRId64 "},\"samples\":{\"R\":%ld,\"S\":%ld,\"D\":%ld},"
		 "\"cpu_ns\":%" PRIu64 ",\"run_delay_ns\":%" PRIu64,
		 running, runnable, off - blocked, blocked, atomic_load(&L->samples[0]), s, d,
		 R->m1.cpu_ns - R->m0.cpu_ns, R->m1.delay_ns - R->m0.delay_ns);
	return buf;
}

static void emit_record(struct loop *L, struct record *R)
{
	char extra[512] = "", st[512], name[64];
	enum step_kind k = R->st->kind;
	json_str(name, sizeof(name), L->name);
	if (k == K_SHORT)
		snprintf(extra, sizeof(extra),
			 ",\"count\":%ld,\"max_dur_ns\":%" PRIu64 ",\"min_dur_ns\":%" PRIu64 ",\"sum_dur_ns\":%" PRIu64,
			 R->count, R->max_dur, R->min_dur, R->sum_dur);
	else if (k == K_IO)
		snprintf(extra, sizeof(extra), ",\"io_ops\":%ld,\"io_bytes\":%" PRIu64, R->io_ops, R->io_bytes);
	else if (k == K_NAPS)
		snprintf(extra, sizeof(extra), ",\"naps\":%ld", R->naps);
	else if (k == K_RUNNABLE)
		snprintf(extra, sizeof(extra), ",\"cpu\":%d,\"method\":\"%s\"", R->cpu,
			 L->hog_fifo ? "fifo" : "idle");
	else if (k == K_LATE)
		snprintf(extra, sizeof(extra),
			 ",\"spin_ms\":%ld,\"wake_ns\":%" PRIu64 ",\"delivery_ns\":%" PRIu64 ",\"cpu\":%d,\"method\":\"%s\"",
			 R->st->arg2, R->wake, R->begin - R->wake, R->cpu, L->hog_fifo ? "fifo" : "idle");
	emit("{\"task\":%d,\"kind\":\"%s\",\"arg\":%ld,\"tid\":%d,\"pid\":%d,\"thread\":\"%s\",\"worker\":%d,"
	     "\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"dur_ns\":%" PRIu64 ",\"wait\":\"%s\","
	     "\"edge_delay_ns\":%" PRIu64 "%s%s}",
	     R->task, kind_names[k], R->st->arg, L->tid, the_pid, name, L->index, R->begin, R->end,
	     R->end - R->begin, loop_kinds[cfg.loop].syscall, k == K_SHORT ? 0 : R->edge_delay, extra,
	     state_json(L, R, st, sizeof(st)));
}

/* Run one dispatch of the record's step; t0 is when the wait returned. */
static void run_body(struct loop *L, struct record *R, uint64_t t0)
{
	const struct step *st = R->st;
	uint64_t deadline = t0 + (uint64_t)st->arg * NS_PER_MS;
	struct timespec ts;

	switch (st->kind) {
	case K_SPIN:
		busy_until(deadline);
		break;
	case K_SLEEP:
		ts.tv_sec = (time_t)(deadline / 1000000000ull);
		ts.tv_nsec = (long)(deadline % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		break;
	case K_IO:
		do_io(L, deadline, &R->io_ops, &R->io_bytes);
		break;
	case K_NAPS: /* a blocking switch-out (an off-CPU capture) every ~1 ms */
		while (now_ns() < deadline) {
			ts.tv_sec = 0;
			ts.tv_nsec = 1000000;
			nanosleep(&ts, NULL);
			R->naps++;
		}
		break;
	case K_RUNNABLE:
		R->cpu = do_runnable(L, deadline);
		break;
	case K_SHORT:
		busy_until(t0 + SHORT_WORK_NS);
		break;
	case K_STUCK: {
		char name[64];
		json_str(name, sizeof(name), L->name);
		emit("{\"stuck\":true,\"task\":%d,\"kind\":\"stuck\",\"tid\":%d,\"pid\":%d,\"thread\":\"%s\","
		     "\"worker\":%d,\"begin_ns\":%" PRIu64 ",\"wait\":\"%s\"}",
		     R->task, L->tid, the_pid, name, L->index, R->begin, loop_kinds[cfg.loop].syscall);
		do_stuck();
		break;
	}
	case K_LATE:
		late_finish(L);
		busy_until(t0 + (uint64_t)st->arg2 * NS_PER_MS);
		break;
	case K_EXIT:
		break;
	}
}

static void emit_done(int code)
{
	emit("{\"done\":true,\"exit\":%d,\"mono_ns\":%" PRIu64 "}", code, now_ns());
}

/* Returns the exit code asked for by the script (main thread: exits). */
static int run_loop(struct loop *L)
{
	const struct script *S = L->script;
	int si = 0;
	long rep = 0;
	int active = 0, sub_open = 0, kick_pending = 0, script_done = 0, exit_code = 0;
	struct record R;
	uint64_t sub_begin = 0, t_in, t_out;

	arm_timer(L, atomic_load(&start_now) ? 1 : cfg.start_delay_ns);
	for (;;) {
		if (sub_open && cfg.measure && R.st->kind != K_SHORT) {
			sampling_set(L, 0);
			meas_take(L, &R.m1);
		}
		/* The kernel bounds a task at the wait's syscall, this program at
		 * its clock reads around it: what the thread waited for a CPU in
		 * between is in one span only. Read where a task may begin or end. */
		int edge = !active || (sub_open && (R.st->kind != K_SHORT || R.count + 1 == R.target));
		uint64_t delay_in = edge ? run_delay_ns(L) : 0;
		do_wait(L, &t_in, &t_out);
		uint64_t edge_delay = edge ? run_delay_ns(L) - delay_in : 0;

		/* The wait ended the open dispatch: account it. */
		if (sub_open) {
			uint64_t d = t_in - sub_begin;
			sub_open = 0;
			R.count++;
			R.sum_dur += d;
			if (d > R.max_dur)
				R.max_dur = d;
			if (d < R.min_dur)
				R.min_dur = d;
			R.end = t_in;
			R.edge_delay += edge_delay;
			if (R.count == R.target) {
				emit_record(L, &R);
				active = 0;
			}
		}
		int fired = drain(L->tfd);
		int kicked = drain(L->efd);

		if (active) { /* short:N in progress: the eventfd is the next dispatch */
			if (kick_pending && kicked) {
				kick_pending = 0;
				sub_begin = t_out;
				run_body(L, &R, t_out);
				sub_open = 1;
				if (R.count + 1 < R.target) {
					kick(L->efd);
					kick_pending = 1;
				} else {
					arm_timer(L, cfg.gap_ns);
				}
			}
			continue;
		}
		if (script_done) {
			if (L->index == 0 && atomic_load(&workers_left) == 0)
				break;
			continue;
		}
		if (!fired)
			continue;

		/* The gap (or start delay) is over: next step. */
		while (si < S->n && rep >= S->steps[si].repeat) {
			si++;
			rep = 0;
		}
		if (si >= S->n || S->steps[si].kind == K_EXIT) {
			if (si < S->n)
				exit_code = (int)S->steps[si].arg;
			script_done = 1;
			if (L->index != 0 || atomic_load(&workers_left) == 0)
				break;
			continue; /* main: idle until the workers are done */
		}
		const struct step *st = &S->steps[si];
		if (st->kind == K_LATE && !L->late_pending) {
			late_prepare(L, st); /* the step itself runs at the next wakeup */
			continue;
		}
		rep++;
		memset(&R, 0, sizeof(R));
		R.st = st;
		R.task = ++L->task_seq;
		R.begin = t_out;
		R.edge_delay = edge_delay;
		R.target = st->kind == K_SHORT ? st->arg : 1;
		R.min_dur = UINT64_MAX;
		if (st->kind == K_LATE) {
			R.wake = L->late_wake;
			R.cpu = L->late_cpu;
		}
		active = 1;
		if (cfg.measure && st->kind != K_SHORT) {
			meas_take(L, &R.m0);
			sampling_set(L, 1);
		}
		sub_begin = t_out;
		run_body(L, &R, t_out);
		sub_open = 1;
		if (R.target > 1) {
			kick(L->efd);
			kick_pending = 1;
		} else {
			arm_timer(L, cfg.gap_ns);
		}
	}
	return exit_code;
}

static int setup_loop(struct loop *L)
{
	L->tid = gettid_();
	L->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)L->tid << 17) ^ now_ns();
	L->stat_fd = -1;
	{
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", L->tid);
		L->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	L->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	L->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (L->tfd < 0 || L->efd < 0)
		die("timerfd/eventfd: %s", strerror(errno));
	if (cfg.loop == L_EPOLL || cfg.loop == L_EPOLL_PWAIT || cfg.loop == L_EPOLL_PWAIT2) {
		struct epoll_event ev = {.events = EPOLLIN};
		L->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (L->epfd < 0)
			die("epoll_create1: %s", strerror(errno));
		ev.data.fd = L->tfd;
		if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, L->tfd, &ev))
			die("epoll_ctl: %s", strerror(errno));
		ev.data.fd = L->efd;
		if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, L->efd, &ev))
			die("epoll_ctl: %s", strerror(errno));
	}
	for (int i = 0; i < L->script->n; i++) {
		enum step_kind k = L->script->steps[i].kind;
		if (k == K_IO && !L->io_buf) {
			/* one read to size the first task's reads, and warm the path */
			long ops = 0;
			uint64_t bytes = 0;
			L->io_buf = alloc_io_buf();
			do_io(L, now_ns() + 1, &ops, &bytes);
		}
		if ((k == K_RUNNABLE || k == K_LATE) && !L->has_hog)
			start_hog(L);
	}
	if (cfg.measure) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", L->tid);
		L->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct loop *L = arg;
	pthread_setname_np(pthread_self(), L->name);
	setup_loop(L);
	pthread_barrier_wait(L->started);
	run_loop(L);
	atomic_fetch_sub(&workers_left, 1);
	kick(main_loop->efd);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* setup                                                                     */

static int script_has(const struct script *s, enum step_kind k)
{
	for (int i = 0; i < s->n; i++)
		if (s->steps[i].kind == k)
			return 1;
	return 0;
}

/* Fill a file with real data (holes would read without any I/O), unlinked at
 * once so nothing is left behind; io:MS reads it with O_DIRECT. */
static void setup_io(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/jank_target.%d.io", cfg.io_dir, (int)the_pid);
	io_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (io_fd < 0)
		bad_usage("cannot create %s with O_DIRECT (--io-dir must be on a disk filesystem): %s", path,
		    strerror(errno));
	unlink(path);
	struct statfs sfs;
	if (fstatfs(io_fd, &sfs) == 0 && (sfs.f_type == 0x01021994 /* tmpfs */ || sfs.f_type == 0x858458f6 /* ramfs */))
		bad_usage("--io-dir %s is in memory (tmpfs): io:MS needs a disk filesystem", cfg.io_dir);
	void *buf;
	if (posix_memalign(&buf, 4096, 1 << 20))
		die("out of memory");
	for (size_t i = 0; i < (1u << 20); i++)
		((unsigned char *)buf)[i] = (unsigned char)(i * 131 + 7);
	for (uint64_t off = 0; off < IO_FILE_SIZE; off += 1 << 20)
		if (pwrite(io_fd, buf, 1 << 20, (off_t)off) != 1 << 20)
			die("writing the io file in %s: %s", cfg.io_dir, strerror(errno));
	if (fdatasync(io_fd))
		die("fdatasync: %s", strerror(errno));
	free(buf);
}

static long parse_long(const char *s, const char *what, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		bad_usage("invalid %s '%s' (an integer from %ld to %ld)", what, s, min, max);
	return v;
}

static uint64_t parse_ms_float(const char *s, const char *what, double scale)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 1e6)
		bad_usage("invalid %s '%s'", what, s);
	return (uint64_t)(v * scale + 0.5);
}

/* NAME[:NUM][xN], comma separated */
static void parse_script(const char *text, struct script *out, const char *what)
{
	char *copy = strdup(text), *save = NULL;
	out->steps = calloc(MAX_STEPS, sizeof(struct step));
	out->n = 0;
	if (!copy || !out->steps)
		die("out of memory");
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct step st = {.repeat = 1, .arg = -1};
		char *x = strrchr(tok, 'x');
		while (*tok == ' ')
			tok++;
		if (x && x > tok && x[1] && strspn(x + 1, "0123456789") == strlen(x + 1)) {
			st.repeat = parse_long(x + 1, "repeat count", 1, 1000000);
			*x = 0;
		}
		char *colon = strchr(tok, ':');
		if (colon)
			*colon++ = 0;
		int k;
		for (k = 0; k < N_KINDS; k++)
			if (!strcmp(tok, kind_names[k]))
				break;
		if (k == N_KINDS)
			bad_usage("%s: unknown step '%s' (spin, sleep, io, runnable, short, stuck, exit, late, naps)", what, tok);
		st.kind = (enum step_kind)k;
		switch (st.kind) {
		case K_SPIN: case K_SLEEP: case K_IO: case K_RUNNABLE: case K_NAPS:
			if (!colon)
				bad_usage("%s: '%s' needs a duration, e.g. %s:200", what, tok, tok);
			st.arg = parse_long(colon, "duration (ms)", 1, 3600 * 1000);
			break;
		case K_SHORT:
			if (!colon)
				bad_usage("%s: 'short' needs a count, e.g. short:1000", what);
			st.arg = parse_long(colon, "short count", 1, 100000000);
			break;
		case K_STUCK:
			if (colon)
				bad_usage("%s: 'stuck' takes no argument", what);
			st.arg = 0;
			break;
		case K_EXIT:
			st.arg = colon ? parse_long(colon, "exit code", 0, 255) : 0;
			break;
		case K_LATE: {
			if (!colon)
				bad_usage("%s: 'late' needs a delay, e.g. late:100 or late:100:200", what);
			char *second = strchr(colon, ':');
			if (second)
				*second++ = 0;
			st.arg = parse_long(colon, "delivery delay (ms)", 1, 900);
			st.arg2 = second ? parse_long(second, "spin (ms)", 0, 3600 * 1000) : 200;
			break;
		}
		}
		if (out->n >= MAX_STEPS)
			bad_usage("%s: too many steps", what);
		out->steps[out->n++] = st;
	}
	free(copy);
}

static void usage(FILE *f)
{
	fputs(
"usage: jank_target [options]\n"
"An event loop on the main thread that runs scripted tasks and prints its own\n"
"ground truth as JSON lines.\n"
"\n"
"  --loop KIND          epoll (epoll_wait, default), epoll_pwait, epoll_pwait2,\n"
"                       poll, ppoll, select, pselect (pselect6); where there\n"
"                       is no epoll_wait (arm64) the default is epoll_pwait\n"
"  --script STEPS       comma-separated steps, run in order (default: none)\n"
"  --gap MS             idle time in the wait between tasks (default 100)\n"
"  --start-delay SEC    idle time in the loop before the script (default 0)\n"
"  --start-on-signal    the start delay (default then 3600 s) ends at SIGUSR2:\n"
"                       the loop's timerfd fires, so the first task begins at\n"
"                       a wait return for an fd, like a real event's; each\n"
"                       SIGUSR2 ends the idle wait then (with a long --gap:\n"
"                       one step per signal)\n"
"  --threads N          also run N worker threads (jt-worker-K), own loops\n"
"  --worker-script S    the workers' script (default: none)\n"
"  --io-dir DIR         where io:MS reads its O_DIRECT file (default /var/tmp)\n"
"  --truth FILE         write the JSON lines to FILE instead of stdout\n"
"  --name NAME          set the process name (comm) of the main thread\n"
"  --measure            add the thread's own measure of each task's states\n"
"                       (running, runnable from schedstat; S/D split sampled)\n"
"  --nice N             nice value of all threads (e.g. -20 on a busy machine,\n"
"                       so spin stays running and io wakeups get a CPU at once)\n"
"  --fifo PRIO          SCHED_FIFO at PRIO (1-49) for all threads: nice does not\n"
"                       cross scheduler autogroups, a real-time class does\n"
"\n"
"Steps (a task each; xN repeats a step N times, with gaps):\n"
"  spin:MS      burn CPU for MS ms                       running\n"
"  sleep:MS     nanosleep MS ms inside the task          sleeping (S)\n"
"  naps:MS      1 ms nanosleeps for MS ms (many switch-outs); its line adds\n"
"               \"naps\": how many                          sleeping (S)\n"
"  io:MS        O_DIRECT reads for MS ms                 blocked_io (D)\n"
"  runnable:MS  preempted by a pinned SCHED_FIFO hog     runnable\n"
"  short:N      N back-to-back ~20 us tasks (eventfd), one summary line\n"
"  stuck        block until SIGUSR1, then end the task   sleeping (S)\n"
"  late:D[:MS]  the wakeup that starts the task waits D ms for its CPU behind\n"
"               a pinned SCHED_FIFO hog (delivery), then it spins MS ms\n"
"               (default 200); its line adds wake_ns and delivery_ns     running\n"
"  exit[:CODE]  end the program with CODE (default at the end: 0)\n"
"e.g. --script spin:200,sleep:300,io:250,runnable:300,short:2000,stuck,spin:100x3\n"
"\n"
"Output (CLOCK_MONOTONIC ns; begin right after the wait returns, end right\n"
"before the next wait is entered):\n"
"  {\"ready\":true,\"pid\":P,\"tid\":P,\"loop\":..,\"wait\":..,\"workers\":[tids],...}\n"
"  {\"task\":K,\"kind\":..,\"arg\":..,\"tid\":..,\"pid\":..,\"thread\":..,\"worker\":W,\n"
"   \"begin_ns\":..,\"end_ns\":..,\"dur_ns\":..,\"wait\":..,\"edge_delay_ns\":..}\n"
"   one per task; edge_delay_ns: schedstat run delay across the waits that\n"
"   begin and end it (time only the kernel's span of the task may hold)\n"
"  {\"task\":K,\"kind\":\"short\",...,\"count\":N,\"max_dur_ns\":..}  one per short:N\n"
"  {\"stuck\":true,\"task\":K,\"tid\":..,\"begin_ns\":..}   when a stuck task starts\n"
"  {\"done\":true,\"exit\":CODE}\n"
"Bad arguments exit 2.\n", f);
}

int main(int argc, char **argv)
{
	int start_on_signal = 0, have_delay = 0;
	enum { OPT_LOOP = 1, OPT_SCRIPT, OPT_GAP, OPT_DELAY, OPT_THREADS, OPT_WSCRIPT, OPT_IODIR, OPT_TRUTH, OPT_NAME,
	       OPT_MEASURE, OPT_NICE, OPT_FIFO, OPT_START_SIGNAL, OPT_HELP };
	static const struct option opts[] = {
		{"loop", required_argument, 0, OPT_LOOP},
		{"script", required_argument, 0, OPT_SCRIPT},
		{"gap", required_argument, 0, OPT_GAP},
		{"start-delay", required_argument, 0, OPT_DELAY},
		{"threads", required_argument, 0, OPT_THREADS},
		{"worker-script", required_argument, 0, OPT_WSCRIPT},
		{"io-dir", required_argument, 0, OPT_IODIR},
		{"truth", required_argument, 0, OPT_TRUTH},
		{"name", required_argument, 0, OPT_NAME},
		{"measure", no_argument, 0, OPT_MEASURE},
		{"nice", required_argument, 0, OPT_NICE},
		{"fifo", required_argument, 0, OPT_FIFO},
		{"start-on-signal", no_argument, 0, OPT_START_SIGNAL},
		{"help", no_argument, 0, OPT_HELP},
		{0, 0, 0, 0},
	};
	const char *script = "", *wscript = "";
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_LOOP: {
			int k;
			for (k = 0; k < N_LOOP_KINDS; k++)
				if (!strcmp(optarg, loop_kinds[k].opt))
					break;
			if (k == N_LOOP_KINDS)
				bad_usage("unknown --loop '%s' (epoll, epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect)",
					  optarg);
			if (!loop_kinds[k].available)
				bad_usage("--loop %s: %s does not exist on this architecture", optarg,
					  loop_kinds[k].syscall);
			cfg.loop = (enum loop_kind)k;
			break;
		}
		case OPT_SCRIPT: script = optarg; break;
		case OPT_GAP: cfg.gap_ns = (uint64_t)parse_long(optarg, "--gap (ms)", 0, 3600 * 1000) * NS_PER_MS; break;
		case OPT_DELAY:
			cfg.start_delay_ns = parse_ms_float(optarg, "--start-delay (s)", 1e9);
			have_delay = 1;
			break;
		case OPT_THREADS: cfg.nworkers = (int)parse_long(optarg, "--threads", 0, MAX_WORKERS); break;
		case OPT_WSCRIPT: wscript = optarg; break;
		case OPT_IODIR: cfg.io_dir = optarg; break;
		case OPT_TRUTH: cfg.truth_path = optarg; break;
		case OPT_NAME:
			if (!*optarg || strlen(optarg) > 15)
				bad_usage("--name must be 1 to 15 characters");
			cfg.name = optarg;
			break;
		case OPT_MEASURE: cfg.measure = 1; break;
		case OPT_START_SIGNAL: start_on_signal = 1; break;
		case OPT_FIFO:
			cfg.fifo = (int)parse_long(optarg, "--fifo", 1, 49);
			break;
		case OPT_NICE:
			cfg.nice = (int)parse_long(optarg, "--nice", -20, 19);
			cfg.have_nice = 1;
			break;
		case 'h': case OPT_HELP: usage(stdout); return 0;
		default:
			if (optopt >= OPT_LOOP && optopt <= OPT_HELP)
				bad_usage("option '--%s' needs a value", opts[optopt - OPT_LOOP].name);
			if (optopt)
				bad_usage("unknown option '-%c'", optopt);
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	/* arm64 has no epoll_wait: its libc's epoll_wait() is epoll_pwait */
	if (!loop_kinds[cfg.loop].available)
		cfg.loop = L_EPOLL_PWAIT;
	parse_script(script, &cfg.main_script, "--script");
	parse_script(wscript, &cfg.worker_script, "--worker-script");
	if (cfg.worker_script.n && !cfg.nworkers)
		bad_usage("--worker-script needs --threads N");

	truth = stdout;
	if (cfg.truth_path && !(truth = fopen(cfg.truth_path, "w")))
		die("cannot open %s: %s", cfg.truth_path, strerror(errno));
	if (cfg.name)
		prctl(PR_SET_NAME, cfg.name, 0, 0, 0);
	/* per thread on Linux: every thread created below inherits it */
	if (cfg.have_nice && setpriority(PRIO_PROCESS, 0, cfg.nice))
		die("--nice %d: %s", cfg.nice, strerror(errno));
	/* Inherited too. Below the hogs' priority (50), so runnable and late
	 * still wait for them; above every normal task, so nothing else on a
	 * busy machine takes the CPU from a spin. */
	if (cfg.fifo) {
		struct sched_param sp = {.sched_priority = cfg.fifo};
		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			die("--fifo %d: %s", cfg.fifo, strerror(errno));
	}
	the_pid = getpid();

	/* SIGUSR1/2 are taken by jt-signal only; every thread inherits the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (start_on_signal && !have_delay)
		cfg.start_delay_ns = 3600ull * 1000000000ull;
	int any_stuck = script_has(&cfg.main_script, K_STUCK) ||
			(cfg.nworkers && script_has(&cfg.worker_script, K_STUCK)) || start_on_signal;
	int any_io = script_has(&cfg.main_script, K_IO) || (cfg.nworkers && script_has(&cfg.worker_script, K_IO));
	pthread_t th;
	if (any_stuck && pthread_create(&th, NULL, signal_main, NULL))
		die("pthread_create");
	if (any_io)
		setup_io();

	n_loops = 1 + cfg.nworkers;
	all_loops = calloc((size_t)n_loops, sizeof(*all_loops));
	struct loop *loops = calloc((size_t)n_loops, sizeof(*loops));
	if (!all_loops || !loops)
		die("out of memory");
	main_loop = &loops[0];
	main_loop->script = &cfg.main_script;
	prctl(PR_GET_NAME, main_loop->name, 0, 0, 0);
	main_loop->name[15] = 0;
	setup_loop(main_loop);
	all_loops[0] = main_loop;

	pthread_barrier_t started;
	pthread_barrier_init(&started, NULL, (unsigned)n_loops);
	atomic_store(&workers_left, cfg.nworkers);
	for (int i = 1; i < n_loops; i++) {
		struct loop *L = &loops[i];
		L->index = i;
		L->script = &cfg.worker_script;
		L->started = &started;
		snprintf(L->name, sizeof(L->name), "jt-worker-%d", i % 1000);
		all_loops[i] = L;
		if (pthread_create(&th, NULL, worker_main, L))
			die("pthread_create");
	}
	pthread_barrier_wait(&started);
	if (cfg.measure && pthread_create(&th, NULL, sampler_main, NULL))
		die("pthread_create");

	char workers[64 * 12] = "", name[64];
	size_t off = 0;
	for (int i = 1; i < n_loops; i++)
		off += (size_t)snprintf(workers + off, sizeof(workers) - off, "%s%d", i > 1 ? "," : "",
					loops[i].tid);
	json_str(name, sizeof(name), main_loop->name);
	emit("{\"ready\":true,\"pid\":%d,\"tid\":%d,\"comm\":\"%s\",\"loop\":\"%s\",\"wait\":\"%s\","
	     "\"workers\":[%s],\"mono_ns\":%" PRIu64 ",\"real_ns\":%" PRIu64 ",\"start_delay_ns\":%" PRIu64
	     ",\"gap_ns\":%" PRIu64 "}",
	     the_pid, main_loop->tid, name, loop_kinds[cfg.loop].opt, loop_kinds[cfg.loop].syscall, workers,
	     now_ns(), clock_ns(CLOCK_REALTIME), cfg.start_delay_ns, cfg.gap_ns);

	int code = run_loop(main_loop);
	emit_done(code);
	if (truth != stdout)
		fclose(truth);
	_exit(code);
}
