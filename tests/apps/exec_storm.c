// An exec storm: RATE short-lived processes a second for SECONDS, each an
// exec of this program that waits twice in poll() (so a watcher's wait
// hooks see it) and exits. The kind of load a build farm or a shell loop
// puts on a machine jankbpf watches as a whole: every exec, wait and exit
// passes through its BPF programs, none of them is a jank.
//
//   exec_storm RATE SECONDS     prints {"spawned":N,"failed":F,"seconds":S} at the end
//   exec_storm --child          (what each spawned process runs)
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reap(long* live) {
  while (*live > 0 && waitpid(-1, NULL, WNOHANG) > 0) --*live;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) {
    poll(NULL, 0, 1);
    poll(NULL, 0, 1);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: exec_storm RATE SECONDS\n");
    return 2;
  }
  const long rate = strtol(argv[1], NULL, 10);
  const double seconds = strtod(argv[2], NULL);
  if (rate <= 0 || rate > 100000 || !(seconds > 0)) {
    fprintf(stderr, "exec_storm: RATE must be 1..100000 and SECONDS > 0\n");
    return 2;
  }
  char* child_argv[] = {argv[0], "--child", NULL};
  long spawned = 0, failed = 0, live = 0;
  const double start = now_s();
  // Paced by the clock: the Nth spawn waits until N/RATE s have passed, so a
  // slow moment is caught up, and the rate is the one asked for if the
  // machine can keep up.
  for (;;) {
    double t = now_s() - start;
    if (t >= seconds) break;
    long due = (long)(t * (double)rate) + 1;
    while (spawned + failed < due) {
      pid_t pid;
      if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, child_argv, environ) == 0) {
        ++spawned;
        ++live;
      } else {
        ++failed;
      }
      reap(&live);
    }
    reap(&live);
    struct timespec pause = {0, 200000};  // 0.2 ms
    nanosleep(&pause, NULL);
  }
  const double took = now_s() - start;
  while (live > 0 && wait(NULL) > 0) --live;
  printf("{\"spawned\":%ld,\"failed\":%ld,\"seconds\":%.3f}\n", spawned, failed, took);
  return 0;
}
