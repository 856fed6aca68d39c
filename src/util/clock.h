// Kernel timestamps are CLOCK_MONOTONIC nanoseconds; records speak epoch
// milliseconds. One offset, measured once, converts between them.
#pragma once

#include <cstdint>

namespace jankbpf {

uint64_t monotonic_ns();

class EpochClock {
 public:
  EpochClock();  // measures the offset
  int64_t epoch_ms(uint64_t mono_ns) const {
    return static_cast<int64_t>((static_cast<int64_t>(mono_ns) + offset_ns_) / 1'000'000);
  }
  int64_t now_ms() const;

 private:
  int64_t offset_ns_ = 0;  // realtime - monotonic
};

// USER_HZ clock ticks since boot for a CLOCK_MONOTONIC time (the unit of
// /proc/PID/stat's starttime).
int64_t mono_ns_to_jiffies(uint64_t mono_ns);

}  // namespace jankbpf
