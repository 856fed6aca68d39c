// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cause_target: an epoll event loop whose long tasks wait for planted
 * causes, each measured by the app itself: the truth jankbpf's `cause` is
 * compared with (tests/e2e/test_causes.py, bench's cause table).
 *
 *   cause_target [--start-delay S] [--gap MS] [--cpu N] STEP...
 *     lock:MS   a worker ("holder") takes a mutex and runs crunch_a for MS ms;
 *               the task locks that mutex
 *     peer:MS   a request on a pipe to a child process ("peer") that runs
 *               crunch_b for MS ms before it replies
 *     chain:MS  the same to a child ("chainb") that, to reply, locks a mutex
 *               its worker thread ("chainc") holds while it runs crunch_c MS ms
 *     hog:MS    a child ("hog"), SCHED_FIFO and pinned to this thread's CPU,
 *               spins MS ms while the task wants the CPU
 *     sleep:MS  nanosleep for MS ms, from nap_here()
 *     quota:MS  spin for MS ms of wall time (run it in a cgroup with a cpu
 *               quota: the throttled time is read from the cgroup's cpu.stat)
 *     spin:MS   spin MS ms
 *     fsync:MB  write MB MiB to a new file in --io-dir (default /var/tmp) and
 *               fsync it (the fd stays open until the next fsync step)
 *     fault:MB  touch every page of an MB MiB file in --io-dir, mapped in the
 *               task after its pages were dropped from the page cache
 *               (written and fsynced before the loop, POSIX_FADV_DONTNEED
 *               at the step's start, outside its measure):
 *               major faults, one a page (MADV_RANDOM; mapped until the
 *               next task)
 *     mmaplock:K  a thread ("mmapw") holds this process's mmap_lock for
 *               write -- one mprotect merging 2K thousand VMAs it split
 *               beforehand (50-190 ms for K=30 on the test VM; K <= 32
 *               under the default vm.max_map_count) -- from 5 ms
 *               before the task; the task calls mincore(), which takes it
 *               for read. wait_ns: mincore's wall time less its CPU time
 *               (asleep and queued: the kernel counts both, the stretch
 *               began inside the lock's wait), queued_ns the run delay
 *               in it; hold_ns: mprotect's own time. The task first waits
 *               for mmapw to enter its mprotect (+1 ms); then it spins to
 *               150 ms
 *     reclaim:MB  (run it in a memory cgroup whose limit the page cache of
 *               --fill-file, read before the first task, fills) the task
 *               touches MB MB of new anonymous memory, which the kernel
 *               charges by reclaiming that page cache, then spins to 150 ms;
 *               wait_ns: the touching's wall time (reclaim is inside it)
 *   hostile input (tests/e2e/test_causes.py):
 *     junk:MS   a futex wait on a word shaped like a glibc mutex whose
 *               __owner names --junk-owner TID (another process's thread);
 *               the holder thread wakes it after MS ms
 *     storm:MS  a futex wait ended after MS ms, meanwhile woken thousands
 *               of times by four threads (it waits again each time)
 * A task runs from one epoll_wait return (a timerfd, every --gap ms, 250 by
 * default) to the next entry. Peer and chain tasks first make three short
 * round trips, so the peer has woken the loop before the long one.
 *
 * Lines (CLOCK_MONOTONIC ns), one JSON object each:
 *   {"ready":true,"pid","tid","holder_tid","peer_pid","peer_tid","chainb_pid",
 *    "chainb_tid","chainc_tid","hog_pid","cpu","lock_addr","chain_lock_addr"}
 *   {"task":K,"kind","arg","begin_ns","end_ns","wait_ns"}  wait_ns: the time
 *     the cause itself took, by the app's own measure: lock, peer, chain,
 *     sleep, fsync, fault: the time asleep in the step (its wall time less the CPU time
 *     and the run-queue delay its schedstat gained: the queueing after a
 *     wakeup is not the cause's); hog: the run_delay gained; quota: the
 *     cgroup's throttled time gained, and hold_ns the run_delay gained (a
 *     throttled thread stays queued on its cfs_rq: its throttled time and
 *     any other queueing); fault: hold_ns is what the step's measure
 *     counted as not asleep (CPU time and run-queue delay)
 *   every line adds "fsync_ns": fsync, the time asleep in the fsync() call
 *   alone (0 for other steps); fsync and fault lines add "file" (its path)
 *   and "resident" (fault: the
 *   file's pages in the page cache as the task began, by mincore)
 *   {"done":true}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "cause_target: %s: %s\n", what, strerror(errno));
	exit(2);
}

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

static volatile uint64_t sink;

/* The work the tests expect to find by name: inlined into each, which makes
 * no calls out, so every sample's leaf is the function itself. */
static inline __attribute__((always_inline)) void spin_until(uint64_t until)
{
	uint64_t x = sink;
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
	} while (now_ns() < until);
}

NOINLINE void crunch_a(uint64_t until) { spin_until(until); sink++; }
NOINLINE void crunch_b(unsigned ms) { spin_until(now_ns() + ms * 1000000ull); sink++; }
NOINLINE void crunch_c(unsigned ms) { spin_until(now_ns() + ms * 1000000ull); sink++; }

static void read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			exit(0); /* the other side is gone */
		p += r;
		n -= (size_t)r;
	}
}

static void write_full(int fd, const void *buf, size_t n)
{
	if (write(fd, buf, n) != (ssize_t)n)
		die("write");
}

/* This thread's schedstat: CPU time and run-queue delay, ns. */
struct sched_snap {
	uint64_t wall, run, delay;
};

static struct sched_snap snap(void)
{
	char path[64], buf[128];
	unsigned long long run = 0, delay = 0;
	snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", gettid_());
	FILE *f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof buf, f) || sscanf(buf, "%llu %llu", &run, &delay) != 2)
		die("schedstat");
	fclose(f);
	return (struct sched_snap){now_ns(), run, delay};
}

