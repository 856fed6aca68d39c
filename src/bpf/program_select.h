// Which of bpf/jank.bpf.c's programs load for a plan (the watchdog's kind,
// stacks, off-CPU captures, markers, trampolines or tracepoints), and which
// waits have tracepoints here. Detector::load and attach use them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/kernel_funcs.h"
#include "bpf/modes.h"

struct jank_bpf;

namespace jankbpf {

// The waits this arch has whose tracepoints this kernel has, with their
// syscall numbers (the shared tracepoint programs name the wait by it).
struct TpWait {
  std::string name;
  bool child;
  long nr;
};
std::vector<TpWait> tracepoint_waits();

// --hooks raw-tracepoint: the waits (and setpgid) hooked by two tp_btf
// programs on every syscall (jb_raw_sys_enter/exit) rather than a syscall
// tracepoint each: x86_64 (arm64's 32-bit tasks cannot be told apart there
// yet), with the timer watchdog (the plans that load tp_btf). A raw
// tracepoint's link detaches in a millisecond, a syscall tracepoint's perf
// event in grace periods under a kernel-wide mutex (~40 ms each, one after
// another: the stop); but every syscall of every process then runs them
// (README, "Stopping").
bool raw_syscall_waits(bool trampolines, WatchdogMode mode, HookKind hooks);

// The kernel functions of a syscall that exist here, native first; empty
// when the native one is missing (the arch does not have the syscall).
std::vector<std::string> present_functions(const KernelFuncs& kernel, const std::string& syscall);

// Sets autoload (and trampoline targets) on the skeleton's programs.
// adopt: the task iterator that finds threads asleep inside a wait at
// attach (bpf/adopt.bpf.h), run once by Detector::adopt_waiting().
void select_programs(jank_bpf* skel, WatchdogMode mode, bool stacks, bool offcpu, bool markers,
                     bool trampolines, bool raw_syscalls, bool adopt, const KernelFuncs& kernel);

// The syscall numbers of each event-loop wait, native and (x86_64) ia32,
// for the BPF side's tables of a thread found inside one at attach:
// index = number, value = 1 + enum jb_wait_id (0: no such wait).
struct WaitNumbers {
  uint8_t native[512] = {}, compat[512] = {};
};
WaitNumbers wait_numbers();

// The frames programs (bpf/frames.bpf.h): loaded with cfg.frames, attached
// by hand (attach_frames); their options; the frames ring at one page when
// they are off.
struct DetectorConfig;
void configure_frames(jank_bpf* skel, const DetectorConfig& cfg);
// The causes fault/io raw tracepoints: loaded with the causes, attached by
// Detector::attach_io_hooks (detector_io.cpp).
void configure_io(jank_bpf* skel, bool causes);

}  // namespace jankbpf
