// The counters the BPF programs keep (the `stats` per-CPU array), summed
// over CPUs, and the first word on stderr when one of them counts a loss.
#pragma once

#include <cstdint>

#include "model/kernel_counters.h"

namespace jankbpf {

using KernelStats = KernelCounters;

// Reads the `stats` map (fd); zeros where it cannot.
KernelStats read_kernel_stats(int stats_fd);

// Says on stderr, once per counter, the first time a loss counter is
// non-zero, naming the summary field that will count it.
class DropNotices {
 public:
  void check(const KernelStats& ks);

 private:
  uint32_t said_ = 0;  // a bit per entry of the table in kernel_stats.cpp
};

}  // namespace jankbpf