static uint64_t run_delay_ns(void) { return snap().delay; }

/* The time asleep between two snapshots. */
static uint64_t asleep_ns(struct sched_snap a, struct sched_snap b)
{
	uint64_t wall = b.wall - a.wall, busy = (b.run - a.run) + (b.delay - a.delay);
	return wall > busy ? wall - busy : 0;
}

/* ---- lock: a worker holds the mutex while it computes -------------------- */

/*
 * The holder takes the mutex before the task begins (asked at the end of
 * the task before, with the next task's start time), so the task itself
 * does nothing but lock it.
 */
/* In .data: its address lies in the file mapping (the test names it
 * cause_target+0x...), wherever the .bss ends. */
static pthread_mutex_t lock_m __attribute__((section(".data"))) = PTHREAD_MUTEX_INITIALIZER;
static int holder_go[2];
static atomic_int holder_tid;
struct hold {
	uint64_t from_ns, until_ns;
};

static void *holder_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "holder");
	atomic_store(&holder_tid, gettid_());
	for (;;) {
		struct hold h;
		read_full(holder_go[0], &h, sizeof h);
		struct timespec ts = {(time_t)(h.from_ns / 1000000000ull), (long)(h.from_ns % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		pthread_mutex_lock(&lock_m);
		crunch_a(h.until_ns);
		pthread_mutex_unlock(&lock_m);
	}
	return NULL;
}

/* Asks the holder to hold the mutex from 30 ms before `task_ns` to MS ms after. */
static void plan_hold(uint64_t task_ns, unsigned ms)
{
	struct hold h = {task_ns - 30000000ull, task_ns + ms * 1000000ull};
	write_full(holder_go[1], &h, sizeof h);
}

static NOINLINE uint64_t do_lock(void)
{
	struct sched_snap s0 = snap();
	pthread_mutex_lock(&lock_m);
	struct sched_snap s1 = snap();
	pthread_mutex_unlock(&lock_m);
	return asleep_ns(s0, s1);
}

/* ---- hostile: a forged owner, a storm of wakeups --------------------------- */

static long futex(atomic_int *uaddr, int op, int val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* Shaped like pthread_mutex_t: the word, __count, __owner. */
static struct {
	atomic_int word;
	unsigned count;
	int owner;
} forged;
static int junk_owner = 1;
static const char *fill_file;

struct waker_job {
	atomic_int *word;
	uint64_t at_ns;    /* junk: wake once then */
	atomic_int stop;   /* storm: until this is set */
};
static struct waker_job junk_job;

static void *junk_waker(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "junkwaker");
	struct timespec ts = {(time_t)(junk_job.at_ns / 1000000000ull), (long)(junk_job.at_ns % 1000000000ull)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	atomic_store(junk_job.word, 0);
	futex(junk_job.word, FUTEX_WAKE_PRIVATE, 1);
	return NULL;
}

static NOINLINE uint64_t do_junk(unsigned ms)
{
	pthread_t t;
	forged.owner = junk_owner;
	atomic_store(&forged.word, 2);
	junk_job.word = &forged.word;
	junk_job.at_ns = now_ns() + ms * 1000000ull;
	if (pthread_create(&t, NULL, junk_waker, NULL))
		die("junk waker");
	struct sched_snap s0 = snap();
	while (atomic_load(&forged.word) == 2)
		futex(&forged.word, FUTEX_WAIT_PRIVATE, 2);
	uint64_t asleep = asleep_ns(s0, snap());
	pthread_join(t, NULL);
	return asleep;
}

static atomic_int storm_word;
static atomic_int storm_stop;

static void *storm_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "stormer");
	while (!atomic_load(&storm_stop)) {
		futex(&storm_word, FUTEX_WAKE_PRIVATE, 1);
		sched_yield();
	}
	return NULL;
}

