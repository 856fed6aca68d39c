#include "bpf/kernel_stats.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstddef>
#include <vector>

#include "jankbpf/events.h"
#include "util/log.h"

namespace jankbpf {

KernelStats read_kernel_stats(int stats_fd) {
  KernelStats s;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || stats_fd < 0) return s;
  std::vector<uint64_t> values(ncpu);
  auto sum = [&](uint32_t key) -> uint64_t {
    if (bpf_map_lookup_elem(stats_fd, &key, values.data())) return 0;
    uint64_t total = 0;
    for (auto v : values) total += v;
    return total;
  };
#define JB_STAT_READ(id, field, meaning) s.field = sum(JB_STAT_##id);
  JB_STATS(JB_STAT_READ)
#undef JB_STAT_READ
  return s;
}

namespace {

// Each loss, the summary field that counts it, and what it costs.
struct Drop {
  uint64_t KernelStats::*count;
  const char* field;
  const char* what;
};

constexpr Drop kDrops[] = {
    {&KernelStats::ringbuf_drops, "lost_events", "the events ring was full: jank records were lost"},
    {&KernelStats::offcpu_ring_full, "offcpu_ring_full",
     "the captures ring was full: off-CPU stacks were lost (janks still arrive)"},
    {&KernelStats::offcpu_rate_limited, "offcpu_rate_limited",
     "a process went over --offcpu-rate: some of its off-CPU stacks were not taken"},
    {&KernelStats::records_rate_limited, "records_rate_limited",
     "a process went over --record-rate (or its uid over --record-rate-uid): some of its janks were not reported"},
    {&KernelStats::threads_map_full, "threads_untracked", "the threads map is full: new threads are not watched"},
    {&KernelStats::timers_map_full, "timers_map_full",
     "the timers map is full: some tasks are seen only when they end, with no hang records"},
    {&KernelStats::procs_full, "procs_untracked", "the procs map is full: some exits go unreported"},
    {&KernelStats::stash_full, "offcpu_stash_full", "the off-CPU stash is full: some off-CPU stacks were not taken"},
    {&KernelStats::scan_full, "scan_set_full", "the scan watchdog's set is full: some tasks are seen only when they end"},
    {&KernelStats::frame_events_lost, "frame_events_lost",
     "the frames ring was full: some Wayland frames were not measured"},
};
static_assert(std::size(kDrops) <= 32, "one bit of DropNotices::said_ each");

}  // namespace

void DropNotices::check(const KernelStats& ks) {
  for (size_t i = 0; i < std::size(kDrops); i++) {
    const uint64_t n = ks.*kDrops[i].count;
    if (!n || (said_ & (1u << i))) continue;
    said_ |= 1u << i;
    log::warn("%s (%s: %llu so far; the summary record has the total)", kDrops[i].what, kDrops[i].field,
              static_cast<unsigned long long>(n));
  }
}

}  // namespace jankbpf
