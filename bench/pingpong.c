// Epoll ping-pong pair: the worst case for per-wakeup hooks. Two processes,
// each an event loop on its main thread, bounce one byte over a socketpair:
// every round trip is two epoll_wait returns, two wakeups and (on one CPU or
// across two) two context switches, and nothing else.
//
//   pingpong [CPU]      prints "ready PID_A PID_B", then serves commands
//                       read from stdin, one per line:
//     run MS            bounce for MS ms, print "done ROUNDTRIPS ELAPSED_NS"
//     (EOF)             both processes exit
//
// Both processes are pinned to one CPU (CPU, default the last one): every
// round trip is then two local wakeups and two context switches, a CPU-bound
// loop whose speed is the cost of the path the hooks sit on. Unpinned, on a
// VM, it would mostly measure how fast an idle virtual CPU wakes up.
//
// The pair lives across measurements so that jankbpf's ignore-startup rule
// (no checks in a process's first 10 s) does not hide its cost: the bench
// starts it once, early, and drives it through stdin. The control fd sits
// in A's epoll set too, so A's loop is a real event loop.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

// B: wait, read one byte, send it back, forever; exits on EOF.
static void serve_b(int fd) {
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll (B)");
  for (;;) {
    struct epoll_event out;
    int n = epoll_wait(ep, &out, 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait (B)");
    }
    char c;
    ssize_t r = read(fd, &c, 1);
    if (r <= 0) exit(0);
    if (write(fd, &c, 1) != 1) exit(0);
  }
}

int main(int argc, char **argv) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int cpu = argc > 1 ? atoi(argv[1]) : (int)(ncpu > 0 ? ncpu - 1 : 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) < 0) die("sched_setaffinity");
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0) die("socketpair");
  pid_t b = fork();
  if (b < 0) die("fork");
  if (b == 0) {
    close(sp[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, "pingpong-b");
    serve_b(sp[1]);
  }
  close(sp[1]);
  prctl(PR_SET_NAME, "pingpong-a");
  int fd = sp[0];
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  struct epoll_event ctl = {.events = EPOLLIN, .data.fd = 0};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ||
      epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ctl) < 0)
    die("epoll (A)");
  printf("ready %d %d\n", (int)getpid(), (int)b);
  fflush(stdout);

  char line[128];
  size_t have = 0;
  long long deadline = 0, t0 = 0, trips = 0;
  char c = 'x';
  for (;;) {
    struct epoll_event out[2];
    int n = epoll_wait(ep, out, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait (A)");
    }
    for (int i = 0; i < n; i++) {
      if (out[i].data.fd == fd) {
        if (read(fd, &c, 1) != 1) die("read (A)");
        trips++;
        // Look at the clock every 256 trips only: the loop is the workload.
        if ((trips & 255) == 0 && now_ns() >= deadline) {
          long long el = now_ns() - t0;
          printf("done %lld %lld\n", trips, el);
          fflush(stdout);
          deadline = 0;
          continue;
        }
        if (write(fd, &c, 1) != 1) die("write (A)");
        continue;
      }
      // Control: stdin, line by line.
      ssize_t r = read(0, line + have, sizeof line - 1 - have);
      if (r <= 0) {
        close(fd);
        waitpid(b, NULL, 0);
        return 0;
      }
      have += (size_t)r;
      line[have] = 0;
      char *nl;
      while ((nl = strchr(line, '\n'))) {
        *nl = 0;
        long ms;
        if (sscanf(line, "run %ld", &ms) == 1 && ms > 0 && !deadline) {
          trips = 0;
          t0 = now_ns();
          deadline = t0 + ms * 1000000LL;
          if (write(fd, &c, 1) != 1) die("write (A)");
        }
        size_t rest = have - (size_t)(nl + 1 - line);
        memmove(line, nl + 1, rest);
        have = rest;
        line[have] = 0;
      }
      if (have >= sizeof line - 1) have = 0;
    }
  }
}