static NOINLINE uint64_t do_storm(unsigned ms)
{
	pthread_t t[4];
	uint64_t until = now_ns() + ms * 1000000ull;
	atomic_store(&storm_stop, 0);
	atomic_store(&storm_word, 1);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, storm_main, NULL))
			die("stormer");
	struct sched_snap s0 = snap();
	while (now_ns() < until) {
		struct timespec rel = {0, 1000000}; /* wait again, bounded: the storm wakes it anyway */
		syscall(SYS_futex, &storm_word, FUTEX_WAIT_PRIVATE, 1, &rel, NULL, 0);
	}
	uint64_t asleep = asleep_ns(s0, snap());
	atomic_store(&storm_stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return asleep;
}

/* ---- peer and chain: a request to another process ------------------------ */

struct child {
	pid_t pid, tid, worker_tid;
	int req, rep; /* our ends */
};

/* chain: the child's worker holds this mutex while it runs crunch_c. */
static pthread_mutex_t chain_m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int chain_held;
static int chain_go[2];

static void *chainc_main(void *arg)
{
	int *tid_pipe = arg;
	prctl(PR_SET_NAME, "chainc");
	pid_t tid = gettid_();
	write_full(tid_pipe[1], &tid, sizeof tid);
	for (;;) {
		unsigned ms;
		read_full(chain_go[0], &ms, sizeof ms);
		pthread_mutex_lock(&chain_m);
		atomic_store(&chain_held, 1);
		crunch_c(ms);
		atomic_store(&chain_held, 0);
		pthread_mutex_unlock(&chain_m);
	}
	return NULL;
}

