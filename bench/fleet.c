// A fleet of watched processes for the cost curve (bench section 12,
// issue 30): N children named "fleet_w", each an epoll event loop on its
// own socketpair, idle until asked for a jank.
//
//   fleet N [JANK_MS]   forks N children, prints "ready N", then serves
//                       commands read from stdin, one per line:
//     jank RATE SECS    asks the children, round robin, for RATE janks a
//                       second for SECS seconds; prints "done SENT"
//     (EOF)             the children are killed, the fleet exits
//
// A jank is a task of JANK_MS (default 160) spent in nanosleep: off the CPU,
// so a 2-core machine can host 100 janks a second; over jankbpf's 150 ms
// threshold. Each child keeps only its own socket (close_range), so 10,000
// children cost the kernel 10,000 small fd tables, not 10,000 copies of the
// parent's. The parent raises RLIMIT_NOFILE for its N sockets.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
  perror(what);
  exit(1);
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void child(int fd, int jank_ms) {
  prctl(PR_SET_NAME, "fleet_w");
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) die("epoll");
  for (;;) {
    struct epoll_event out;
    if (epoll_wait(ep, &out, 1, -1) < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    char b;
    if (read(fd, &b, 1) <= 0) _exit(0);
    struct timespec ts = {jank_ms / 1000, (jank_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fleet N [JANK_MS]\n");
    return 2;
  }
  int n = atoi(argv[1]), jank_ms = argc > 2 ? atoi(argv[2]) : 160;
  if (n < 1 || n > 100000 || jank_ms < 1) {
    fprintf(stderr, "fleet: N from 1 to 100000, JANK_MS > 0\n");
    return 2;
  }
  struct rlimit rl = {(rlim_t)n + 64, (rlim_t)n + 64};
  struct rlimit cur;
  if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_cur < rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &rl))
    die("setrlimit NOFILE");
  setvbuf(stdout, NULL, _IOLBF, 0);
  int *fds = calloc((size_t)n, sizeof *fds);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  if (!fds || !pids) die("calloc");
  for (int i = 0; i < n; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) die("socketpair");
    pid_t p = fork();
    if (p < 0) die("fork");
    if (p == 0) {
      if (dup2(sv[1], 3) < 0) die("dup2");
      syscall(SYS_close_range, 4, ~0U, 0);
      child(3, jank_ms);
    }
    close(sv[1]);
    fds[i] = sv[0];
    pids[i] = p;
  }
  printf("ready %d\n", n);
  char line[128];
  int next = 0;
  while (fgets(line, sizeof line, stdin)) {
    double rate, secs;
    if (sscanf(line, "jank %lf %lf", &rate, &secs) != 2 || rate <= 0 || secs <= 0) {
      fprintf(stderr, "fleet: bad command: %s", line);
      continue;
    }
    long long t0 = now_ns(), step = (long long)(1e9 / rate);
    long sent = 0, total = (long)(rate * secs);
    for (long k = 0; k < total; k++) {
      long long due = t0 + k * step;
      long long d = due - now_ns();
      if (d > 0) {
        struct timespec ts = {d / 1000000000LL, d % 1000000000LL};
        nanosleep(&ts, NULL);
      }
      if (write(fds[next], "j", 1) == 1) sent++;
      next = (next + 1) % n;
    }
    printf("done %ld\n", sent);
  }
  for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
  while (wait(NULL) > 0) {
  }
  return 0;
}
