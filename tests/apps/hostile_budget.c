// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * hostile_budget: an unprivileged process that tries to make jankbpf spend
 * what it should not (issue 26), for tests/e2e/test_budgets.py. It sets up
 * one attack, prints "ready", then janks: an event loop on epoll_wait whose
 * every task spins (or sleeps) long enough to be sampled and reported.
 *
 *   hostile_budget sparse DIR COUNT MIB   COUNT sparse ELF files of MIB MiB whose
 *                                          section headers claim most of it (a
 *                                          .symtab, DWARF), mapped executable
 *   hostile_budget many DIR COUNT         COUNT distinct 64-byte ELF files, each
 *                                          mapped executable
 *   hostile_budget perfmap MIB            a MIB MiB /tmp/perf-PID.map of 6-byte
 *                                          lines; the tasks spin in JIT code
 *   hostile_budget jit                    the tasks spin in JIT code (the test
 *                                          lays out the perf map)
 *   hostile_budget sleepy N               N processes whose tasks sleep
 *
 * Options (before the mode): --spin MS (default 300), --sleep MS (a task
 * sleeps this long instead), --gap MS (between tasks, default 200),
 * --seconds S (then exit, default 60), --procs N (N processes each make
 * and map files of their own, each prints its ready line).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int spin_ms = 300, sleep_ms = 0, gap_ms = 200, seconds = 60, procs = 0;