static void child_loop(int req, int rep, int chain)
{
	for (;;) {
		unsigned ms;
		read_full(req, &ms, sizeof ms);
		if (!ms) {
			/* A short round trip: reply 2 ms later, so the loop is
			 * asleep in its read and woken by us (a reply already
			 * there when it reads wakes nobody; seen under qemu). */
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
		if (ms && !chain)
			crunch_b(ms);
		if (ms && chain) {
			write_full(chain_go[1], &ms, sizeof ms);
			while (!atomic_load(&chain_held))
				;
			pthread_mutex_lock(&chain_m);
			pthread_mutex_unlock(&chain_m);
		}
		char c = 1;
		write_full(rep, &c, 1);
	}
}

static struct child start_child(const char *name, int chain)
{
	int req[2], rep[2], ids[2];
	struct child c = {0};
	if (pipe(req) || pipe(rep) || pipe(ids))
		die("pipe");
	c.pid = fork();
	if (c.pid < 0)
		die("fork");
	if (c.pid == 0) {
		prctl(PR_SET_NAME, name);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(req[1]);
		close(rep[0]);
		pid_t tid = gettid_();
		write_full(ids[1], &tid, sizeof tid);
		if (chain) {
			pthread_t t;
			if (pipe(chain_go) || pthread_create(&t, NULL, chainc_main, ids))
				die("chain worker");
		} else {
			pid_t none = 0;
			write_full(ids[1], &none, sizeof none);
		}
		child_loop(req[0], rep[1], chain);
		_exit(0);
	}
	close(req[0]);
	close(rep[1]);
	read_full(ids[0], &c.tid, sizeof c.tid);
	read_full(ids[0], &c.worker_tid, sizeof c.worker_tid);
	close(ids[0]);
	close(ids[1]);
	c.req = req[1];
	c.rep = rep[0];
	return c;
}

static uint64_t round_trip(struct child *c, unsigned ms)
{
	char r;
	write_full(c->req, &ms, sizeof ms);
	uint64_t t0 = now_ns();
	read_full(c->rep, &r, 1);
	return now_ns() - t0;
}

static NOINLINE uint64_t do_peer(struct child *c, unsigned ms)
{
	struct sched_snap s0 = snap();
	for (int i = 0; i < 3; i++)
		round_trip(c, 0);
	round_trip(c, ms);
	return asleep_ns(s0, snap());
}

/* ---- hog: a SCHED_FIFO process on our CPU -------------------------------- */

struct hog {
	pid_t pid;
	int req;
	atomic_int *busy; /* shared */
};

static struct hog start_hog(int cpu)
{
	int req[2];
	struct hog h = {0};
	h.busy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (h.busy == MAP_FAILED || pipe(req))
		die("hog setup");
	h.pid = fork();
	if (h.pid < 0)
		die("fork");
	if (h.pid == 0) {
		prctl(PR_SET_NAME, "hog");
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		struct sched_param sp = {.sched_priority = 50};
		if (sched_setaffinity(0, sizeof one, &one) || sched_setscheduler(0, SCHED_FIFO, &sp))
			die("hog: pin or SCHED_FIFO");
		close(req[1]);
		for (;;) {
			unsigned ms;
			read_full(req[0], &ms, sizeof ms);
			spin_until(now_ns() + ms * 1000000ull);
			atomic_store(h.busy, 0);
		}
	}
	close(req[0]);
	h.req = req[1];
	return h;
}

static NOINLINE uint64_t do_hog(struct hog *h, unsigned ms)
{
	uint64_t d0 = run_delay_ns();
	atomic_store(h->busy, 1);
	write_full(h->req, &ms, sizeof ms); /* it preempts us here */
	while (atomic_load(h->busy))
		; /* we want the CPU all along */
	return run_delay_ns() - d0;
}

/* ---- sleep ----------------------------------------------------------------- */

NOINLINE uint64_t nap_here(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	struct sched_snap s0 = snap();
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return asleep_ns(s0, snap());
}

/* ---- quota: the cgroup's own count of its throttled time ----------------- */

static char cpu_stat_path[512];

static void find_cpu_stat(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctrl = c1 + 1, *path = c2 + 1;
		/* v1: a line whose controllers include cpu; v2: "0::PATH" */
		if (strstr(ctrl, "cpu") && !strstr(ctrl, "cpuset") &&
		    (strcmp(ctrl, "cpu") == 0 || strncmp(ctrl, "cpu,", 4) == 0 || strstr(ctrl, ",cpu"))) {
			const char *mnt = access("/sys/fs/cgroup/cpu,cpuacct", F_OK) == 0 ? "/sys/fs/cgroup/cpu,cpuacct"
											   : "/sys/fs/cgroup/cpu";
			snprintf(cpu_stat_path, sizeof cpu_stat_path, "%s%s/cpu.stat", mnt, path);
			break;
		}
		if (*ctrl == 0 && !cpu_stat_path[0]) {
			const char *mnt = access("/sys/fs/cgroup/unified", F_OK) == 0 ? "/sys/fs/cgroup/unified"
										       : "/sys/fs/cgroup";
			snprintf(cpu_stat_path, sizeof cpu_stat_path, "%s%s/cpu.stat", mnt, path);
		}
	}
	fclose(f);
}

/* v1: throttled_time (ns); v2: throttled_usec. */
static uint64_t throttled_ns(void)
{
	FILE *f = cpu_stat_path[0] ? fopen(cpu_stat_path, "r") : NULL;
	char key[64];
	unsigned long long v;
	uint64_t out = 0;
	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", key, &v) == 2) {
		if (strcmp(key, "throttled_time") == 0)
			out = v;
		else if (strcmp(key, "throttled_usec") == 0)
			out = v * 1000ull;
	}
	fclose(f);
	return out;
}

/* The count when the last quota step began, and that step: the next task
 * reads it again (quota_to_end), so a throttle after this step's own last
 * read -- the quota running out during that read, slow under TCG -- is in
 * the truth as it is in the task. Nothing runs in the cgroup between the
 * tasks, so nothing else is throttled meanwhile. */
