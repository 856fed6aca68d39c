// Which of bpf/jank.bpf.c's programs load for a plan (the watchdog's kind,
// stacks, off-CPU captures, markers, trampolines or tracepoints), and which
// waits have tracepoints here. Detector::load and attach use them.
#pragma once

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

// The kernel functions of a syscall that exist here, native first; empty
// when the native one is missing (the arch does not have the syscall).
std::vector<std::string> present_functions(const KernelFuncs& kernel, const std::string& syscall);

// Sets autoload (and trampoline targets) on the skeleton's programs.
void select_programs(jank_bpf* skel, WatchdogMode mode, bool stacks, bool offcpu, bool markers,
                     bool trampolines, const KernelFuncs& kernel);

// The frames programs (bpf/frames.bpf.h): loaded with cfg.frames, attached
// by hand (attach_frames); their options; the frames ring at one page when
// they are off.
struct DetectorConfig;
void configure_frames(jank_bpf* skel, const DetectorConfig& cfg);

}  // namespace jankbpf
