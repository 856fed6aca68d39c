// Captures its own stack sample, as perf or the BPF off-CPU capture would
// take it, at a known deep point: main -> outer -> middle (-> an inlined
// helper) -> inner -> capture. Used to make unwinder fixtures for another
// architecture (scripts/capture-aarch64-fixtures.sh runs the aarch64 build
// under qemu-aarch64-static, whose /proc/self/maps shows guest mappings).
//
//   stack_selfcapture OUTDIR [jit]
//
// With "jit" the chain is main -> run_jit -> [anonymous JIT code keeping a
// frame record, no CFI] -> jit_target -> capture, and OUTDIR/perf.map names
// the JIT code as a JS function.
//
// writes OUTDIR/regs.txt (arch, abi, mask, dyn_size, the registers in
// PERF_SAMPLE_REGS_USER order for that mask), OUTDIR/stack.bin (16 KiB from
// SP, zero-padded past dyn_size as perf pads) and OUTDIR/maps.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))
#define STACK_BYTES 16384

static volatile uint64_t sink;
static const char* outdir;

#if defined(__aarch64__)
#define ARCH_NAME "aarch64"
#define NREGS 33                     // x0..x30, sp, pc
#define REGS_MASK 0x1ffffffffull     // PERF_REG_ARM64_X0..PC
#define SP_INDEX 31
static uint64_t regs[NREGS];
#define CAPTURE_REGS()                                                          \
  __asm__ volatile(                                                             \
      "stp x0, x1, [%0, #0]\n\t"                                                \
      "stp x2, x3, [%0, #16]\n\t"                                               \
      "stp x4, x5, [%0, #32]\n\t"                                               \
      "stp x6, x7, [%0, #48]\n\t"                                               \
      "stp x8, x9, [%0, #64]\n\t"                                               \
      "stp x10, x11, [%0, #80]\n\t"                                             \
      "stp x12, x13, [%0, #96]\n\t"                                             \
      "stp x14, x15, [%0, #112]\n\t"                                            \
      "stp x16, x17, [%0, #128]\n\t"                                            \
      "stp x18, x19, [%0, #144]\n\t"                                            \
      "stp x20, x21, [%0, #160]\n\t"                                            \
      "stp x22, x23, [%0, #176]\n\t"                                            \
      "stp x24, x25, [%0, #192]\n\t"                                            \
      "stp x26, x27, [%0, #208]\n\t"                                            \
      "stp x28, x29, [%0, #224]\n\t"                                            \
      "str x30, [%0, #240]\n\t"                                                 \
      "mov x16, sp\n\t"                                                         \
      "str x16, [%0, #248]\n\t"                                                 \
      "adr x16, .\n\t"                                                          \
      "str x16, [%0, #256]\n\t"                                                 \
      :                                                                         \
      : "r"(regs)                                                               \
      : "x16", "memory")
#elif defined(__x86_64__)
#define ARCH_NAME "x86_64"
#define NREGS 17                     // ax bx cx dx si di bp sp ip r8..r15
#define REGS_MASK 0xff01ffull        // PERF_REG_X86_AX..IP, R8..R15
#define SP_INDEX 7
static uint64_t regs[NREGS];
#define CAPTURE_REGS()                                                          \
  __asm__ volatile(                                                             \
      "movq %%rax, 0(%0)\n\t"                                                   \
      "movq %%rbx, 8(%0)\n\t"                                                   \
      "movq %%rcx, 16(%0)\n\t"                                                  \
      "movq %%rdx, 24(%0)\n\t"                                                  \
      "movq %%rsi, 32(%0)\n\t"                                                  \
      "movq %%rdi, 40(%0)\n\t"                                                  \
      "movq %%rbp, 48(%0)\n\t"                                                  \
      "movq %%rsp, 56(%0)\n\t"                                                  \
      "movq %%r8, 72(%0)\n\t"                                                   \
      "movq %%r9, 80(%0)\n\t"                                                   \
      "movq %%r10, 88(%0)\n\t"                                                  \
      "movq %%r11, 96(%0)\n\t"                                                  \
      "movq %%r12, 104(%0)\n\t"                                                 \
      "movq %%r13, 112(%0)\n\t"                                                 \
      "movq %%r14, 120(%0)\n\t"                                                 \
      "movq %%r15, 128(%0)\n\t"                                                 \
      "leaq 0(%%rip), %%r11\n\t"                                                \
      "movq %%r11, 64(%0)\n\t"                                                  \
      :                                                                         \
      : "r"(regs)                                                               \
      : "r11", "memory")
#else
#error "stack_selfcapture: x86_64 or aarch64"
#endif

