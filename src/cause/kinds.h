// The cause kinds (enum jb_cause_kind), in their priority order: a stretch
// of non-running time whose evidence fits several kinds goes to the first.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "jankbpf/events.h"

namespace jankbpf::cause {

inline constexpr std::array<std::string_view, JB_CAUSE_NR> kKinds = {
    "",           // JB_CAUSE_NONE
    "throttled",  // cfs bandwidth: the task group's quota ran out
    "reclaim",    // direct reclaim
    "compaction", // direct compaction
    "fault",      // major page faults
    "io",         // block I/O
    "kernel_lock",
    "lock",       // a futex wait, woken by the lock's release
    "peer",       // woken by another thread or process
    "runnable",   // queued for a CPU
    "sleep",      // a timed sleep or a wait's timeout
    "other",
};

inline std::string_view kind_name(uint32_t kind) { return kind < kKinds.size() ? kKinds[kind] : ""; }

// The priority of a kind by name (lower first), kKinds.size() if unknown.
inline size_t kind_rank(std::string_view name) {
  for (size_t i = 1; i < kKinds.size(); i++)
    if (kKinds[i] == name) return i;
  return kKinds.size();
}

}  // namespace jankbpf::cause