static uint64_t quota_from;
static int quota_step = -1;

static NOINLINE uint64_t do_quota(unsigned ms, uint64_t *queued)
{
	uint64_t d0 = run_delay_ns();
	uint64_t t0 = throttled_ns();
	quota_from = t0;
	spin_until(now_ns() + ms * 1000000ull);
	uint64_t t1 = throttled_ns();
	*queued = run_delay_ns() - d0;
	return t1 - t0;
}

static void quota_to_end(void)
{
	if (quota_step < 0)
		return;
	printf("{\"quota_step\":%d,\"throttled_to_end_ns\":%" PRIu64 "}\n", quota_step,
	       throttled_ns() - quota_from);
	quota_step = -1;
}

/* ---- fsync, fault: block I/O and major faults on a real file ------------ */

static const char *io_dir = "/var/tmp";
static char step_file[512];
static long step_resident = -1;
static int io_fd = -1;        /* the fsync step's file, open until the next task */
static unsigned fsync_files;  /* made so far: removed at the exit */
static int fault_fd = -1;     /* the fault step's file */
static size_t fault_bytes;
static void *fault_map;       /* mapped until the next task */
static char fault_path[512];

/* On the heap: a large .bss would move the lock's mutex out of the
 * file-backed page the lock test names it by. */
static char *mib_buffer(void)
{
	static char *buf;
	if (!buf && !(buf = malloc(1 << 20)))
		die("malloc");
	return buf;
}

/* The fsync step: the time asleep in the fsync() call alone (the writes
 * before it may sleep too: dirty-page throttling, allocation). */
static uint64_t fsync_call_ns;

