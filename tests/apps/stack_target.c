// Purpose-built target for the stack library's tests (tests/unit/test_stack*.cpp),
// built like shipped code: -O2 -fomit-frame-pointer, so only DWARF CFI can
// unwind it. Each function of interest is noipa (never inlined, cloned or
// turned into a tail call) and uses its callee's result afterwards.
//
//   stack_target deep MS      main -> outer -> middle -> inner, spinning MS ms in inner
//   stack_target ab MSA MSB   main -> long_task -> func_a (MSA ms of CPU), then func_b (MSB ms of CPU)
//   stack_target block        main -> blocker -> wait_input, blocked in read() on stdin
//   stack_target vdso MS      main -> outer -> clock_loop, calling clock_gettime (the
//                             vDSO) back to back for MS ms
//   stack_target jit MS       main -> run_jit -> [anonymous JIT code with a frame
//                             pointer] -> jit_leaf spinning MS ms; the JIT code is
//                             named in /tmp/perf-PID.map as a JS function
//
// Protocol: waits for one byte on stdin before starting (so the sampler is
// attached), prints "done" when the work is over, then waits for EOF on
// stdin and exits. "block" prints "blocking" right before it blocks.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static volatile uint64_t sink;

static double clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

// The thread's own CPU time: what a CPU-clock sampler counts, so that A's
// and B's sample counts keep their ratio however busy the machine is.
static double cpu_ms(void) { return clock_ms(CLOCK_THREAD_CPUTIME_ID); }

// The busy loop, as a macro so that each spinning function holds its own
// copy (a shared helper would be the leaf of every sample instead).
#define SPIN_ON(clock, ms)                                            \
  do {                                                                \
    double end_ = clock() + (ms);                                     \
    uint64_t x_ = sink;                                               \
    do {                                                              \
      for (int i_ = 0; i_ < 20000; ++i_) {                            \
        x_ = x_ * 6364136223846793005ull + 1442695040888963407ull;    \
        sink = x_;                                                    \
      }                                                               \
    } while (clock() < end_);                                         \
  } while (0)
#define SPIN(ms) SPIN_ON(now_ms, ms)

NOIPA int inner(int ms) {
  SPIN(ms);
  return (int)(sink & 1);
}

NOIPA int middle(int ms) {
  int r = inner(ms);
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int outer(int ms) {
  int r = middle(ms);
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int clock_loop(int ms) {
  double end = now_ms() + ms;
  while (now_ms() < end) sink += 1;
  return (int)(sink & 1);
}

NOIPA int func_a(int ms) {
  SPIN_ON(cpu_ms, ms);
  return (int)(sink & 1);
}

NOIPA int func_b(int ms) {
  SPIN_ON(cpu_ms, ms);
  return (int)(sink & 3);
}

NOIPA int long_task(int ms_a, int ms_b) {
  int r = func_a(ms_a);
  sink += (uint64_t)r;
  r += func_b(ms_b);
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int wait_input(void) {
  char c;
  ssize_t n = read(0, &c, 1);
  sink += (uint64_t)n;
  return (int)n;
}

NOIPA int blocker(void) {
  int r = wait_input();
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int jit_leaf(int ms) {
  SPIN(ms);
  return (int)(sink & 1);
}

// JIT code with a frame pointer and no CFI, as V8 emits it:
//   push %rbp; mov %rsp,%rbp; mov %rdi,%rax; mov %rsi,%rdi; call *%rax;
//   pop %rbp; ret          -- calls fn(arg) given as (fn, arg)
NOIPA int run_jit(int ms) {
#if defined(__x86_64__)
  static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48, 0x89,
                                       0xf7, 0xff, 0xd0, 0x5d, 0xc3};
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return -1;
  // Somewhere inside the page, not at its start, like real JIT output.
  unsigned char* fn = mem + 0x40;
  memcpy(fn, code, sizeof code);
  if (mprotect(mem, (size_t)page, PROT_READ | PROT_EXEC) != 0) return -1;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
  FILE* f = fopen(path, "w");
  if (f) {
    fprintf(f, "garbage line without fields\n");
    fprintf(f, "%lx %zx JS:*jitBusy /srv/app/busy.js:12:7\n", (unsigned long)fn, sizeof code);
    fclose(f);
  }
  int (*call)(int (*)(int), long) = (int (*)(int (*)(int), long))(void*)fn;
  int r = call(jit_leaf, ms);
  sink += (uint64_t)r;
  return r + 1;
#else
  return jit_leaf(ms);
#endif
}

static void wait_byte(void) {
  char c;
  if (read(0, &c, 1) != 1) exit(1);
}

static void finish(void) {
  printf("done\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s deep MS | ab MSA MSB | block | jit MS | vdso MS\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  int a = argc > 2 ? atoi(argv[2]) : 500;
  int b = argc > 3 ? atoi(argv[3]) : 100;
  wait_byte();
  int r = 0;
  if (strcmp(mode, "deep") == 0) {
    r = outer(a);
  } else if (strcmp(mode, "ab") == 0) {
    r = long_task(a, b);
  } else if (strcmp(mode, "block") == 0) {
    printf("blocking\n");
    fflush(stdout);
    r = blocker();
  } else if (strcmp(mode, "jit") == 0) {
    r = run_jit(a);
  } else if (strcmp(mode, "vdso") == 0) {
    r = clock_loop(a);
  } else {
    return 2;
  }
  sink += (uint64_t)r;
  finish();
  if (strcmp(mode, "jit") == 0) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    unlink(path);
  }
  return 0;
}
