#include "util/crash.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace jankbpf {
namespace {

alignas(16) char g_alt_stack[64 * 1024];

// Async-signal-safe output only: snprintf into a stack buffer, write(2).
void say(const char* fmt, unsigned long a, unsigned long b, unsigned long c) {
  char buf[200];
  int n = snprintf(buf, sizeof buf, fmt, a, b, c);
  if (n > 0) (void)!write(STDERR_FILENO, buf, static_cast<size_t>(n) < sizeof buf ? n : sizeof buf - 1);
}

void on_fatal(int sig, siginfo_t* info, void*) {
  say("jankbpf: fatal signal %lu in thread %lu at address 0x%lx; backtrace (module(+offset)):\n",
      static_cast<unsigned long>(sig), static_cast<unsigned long>(gettid()),
      reinterpret_cast<unsigned long>(info ? info->si_addr : nullptr));
  void* frames[48];
  int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: die of the same signal.
  raise(sig);
}

}  // namespace

void install_crash_report() {
  // backtrace() loads libgcc_s on first use, which is not safe inside the
  // handler: load it now.
  void* warm[1];
  backtrace(warm, 1);
  stack_t ss{};
  ss.ss_sp = g_alt_stack;
  ss.ss_size = sizeof g_alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace jankbpf
