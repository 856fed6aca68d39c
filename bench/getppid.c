// The tax on a process jankbpf does not watch: ns per trivial syscall.
// Enabling any syscall tracepoint sets TIF_SYSCALL_TRACEPOINT on every task,
// moving every syscall of every process onto the slow entry path, so a
// process that never waits still pays for the wait-syscall hooks.
//
//   getppid N REPS     REPS times: N getppid() syscalls; prints one line
//                      per rep: "ns_per_call X"
//   getppid --trigger  getppid() every ~100 us until killed (the bench's
//                      sentinel for "bpftrace's last probe is attached")
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--trigger") == 0) {
    struct timespec d = {0, 100000};
    for (;;) {
      syscall(SYS_getppid);
      nanosleep(&d, NULL);
    }
  }
  if (argc != 3) {
    fprintf(stderr, "usage: getppid N REPS | getppid --trigger\n");
    return 2;
  }
  long n = atol(argv[1]), reps = atol(argv[2]);
  if (n <= 0 || reps <= 0) return 2;
  for (long r = 0; r < reps; r++) {
    long long t0 = now_ns();
    for (long i = 0; i < n; i++) syscall(SYS_getppid);  // never cached by libc
    long long t1 = now_ns();
    printf("ns_per_call %.2f\n", (double)(t1 - t0) / (double)n);
    fflush(stdout);
  }
  return 0;
}