static void die(const char* what) {
  fprintf(stderr, "stack_selfcapture: %s: %s\n", what, strerror(errno));
  exit(1);
}

static FILE* out_file(const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", outdir, name);
  FILE* f = fopen(path, "w");
  if (!f) die(path);
  return f;
}

// The end of the mapping holding addr, from /proc/self/maps (copied out too).
static uint64_t write_maps_and_find_end(uint64_t addr) {
  FILE* in = fopen("/proc/self/maps", "r");
  if (!in) die("/proc/self/maps");
  FILE* out = out_file("maps");
  char line[4096];
  uint64_t end = 0;
  while (fgets(line, sizeof line, in)) {
    fputs(line, out);
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) end = hi;
  }
  fclose(in);
  fclose(out);
  return end;
}

NOIPA static void dump_all(void) {
  uint64_t sp = regs[SP_INDEX];
  uint64_t end = write_maps_and_find_end(sp);
  uint64_t dyn = end > sp ? end - sp : 0;
  if (dyn > STACK_BYTES) dyn = STACK_BYTES;
  static unsigned char copy[STACK_BYTES];
  memcpy(copy, (const void*)(uintptr_t)sp, dyn);
  FILE* f = out_file("stack.bin");
  if (fwrite(copy, 1, STACK_BYTES, f) != STACK_BYTES) die("stack.bin");
  fclose(f);
  f = out_file("regs.txt");
  fprintf(f, "arch %s\nabi 2\nmask 0x%llx\ndyn_size %llu\nregs", ARCH_NAME,
          (unsigned long long)REGS_MASK, (unsigned long long)dyn);
  for (int i = 0; i < NREGS; ++i) fprintf(f, " 0x%llx", (unsigned long long)regs[i]);
  fprintf(f, "\n");
  fclose(f);
}

NOIPA void capture(void) {
  CAPTURE_REGS();
  dump_all();
  sink += 1;  // not a tail call: capture keeps a frame (and signs LR with PAC)
}

NOIPA int inner(int n) {
  capture();
  sink += (uint64_t)n;
  return (int)(sink & 1);
}

static inline __attribute__((always_inline)) int helper(int n) {
  int r = inner(n * 3);
  sink ^= (uint64_t)r;
  return r;
}

NOIPA int middle(int n) {
  int r = helper(n + 1);
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int outer(int n) {
  int r = middle(n + 1);
  sink += (uint64_t)r;
  return r + 1;
}

NOIPA int jit_target(int n) {
  capture();
  sink += (uint64_t)n;
  return (int)(sink & 1);
}

// A JIT trampoline with a frame record and no CFI, as V8 emits code:
// calls fn(arg) for (fn, arg).
#if defined(__aarch64__)
static const uint32_t jit_code[] = {
    0xa9bf7bfd,  // stp x29, x30, [sp, #-16]!
    0x910003fd,  // mov x29, sp
    0xaa0003f0,  // mov x16, x0
    0xaa0103e0,  // mov x0, x1
    0xd63f0200,  // blr x16
    0xa8c17bfd,  // ldp x29, x30, [sp], #16
    0xd65f03c0,  // ret
};
#else
static const unsigned char jit_code[] = {
    0x55,              // push %rbp
    0x48, 0x89, 0xe5,  // mov %rsp,%rbp
    0x48, 0x89, 0xf8,  // mov %rdi,%rax
    0x48, 0x89, 0xf7,  // mov %rsi,%rdi
    0xff, 0xd0,        // call *%rax
    0x5d,              // pop %rbp
    0xc3,              // ret
};
#endif

NOIPA int run_jit(int n) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) die("mmap");
  unsigned char* fn = mem + 0x40;
  memcpy(fn, jit_code, sizeof jit_code);
  __builtin___clear_cache((char*)fn, (char*)fn + sizeof jit_code);
  if (mprotect(mem, (size_t)page, PROT_READ | PROT_EXEC) != 0) die("mprotect");
  FILE* f = out_file("perf.map");
  fprintf(f, "%lx %zx JS:*jitTrampoline /srv/app/jit.js:3:5\n", (unsigned long)(uintptr_t)fn, sizeof jit_code);
  fclose(f);
  int (*call)(int (*)(int), long) = (int (*)(int (*)(int), long))(void*)fn;
  int r = call(jit_target, n);
  sink += (uint64_t)r;
  return r + 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "jit") != 0)) {
    fprintf(stderr, "usage: %s OUTDIR [jit]\n", argv[0]);
    return 2;
  }
  outdir = argv[1];
  mkdir(outdir, 0755);
  int r = argc == 3 ? run_jit(argc) : outer(argc);
  sink += (uint64_t)r;
  return 0;
}