static void die(const char *what)
{
	fprintf(stderr, "hostile_budget: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void pwrite_all(int fd, const void *p, size_t n, off_t off)
{
	if (pwrite(fd, p, n, off) != (ssize_t)n)
		die("pwrite");
}

#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
/* loop: dec %rdi; jnz loop; ret */
static const unsigned char busy_code[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
/* loop: subs x0, x0, #1; b.ne loop; ret */
static const uint32_t busy_code[] = {0xf1000400, 0x54ffffe1, 0xd65f03c0};
#endif

/*
 * A 64-bit ELF of `size` bytes, sparse: its header, one PT_LOAD, and at
 * its end section headers claiming a .symtab and DWARF that fill the holes.
 */
static void write_sparse_elf(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die(path);
	Elf64_Ehdr eh = {0};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = ELF_MACHINE;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof eh;
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1;
	eh.e_ehsize = sizeof eh;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 6;
	eh.e_shstrndx = 3;
	eh.e_shoff = size - 6 * sizeof(Elf64_Shdr);
	Elf64_Phdr ph = {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_filesz = 4096, .p_memsz = 4096, .p_align = 4096};
	static const char names[] = "\0.symtab\0.strtab\0.shstrtab\0.debug_info\0.debug_abbrev";
	const uint64_t big = (size - 3 * 4096) / 2 & ~4095ull;
	Elf64_Shdr sh[6] = {
		{0},
		{.sh_name = 1, .sh_type = SHT_SYMTAB, .sh_offset = 8192, .sh_size = big, .sh_link = 2,
		 .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym)},
		{.sh_name = 9, .sh_type = SHT_STRTAB, .sh_offset = 8192 + big, .sh_size = 16, .sh_addralign = 1},
		{.sh_name = 17, .sh_type = SHT_STRTAB, .sh_offset = 4096, .sh_size = sizeof names, .sh_addralign = 1},
		{.sh_name = 27, .sh_type = SHT_PROGBITS, .sh_offset = 8192 + big + 4096, .sh_size = big - 8192,
		 .sh_addralign = 1},
		{.sh_name = 39, .sh_type = SHT_PROGBITS, .sh_offset = 8192, .sh_size = 16, .sh_addralign = 1},
	};
	pwrite_all(fd, &eh, sizeof eh, 0);
	pwrite_all(fd, &ph, sizeof ph, sizeof eh);
	pwrite_all(fd, names, sizeof names, 4096);
	pwrite_all(fd, sh, sizeof sh, eh.e_shoff);
	if (ftruncate(fd, size) != 0)
		die("ftruncate");
	close(fd);
}

/* Maps `path` executable (its first page) and keeps it mapped. */
static void map_exec(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
		die("mmap");
	close(fd);
}

static void (*jit_loop)(uint64_t);

/* Anonymous executable memory holding a busy loop: JIT code to perf. */
static void make_jit(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap jit");
	memcpy(p, busy_code, sizeof busy_code);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0)
		die("mprotect");
	__builtin___clear_cache((char *)p, (char *)p + sizeof busy_code);
	jit_loop = (void (*)(uint64_t))p;
}

static volatile uint64_t sink;

static void task(void)
{
	if (sleep_ms) {
		struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
		return;
	}
	uint64_t end = now_ns() + (uint64_t)spin_ms * 1000000ull;
	while (now_ns() < end) {
		if (jit_loop)
			jit_loop(200000);
		else
			for (int i = 0; i < 200000; i++)
				sink += i;
	}
}

/* The event loop: wait, run a task, until `seconds` have passed. */
static void loop(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	uint64_t stop = now_ns() + (uint64_t)seconds * 1000000000ull;
	struct epoll_event ev;
	while (now_ns() < stop) {
		epoll_wait(ep, &ev, 1, gap_ms);
		task();
	}
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--spin"))
			spin_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sleep"))
			sleep_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--gap"))
			gap_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--procs"))
			procs = atoi(argv[i + 1]);
		else
			break;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: hostile_budget [--spin MS|--sleep MS] [--gap MS] [--seconds S] "
				"sparse DIR COUNT MIB | many DIR COUNT | perfmap MIB | jit | sleepy N\n");
		return 2;
	}
	const char *mode = argv[i];
	char path[4096];
	int self = 0;  /* with --procs: this process's index, in its files' names */
	for (int k = 1; k <= procs; k++) {
		pid_t c = fork();
		if (c < 0)
			die("fork");
		if (c == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			self = k;
			break;
		}
		if (k == procs) {
			while (wait(NULL) > 0)
				;
			return 0;
		}
	}
	if (!strcmp(mode, "sparse") && i + 3 < argc) {
		int count = atoi(argv[i + 2]);
		uint64_t size = strtoull(argv[i + 3], NULL, 10) << 20;
		for (int k = 0; k < count; k++) {
			snprintf(path, sizeof path, "%s/sparse-%d-%d.so", argv[i + 1], self, k);
			write_sparse_elf(path, size);
			map_exec(path);
		}
	} else if (!strcmp(mode, "many") && i + 2 < argc) {
		int count = atoi(argv[i + 2]);
		Elf64_Ehdr eh = {0};
		memcpy(eh.e_ident, ELFMAG, SELFMAG);
		eh.e_ident[EI_CLASS] = ELFCLASS64;
		eh.e_ident[EI_DATA] = ELFDATA2LSB;
		eh.e_ident[EI_VERSION] = EV_CURRENT;
		eh.e_type = ET_DYN;
		eh.e_machine = ELF_MACHINE;
		eh.e_version = EV_CURRENT;
		eh.e_ehsize = sizeof eh;
		for (int k = 0; k < count; k++) {
			snprintf(path, sizeof path, "%s/tiny-%d-%d.so", argv[i + 1], self, k);
			int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd < 0)
				die(path);
			pwrite_all(fd, &eh, sizeof eh, 0);
			if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
				die("mmap");
			close(fd);
		}
	} else if (!strcmp(mode, "perfmap") && i + 1 < argc) {
		make_jit();
		uint64_t size = strtoull(argv[i + 1], NULL, 10) << 20;
		snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			die(path);
		static char buf[1 << 20];
		for (size_t k = 0; k + 6 <= sizeof buf; k += 6)
			memcpy(buf + k, "0 1 a\n", 6);
		for (uint64_t done = 0; done < size; done += sizeof buf / 6 * 6)
			if (write(fd, buf, sizeof buf / 6 * 6) < 0)
				die("write");
		close(fd);
	} else if (!strcmp(mode, "jit")) {
		make_jit();
	} else if (!strcmp(mode, "sleepy") && i + 1 < argc) {
		int n = atoi(argv[i + 1]);
		for (int k = 0; k < n; k++) {
			pid_t c = fork();
			if (c < 0)
				die("fork");
			if (c == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				loop();
				_exit(0);
			}
		}
		printf("ready\n");
		fflush(stdout);
		while (wait(NULL) > 0)
			;
		return 0;
	} else {
		fprintf(stderr, "hostile_budget: bad mode or arguments\n");
		return 2;
	}
	printf("ready %d\n", getpid());
	fflush(stdout);
	loop();
	return 0;
}
