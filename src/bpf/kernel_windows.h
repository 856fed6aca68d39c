// The kernel windows of the causes (bpf/causes_kernel.bpf.h): direct
// reclaim, direct compaction and contended kernel locks, each a pair of
// tracepoints loaded only where this kernel has both (a tp_btf program
// would fail the whole load without them), as tp_btf or raw_tp like the
// scheduler hooks. What is missing goes to the features with what
// replaces it.
#pragma once

#include <string>
#include <vector>

struct jank_bpf;

namespace jankbpf {

class FeatureSet;

struct KernelWindow {
  const char* feature;  // "cause_kernel_lock"
  const char* kind;     // the cause kind it gives
  std::vector<std::pair<const char*, const char*>> tracepoints;  // (category, name), begin/end pairs
  bool present = false;  // set by select_kernel_windows
  bool off = false;      // not wanted (kernel_lock with --no-kernel-locks)
};

// Sets autoload on the window programs; returns what each found.
// kernel_locks: the kernel_lock window is wanted (off by --no-kernel-locks: it is
// reported as off, not missing).
std::vector<KernelWindow> select_kernel_windows(jank_bpf* skel, bool timer, bool causes, bool kernel_locks);

// Into the features (`--check`, `features_missing`), once a plan loaded.
void report_kernel_windows(const std::vector<KernelWindow>& windows, FeatureSet* features);

}  // namespace jankbpf
