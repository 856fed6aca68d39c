#include "util/clock.h"

#include <time.h>
#include <unistd.h>

namespace jankbpf {
namespace {

int64_t read_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

}  // namespace

uint64_t monotonic_ns() { return static_cast<uint64_t>(read_ns(CLOCK_MONOTONIC)); }

EpochClock::EpochClock() {
  // Take the tightest of a few readings: a preemption between the two
  // clock reads would otherwise skew every timestamp.
  int64_t best_gap = INT64_MAX;
  for (int i = 0; i < 5; i++) {
    int64_t m1 = read_ns(CLOCK_MONOTONIC);
    int64_t r = read_ns(CLOCK_REALTIME);
    int64_t m2 = read_ns(CLOCK_MONOTONIC);
    if (m2 - m1 < best_gap) {
      best_gap = m2 - m1;
      offset_ns_ = r - (m1 + (m2 - m1) / 2);
    }
  }
}

int64_t EpochClock::now_ms() const { return read_ns(CLOCK_REALTIME) / 1'000'000; }

int64_t mono_ns_to_jiffies(uint64_t mono_ns) {
  static const long hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
  return static_cast<int64_t>(mono_ns / (1'000'000'000ULL / static_cast<uint64_t>(hz)));
}

}  // namespace jankbpf
