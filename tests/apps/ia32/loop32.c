// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * loop32: a 32-bit (i386) event loop for the x86_64 kernel lane. A 32-bit
 * process reaches the kernel through the ia32 entry points
 * (__ia32_sys_poll, ...): the syscall tracepoints do not show those calls,
 * jankbpf's trampolines hook them.
 *
 *   loop32 START_DELAY_MS SPIN_MS...
 *
 * Waits START_DELAY_MS in poll(), then per SPIN_MS one task: back from
 * poll(), spin SPIN_MS ms, print "task spin BEGIN_NS END_NS"
 * (CLOCK_MONOTONIC), and poll() 200 ms. No libc: none for i386 can be
 * installed beside the arm64 cross compiler (gcc-multilib removes it), so
 * this is freestanding, with raw `int $0x80` system calls.
 */
#define NR_write 4
#define NR_poll 168
#define NR_exit_group 252
#define NR_clock_gettime64 403
#define CLOCK_MONOTONIC 1

typedef unsigned long long u64;

static long sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return ret;
}

struct ts64 {
	long long sec, nsec;
};

static struct ts64 now_ts(void)
{
	struct ts64 ts;

	sys3(NR_clock_gettime64, CLOCK_MONOTONIC, (long)&ts, 0);
	return ts;
}

static u64 ns_of(struct ts64 ts)
{
	return (u64)ts.sec * 1000000000ull + (u64)ts.nsec;
}

static long parse_ms(const char *s)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 600000)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/* Appends the decimal of v at p, at least `width` digits; returns the
 * end. 32-bit division only: a 64-bit one would need libgcc. */
static char *put_u32(char *p, unsigned v, int width)
{
	char tmp[12];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v || n < width);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* A CLOCK_MONOTONIC time as one decimal of nanoseconds. */
static char *put_ns(char *p, struct ts64 ts)
{
	if (ts.sec)
		return put_u32(put_u32(p, (unsigned)ts.sec, 1), (unsigned)ts.nsec, 9);
	return put_u32(p, (unsigned)ts.nsec, 1);
}

static void put(const char *s, long len)
{
	sys3(NR_write, 1, (long)s, len);
}

static void say(const char *s)
{
	long n = 0;

	while (s[n])
		n++;
	put(s, n);
}

__attribute__((used)) void loop32_main(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	long delay = -1;
	char line[80];

	if (argc < 2 || (delay = parse_ms(argv[1])) < 0) {
		say("usage: loop32 START_DELAY_MS SPIN_MS...\n");
		sys3(NR_exit_group, 2, 0, 0);
	}
	sys3(NR_poll, 0, 0, delay);
	for (int i = 2; i < argc; i++) {
		long ms = parse_ms(argv[i]);
		struct ts64 begin, end;
		char *p = line;

		if (ms < 0) {
			say("loop32: SPIN_MS must be a number of ms\n");
			sys3(NR_exit_group, 2, 0, 0);
		}
		begin = now_ts();
		do
			end = now_ts();
		while (ns_of(end) - ns_of(begin) < (u64)ms * 1000000ull);
		for (const char *s = "task spin "; *s; s++)
			*p++ = *s;
		p = put_ns(p, begin);
		*p++ = ' ';
		p = put_ns(p, end);
		*p++ = '\n';
		put(line, p - line);
		sys3(NR_poll, 0, 0, 200);
	}
	sys3(NR_exit_group, 0, 0, 0);
}

/* The kernel leaves argc, then argv, at the stack pointer. */
__attribute__((naked, noreturn)) void _start(void)
{
	__asm__ volatile("xor %ebp, %ebp\n\t"
			 "mov %esp, %eax\n\t"
			 "and $-16, %esp\n\t"
			 "sub $12, %esp\n\t"
			 "push %eax\n\t"
			 "call loop32_main\n\t"
			 "hlt");
}
