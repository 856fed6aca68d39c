// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stack_perf_sampler: records what jankbpf's perf sampler records, from a
 * real kernel, for the unwinder's fixtures: a cpu-clock event on one thread
 * with the sample_type of src/sampling/perf_sampler.cpp (TID TIME CPU
 * CALLCHAIN REGS_USER STACK_USER, exclude_callchain_user, CLOCK_MONOTONIC
 * timestamps), every user register (the mask of src/arch/regs.cpp) and
 * 16 KiB of user stack. Used by scripts/capture-aarch64-fixtures.sh
 * --kernel inside a VM booting Debian's arm64 kernel.
 *
 *   stack_perf_sampler PID OUTDIR [PERIOD_MS]
 *
 * Runs until PID exits. Writes to OUTDIR:
 *   attr.txt     sample_type, regs_mask, stack_bytes, period_ns
 *   samples.bin  the PERF_RECORD_SAMPLE records as the ring held them,
 *                except that the user stack is cut to dyn_size (rounded up
 *                to 8; what lies past dyn_size is not stack) with the
 *                record's size fixed up, so the file stays small
 *   maps         /proc/PID/maps when sampling began
 *   vdso.so      the [vdso] image, read from /proc/PID/mem
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__aarch64__)
#define REGS_MASK 0x1ffffffffull /* x0..x30, sp, pc */
#elif defined(__x86_64__)
#define REGS_MASK 0xff01ffull
#else
#error "stack_perf_sampler: x86_64 or aarch64"
#endif
#define STACK_BYTES 16384
#define RING_PAGES 64

static const char *outdir;

static void die(const char *what)
{
	fprintf(stderr, "stack_perf_sampler: %s: %s\n", what, strerror(errno));
	exit(1);
}

static FILE *out_file(const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", outdir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		die(path);
	return f;
}

static void copy_maps_and_vdso(int pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *in = fopen(path, "r");
	if (!in)
		die(path);
	FILE *out = out_file("maps");
	char line[4096];
	unsigned long vlo = 0, vhi = 0;
	while (fgets(line, sizeof line, in)) {
		fputs(line, out);
		unsigned long lo, hi;
		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			vlo = lo, vhi = hi;
	}
	fclose(in);
	fclose(out);
	if (!vhi)
		return;
	snprintf(path, sizeof path, "/proc/%d/mem", pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	size_t n = vhi - vlo;
	char *buf = malloc(n);
	if (!buf || pread(fd, buf, n, (off_t)vlo) != (ssize_t)n)
		die("reading the vdso");
	close(fd);
	FILE *v = out_file("vdso.so");
	if (fwrite(buf, 1, n, v) != n)
		die("vdso.so");
	fclose(v);
	free(buf);
}

static uint64_t sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			      PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
			      PERF_SAMPLE_STACK_USER;

/* Writes one sample with the stack cut to dyn_size. */
static void write_sample(FILE *f, const uint8_t *rec, size_t len)
{
	const uint64_t *w = (const uint64_t *)rec;
	size_t n = len / 8, i = 1; /* past the header */
	i += 3;                    /* pid/tid, time, cpu/res */
	if (i >= n)
		return;
	i += 1 + w[i];             /* callchain */
	if (i >= n)
		return;
	uint64_t abi = w[i++];
	if (abi)
		i += (size_t)__builtin_popcountll(REGS_MASK);
	if (i >= n)
		return;
	uint64_t size = w[i];
	size_t stack_at = i + 1;
	if (size == 0 || stack_at + size / 8 >= n) {
		fwrite(rec, 1, len, f);
		return;
	}
	uint64_t dyn = w[stack_at + size / 8];
	uint64_t keep = (dyn + 7) & ~7ull;
	if (keep > size)
		keep = size;
	struct perf_event_header h = *(const struct perf_event_header *)rec;
	h.size = (uint16_t)((stack_at * 8) + keep + 8);
	fwrite(&h, sizeof h, 1, f);
	fwrite(rec + sizeof h, 1, (i * 8) - sizeof h, f);
	fwrite(&keep, 8, 1, f);
	fwrite(rec + stack_at * 8, 1, keep, f);
	fwrite(&dyn, 8, 1, f);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: stack_perf_sampler PID OUTDIR [PERIOD_MS]\n");
		return 2;
	}
	int pid = atoi(argv[1]);
	outdir = argv[2];
	unsigned period_ms = argc == 4 ? (unsigned)atoi(argv[3]) : 10;
	mkdir(outdir, 0755);

	struct perf_event_attr attr = {0};
	attr.size = sizeof attr;
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = (uint64_t)period_ms * 1000000;
	attr.sample_type = sample_type;
	attr.sample_regs_user = REGS_MASK;
	attr.sample_stack_user = STACK_BYTES;
	attr.exclude_callchain_user = 1;
	attr.disabled = 1;
	attr.wakeup_events = 1;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	int fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		die("perf_event_open");
	long page = sysconf(_SC_PAGESIZE);
	size_t ring_size = (size_t)RING_PAGES * (size_t)page;
	uint8_t *base = mmap(NULL, ring_size + (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		die("mmap");
	struct perf_event_mmap_page *meta = (void *)base;
	uint8_t *ring = base + page;

	copy_maps_and_vdso(pid);
	FILE *a = out_file("attr.txt");
	fprintf(a, "sample_type 0x%llx\nregs_mask 0x%llx\nstack_bytes %d\nperiod_ns %llu\n",
		(unsigned long long)sample_type, (unsigned long long)REGS_MASK, STACK_BYTES,
		(unsigned long long)attr.sample_period);
	fclose(a);
	FILE *out = out_file("samples.bin");
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		die("enable");

	static uint8_t rec[65536] __attribute__((aligned(8)));
	unsigned samples = 0, lost = 0;
	for (;;) {
		int alive = kill(pid, 0) == 0 || errno != ESRCH;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		poll(&p, 1, 100);
		uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = meta->data_tail;
		while (tail < head) {
			struct perf_event_header h;
			for (size_t k = 0; k < sizeof h; k++)
				((uint8_t *)&h)[k] = ring[(tail + k) % ring_size];
			for (size_t k = 0; k < h.size; k++)
				rec[k] = ring[(tail + k) % ring_size];
			if (h.type == PERF_RECORD_SAMPLE) {
				write_sample(out, rec, h.size);
				samples++;
			} else if (h.type == PERF_RECORD_LOST) {
				lost++;
			}
			tail += h.size;
		}
		__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
		if (!alive || (p.revents & POLLHUP))
			break;
	}
	fclose(out);
	fprintf(stderr, "stack_perf_sampler: %u samples, %u lost records\n", samples, lost);
	return 0;
}
