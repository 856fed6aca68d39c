// The kernel's counters (the `stats` map, summed over CPUs): one field per
// row of JB_STATS in include/jankbpf/events.h, where each is described. The
// summary record carries them as they are; the JSON sink names them.
#pragma once

#include <cstdint>

#include "jankbpf/events.h"

namespace jankbpf {

struct KernelCounters {
#define JB_STAT_FIELD(id, field, meaning) uint64_t field = 0;
  JB_STATS(JB_STAT_FIELD)
#undef JB_STAT_FIELD

  // Every record a full ring cost, as 1.0 counted it: the small records of
  // the events ring and the captures of the captures ring.
  uint64_t lost_events() const { return ringbuf_drops + offcpu_ring_full; }
};

}  // namespace jankbpf