static NOINLINE uint64_t do_fsync(unsigned mb)
{
	char *buf = mib_buffer();
	/* The last step's file was kept open past its task's end, for jankbpf
	 * to name; closed here, outside the measure. */
	if (io_fd >= 0)
		close(io_fd);
	struct sched_snap a = snap();
	/* A new file each time: unlinking the last one would be I/O of the task too. */
	snprintf(step_file, sizeof step_file, "%s/cause_target_fsync.%d.%u", io_dir, getpid(), ++fsync_files);
	io_fd = open(step_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (io_fd < 0)
		die("open fsync file");
	memset(buf, 0x5a, 1 << 20);
	for (unsigned i = 0; i < mb; i++) {
		buf[0] = (char)i; /* not all alike */
		write_full(io_fd, buf, 1 << 20);
	}
	struct sched_snap f = snap();
	if (fsync(io_fd))
		die("fsync");
	struct sched_snap b = snap();
	fsync_call_ns = asleep_ns(f, b);
	return asleep_ns(a, b);
}

/* The file the fault steps map: written and made durable once, before the loop. */
static void make_fault_file(unsigned mb)
{
	char *buf = mib_buffer();
	snprintf(fault_path, sizeof fault_path, "%s/cause_target_fault.%d", io_dir, getpid());
	fault_fd = open(fault_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fault_fd < 0)
		die("open fault file");
	for (unsigned i = 0; i < mb; i++) {
		memset(buf, (int)(i & 0xff) | 1, 1 << 20);
		write_full(fault_fd, buf, 1 << 20);
	}
	if (fsync(fault_fd))
		die("fsync fault file");
	fault_bytes = (size_t)mb << 20;
}

/* Before a fault task: its pages out of the page cache (clean, unmapped). */
static void drop_fault_pages(void)
{
	if (fault_map) {
		munmap(fault_map, fault_bytes);
		fault_map = NULL;
	}
	if (posix_fadvise(fault_fd, 0, 0, POSIX_FADV_DONTNEED))
		die("posix_fadvise");
}

static long resident_pages(void *p, size_t bytes)
{
	size_t pages = bytes / 4096;
	unsigned char *vec = malloc(pages);
	long n = 0;
	if (!vec || mincore(p, bytes, vec))
		die("mincore");
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

static NOINLINE uint64_t touch_pages(volatile const char *p, size_t bytes)
{
	unsigned sum = 0;
	for (size_t off = 0; off < bytes; off += 4096)
		sum += p[off];
	return sum;
}

static NOINLINE uint64_t do_fault(uint64_t *busy)
{
	/* In the task, not before it: the last task's mapping stays until its
	 * record is made (jankbpf names the file through it). */
	drop_fault_pages();
	struct sched_snap a = snap();
	fault_map = mmap(NULL, fault_bytes, PROT_READ, MAP_SHARED, fault_fd, 0);
	if (fault_map == MAP_FAILED)
		die("mmap fault file");
	/* No read-around: each page is a major fault of its own. */
	if (madvise(fault_map, fault_bytes, MADV_RANDOM))
		die("madvise");
	step_resident = resident_pages(fault_map, fault_bytes);
	snprintf(step_file, sizeof step_file, "%s", fault_path);
	touch_pages(fault_map, fault_bytes);
	struct sched_snap b = snap();
	*busy = (b.run - a.run) + (b.delay - a.delay);
	return asleep_ns(a, b);
}

/* ---- mmaplock: another thread holds mmap_lock for write ------------------- */

static char *mmapw_region;
static size_t mmapw_pages;
static int mmapw_go[2];
static atomic_int mmapw_tid, mmapw_ready, mmapw_entering;
static _Atomic uint64_t mmapw_hold_ns;
static uint64_t mmaplock_queued_ns; /* the step's run delay inside its mincore */

/* Every other page of the read-only region writable: one VMA each, for the
 * merge (all read-only again) to walk. */
static void mmapw_split(void)
{
	for (size_t i = 0; i < mmapw_pages; i++)
		if (mprotect(mmapw_region + i * 8192, 4096, PROT_READ | PROT_WRITE))
			die("mprotect (split)");
}

static void *mmapw_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "mmapw");
	atomic_store(&mmapw_tid, gettid_());
	mmapw_split();
	for (;;) {
		atomic_store(&mmapw_ready, 1);
		uint64_t from;
		read_full(mmapw_go[0], &from, sizeof from);
		atomic_store(&mmapw_ready, 0);
		struct timespec ts = {(time_t)(from / 1000000000ull), (long)(from % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		uint64_t t0 = now_ns();
		atomic_store(&mmapw_entering, 1);
		if (mprotect(mmapw_region, mmapw_pages * 8192, PROT_READ)) /* held for write throughout */
			die("mprotect (merge)");
		atomic_store(&mmapw_hold_ns, now_ns() - t0);
		mmapw_split(); /* for the next step: the loop's gap must cover it */
	}
	return NULL;
}

static void start_mmapw(unsigned k)
{
	pthread_t t;
	mmapw_pages = (size_t)k * 1000;
	mmapw_region = mmap(NULL, mmapw_pages * 8192, PROT_READ,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mmapw_region == MAP_FAILED || pipe(mmapw_go) || pthread_create(&t, NULL, mmapw_main, NULL))
		die("mmapw");
	while (!atomic_load(&mmapw_ready))
		usleep(1000);
}

/* Returns the wait; *hold the writer's own hold time. */
static NOINLINE uint64_t do_mmaplock(uint64_t *hold, uint64_t begin)
{
	static unsigned char vec[1];
	/* The writer wakes 5 ms ahead, but on a loaded machine later than the
	 * task: wait until it is entering its mprotect, then give it 1 ms to
	 * take the lock (CI: a step with no contention at all). */
	while (!atomic_exchange(&mmapw_entering, 0))
		;
	spin_until(now_ns() + 1000000ull);
	struct sched_snap a = snap();
	if (mincore(mmapw_region, 4096, vec))
		die("mincore");
	struct sched_snap b = snap();
	mmaplock_queued_ns = b.delay - a.delay;
	while (!atomic_load(&mmapw_hold_ns))
		;
	*hold = atomic_exchange(&mmapw_hold_ns, 0);
	spin_until(begin + 150000000ull); /* a jank however short the hold */
	uint64_t wall = b.wall - a.wall, cpu = b.run - a.run;
	return wall > cpu ? wall - cpu : 0;
}

/* ---- reclaim: new memory in a cgroup full of page cache ------------------- */

/* The file's pages into the page cache (and the cgroup), before any task. */
static void fill_page_cache(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	if (!f)
		die(path);
	/* Cached before (by its writer, charged to another cgroup): dropped,
	 * so that reading it charges this one. It must be clean (fsync'ed). */
	posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
	while (fread(buf, 1, sizeof buf, f) > 0)
		;
	fclose(f);
}

static NOINLINE uint64_t do_reclaim(unsigned mb, uint64_t begin)
{
	size_t len = (size_t)mb << 20;
	uint64_t t0 = now_ns();
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap (reclaim)");
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	uint64_t took = now_ns() - t0;
	munmap(p, len);
	spin_until(begin + 150000000ull);
	return took;
}

/* ---- the loop -------------------------------------------------------------- */

int main(int argc, char **argv)
{
	double start_delay = 4;
	unsigned gap = 250;
	int cpu = -1, first = 1;
	while (first < argc && strncmp(argv[first], "--", 2) == 0) {
		if (first + 1 >= argc)
			break;
		if (strcmp(argv[first], "--start-delay") == 0)
			start_delay = atof(argv[first + 1]);
		else if (strcmp(argv[first], "--gap") == 0)
			gap = (unsigned)atoi(argv[first + 1]);
		else if (strcmp(argv[first], "--cpu") == 0)
			cpu = atoi(argv[first + 1]);
		else if (strcmp(argv[first], "--junk-owner") == 0)
			junk_owner = atoi(argv[first + 1]);
		else if (strcmp(argv[first], "--io-dir") == 0)
			io_dir = argv[first + 1];
		else if (strcmp(argv[first], "--fill-file") == 0)
			fill_file = argv[first + 1];
		else
			break;
		first += 2;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: cause_target [--start-delay S] [--gap MS] [--cpu N] "
				"lock:MS|peer:MS|chain:MS|hog:MS|sleep:MS|quota:MS|spin:MS ...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cpu < 0)
		cpu = sched_getcpu() < 0 ? 0 : sched_getcpu();
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	int need_hog = 0, need_peer = 0, need_chain = 0, need_quota = 0;
	unsigned fault_mb = 0, mmap_k = 0;
	for (int i = first; i < argc; i++) {
		unsigned mb, k;
		if (sscanf(argv[i], "fault:%u", &mb) == 1 && mb > fault_mb)
			fault_mb = mb;
		if (sscanf(argv[i], "mmaplock:%u", &k) == 1 && k > mmap_k)
			mmap_k = k;
		need_hog |= strncmp(argv[i], "hog:", 4) == 0;
		need_peer |= strncmp(argv[i], "peer:", 5) == 0;
		need_chain |= strncmp(argv[i], "chain:", 6) == 0;
		need_quota |= strncmp(argv[i], "quota:", 6) == 0;
	}
	find_cpu_stat();
	if (fault_mb)
		make_fault_file(fault_mb);

	pthread_t holder;
	if (pipe(holder_go) || pthread_create(&holder, NULL, holder_main, NULL))
		die("holder");
	struct child peer = {0}, chainb = {0};
	struct hog hog = {0};
	if (need_peer)
		peer = start_child("peer", 0);
	if (need_chain)
		chainb = start_child("chainb", 1);
	if (need_hog)
		hog = start_hog(cpu);
	/* Only the loop is pinned, for the hog test (the hog shares its CPU)
	 * and for the quota test (the truth of a quota step is the group's
	 * count, which sums every CPU's cfs_rq of the group: a thread that moved
	 * between CPUs can leave an emptied cfs_rq that is throttled too, 6.1
	 * counts those, a wait of no thread's; on one CPU the group's count is
	 * this thread's); after the forks, so that no other process inherits it. */
	if ((need_hog || need_quota) && sched_setaffinity(0, sizeof one, &one))
		die("sched_setaffinity");
	while (!atomic_load(&holder_tid))
		usleep(1000);
	if (mmap_k)
		start_mmapw(mmap_k);
	if (fill_file)
		fill_page_cache(fill_file);

	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	if (tfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev))
		die("epoll/timerfd");
	printf("{\"ready\":true,\"pid\":%d,\"tid\":%d,\"holder_tid\":%d,\"peer_pid\":%d,\"peer_tid\":%d,"
	       "\"chainb_pid\":%d,\"chainb_tid\":%d,\"chainc_tid\":%d,\"hog_pid\":%d,\"cpu\":%d,"
	       "\"lock_addr\":\"%p\",\"cpu_stat\":\"%s\",\"mmapw_tid\":%d}\n",
	       getpid(), gettid_(), atomic_load(&holder_tid), peer.pid, peer.tid, chainb.pid, chainb.tid,
	       chainb.worker_tid, hog.pid, cpu, (void *)&lock_m, cpu_stat_path, atomic_load(&mmapw_tid));

	uint64_t next = now_ns() + (uint64_t)(start_delay * 1e9);
	struct itimerspec its = {.it_value = {next / 1000000000ull, next % 1000000000ull}};
	if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL))
		die("timerfd_settime");
	for (int i = first, k = 0; i < argc; i++, k++) {
		unsigned lock_ms;
		if (sscanf(argv[i], "lock:%u", &lock_ms) == 1)
			plan_hold(next, lock_ms);
		step_file[0] = 0;
		step_resident = -1;
		fsync_call_ns = 0;
		mmaplock_queued_ns = 0;
		if (!strncmp(argv[i], "mmaplock:", 9)) {
			while (!atomic_load(&mmapw_ready)) /* its split for this step */
				usleep(1000);
			uint64_t from = next - 5000000ull; /* its wakeup may be late on a loaded machine */
			write_full(mmapw_go[1], &from, sizeof from);
		}
		struct epoll_event out;
		uint64_t expirations;
		while (epoll_wait(ep, &out, 1, -1) < 0)
			if (errno != EINTR)
				die("epoll_wait");
		uint64_t begin = now_ns();
		quota_to_end();
		if (read(tfd, &expirations, sizeof expirations) < 0)
			die("read timerfd");
		char kind[16] = "";
		unsigned ms = 0;
		if (sscanf(argv[i], "%15[a-z]:%u", kind, &ms) != 2) {
			fprintf(stderr, "cause_target: bad step '%s'\n", argv[i]);
			return 2;
		}
		uint64_t wait = 0, hold = 0;
		if (!strcmp(kind, "lock"))
			wait = do_lock();
		else if (!strcmp(kind, "peer"))
			wait = do_peer(&peer, ms);
		else if (!strcmp(kind, "chain"))
			wait = do_peer(&chainb, ms);
		else if (!strcmp(kind, "hog"))
			wait = do_hog(&hog, ms);
		else if (!strcmp(kind, "sleep"))
			wait = nap_here(ms);
		else if (!strcmp(kind, "quota")) {
			wait = do_quota(ms, &hold);
			quota_step = k;
		}
		else if (!strcmp(kind, "spin"))
			crunch_b(ms);
		else if (!strcmp(kind, "junk"))
			wait = do_junk(ms);
		else if (!strcmp(kind, "storm"))
			wait = do_storm(ms);
		else if (!strcmp(kind, "fsync"))
			wait = do_fsync(ms);
		else if (!strcmp(kind, "fault"))
			wait = do_fault(&hold);
		else if (!strcmp(kind, "mmaplock"))
			wait = do_mmaplock(&hold, begin);
		else if (!strcmp(kind, "reclaim"))
			wait = do_reclaim(ms, begin);
		else {
			fprintf(stderr, "cause_target: unknown step '%s'\n", kind);
			return 2;
		}
		uint64_t end = now_ns();
		printf("{\"task\":%d,\"kind\":\"%s\",\"arg\":%u,\"begin_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64
		       ",\"wait_ns\":%" PRIu64 ",\"hold_ns\":%" PRIu64 ",\"file\":\"%s\",\"resident\":%ld"
		       ",\"fsync_ns\":%" PRIu64 ",\"queued_ns\":%" PRIu64 "}\n",
		       k, kind, ms, begin, end, wait, hold, step_file, step_resident, fsync_call_ns,
		       mmaplock_queued_ns);
		next = now_ns() + gap * 1000000ull;
		its.it_value.tv_sec = next / 1000000000ull;
		its.it_value.tv_nsec = next % 1000000000ull;
		if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL))
			die("timerfd_settime");
	}
	quota_to_end();
	printf("{\"done\":true}\n");
	for (unsigned i = 1; i <= fsync_files; i++) {
		char path[600];
		snprintf(path, sizeof path, "%s/cause_target_fsync.%d.%u", io_dir, getpid(), i);
		unlink(path);
	}
	if (fault_fd >= 0)
		unlink(fault_path);
	if (peer.pid)
		kill(peer.pid, SIGKILL);
	if (chainb.pid)
		kill(chainb.pid, SIGKILL);
	if (hog.pid)
		kill(hog.pid, SIGKILL);
	while (wait(NULL) > 0)
		;
	return 0;
}
