// The tax on a process jankbpf does not watch, beside getppid.c: what the
// cause hooks on page faults, futexes and block I/O cost everyone else.
// Each prints one line per rep, "ns_per_call X", as getppid does.
//
//   taxbench fault N REPS      N anonymous pages mapped, each written once
//                              (N minor page faults), then unmapped: ns per fault
//   taxbench futex N REPS      two threads hand a futex word back and forth
//                              N times (FUTEX_WAIT/FUTEX_WAKE, each hand-off a
//                              wakeup and a switch), both on the CPU it
//                              started on (across CPUs, a wakeup's cost is the
//                              other CPU's idle exit, which varies tenfold
//                              under qemu): ns per hand-off
//   taxbench blockio DEV N REPS  N O_DIRECT 4 KiB reads of block device DEV at
//                              successive offsets (within its first 64 MiB):
//                              ns per read
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void report(long long t0, long long t1, long n) {
  printf("ns_per_call %.2f\n", (double)(t1 - t0) / (double)n);
  fflush(stdout);
}

static int faults(long n, long reps) {
  const long page = sysconf(_SC_PAGESIZE);
  for (long r = 0; r < reps; r++) {
    char *p = mmap(NULL, (size_t)(n * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    long long t0 = now_ns();
    for (long i = 0; i < n; i++) ((volatile char *)p)[i * page] = 1;
    long long t1 = now_ns();
    munmap(p, (size_t)(n * page));
    report(t0, t1, n);
  }
  return 0;
}

// The word: odd when the partner's turn, even when main's. Each side waits
// while the word is not its own parity, then bumps it and wakes the other.
static _Atomic int word;
static long rounds;

static void futex_wait(int expected) {
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(void) { syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void hand_off(int parity, long n) {
  for (long i = 0; i < n; i++) {
    int w;
    while (((w = atomic_load(&word)) & 1) != parity) futex_wait(w);
    atomic_fetch_add(&word, 1);
    futex_wake();
  }
}

static void *partner(void *arg) {
  (void)arg;
  hand_off(1, rounds);
  return NULL;
}

static int futexes(long n, long reps) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  if (sched_setaffinity(0, sizeof one, &one)) perror("sched_setaffinity");  // the thread inherits it
  for (long r = 0; r < reps; r++) {
    atomic_store(&word, 0);
    rounds = n;
    pthread_t t;
    if (pthread_create(&t, NULL, partner, NULL)) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
    long long t0 = now_ns();
    hand_off(0, n);
    pthread_join(t, NULL);
    long long t1 = now_ns();
    report(t0, t1, 2 * n);  // both directions are hand-offs
  }
  return 0;
}

static int block_reads(const char *dev, long n, long reps) {
  int fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "open %s: %s\n", dev, strerror(errno));
    return 1;
  }
  void *buf;
  if (posix_memalign(&buf, 4096, 4096)) return 1;
  const long span = (64L << 20) / 4096;
  for (long r = 0; r < reps; r++) {
    long long t0 = now_ns();
    for (long i = 0; i < n; i++)
      if (pread(fd, buf, 4096, (off_t)((i % span) * 4096)) != 4096) {
        fprintf(stderr, "pread %s: %s\n", dev, strerror(errno));
        return 1;
      }
    long long t1 = now_ns();
    report(t0, t1, n);
  }
  free(buf);
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "fault") == 0) return faults(atol(argv[2]), atol(argv[3]));
  if (argc == 4 && strcmp(argv[1], "futex") == 0) return futexes(atol(argv[2]), atol(argv[3]));
  if (argc == 5 && strcmp(argv[1], "blockio") == 0) return block_reads(argv[2], atol(argv[3]), atol(argv[4]));
  fprintf(stderr, "usage: taxbench fault N REPS | futex N REPS | blockio DEV N REPS\n");
  return 2;
}
