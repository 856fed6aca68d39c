// The counters the BPF programs keep (the `stats` per-CPU array), summed
// over CPUs, and the first word on stderr when one of them counts a loss.
#pragma once

#include <cstdint>

namespace jankbpf {

// Counters kept in the kernel, summed over CPUs.
struct KernelStats {
  uint64_t tasks = 0;
  uint64_t ringbuf_drops = 0;       // small records lost: the events ring was full
  uint64_t threads_map_full = 0;
  uint64_t timer_failures = 0;
  uint64_t samples = 0;
  uint64_t offcpu = 0;
  uint64_t unseen_switches = 0;
  uint64_t stash_full = 0;          // off-CPU captures not made: the tid stash was full
  uint64_t procs_full = 0;          // janked processes whose exit goes unreported: map full
  uint64_t scan_full = 0;           // tasks the scan watchdog could not follow live
  uint64_t offcpu_ring_full = 0;    // captures and wakers lost: the captures ring was full
  uint64_t offcpu_rate_limited = 0; // captures not sent: over --offcpu-rate
  uint64_t timers_map_full = 0;     // watchdog timers not made: the timers map was full
};

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
