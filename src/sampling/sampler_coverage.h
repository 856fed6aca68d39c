// When the sampling clocks were on. The event thread turns them on when a
// task's early mark arrives; on a host where that thread waits for a CPU
// (its runqueue's CPU taken by a real-time task, the other CPUs busy) a
// long task can run with them still off. Its record then says for how
// long (`unsampled_ms`) instead of showing fewer samples for no reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace jankbpf {

class SamplerCoverage {
 public:
  void on(uint64_t ns);
  void off(uint64_t ns);
  // Nanoseconds of [from, to] (CLOCK_MONOTONIC) the clocks were off. Spans
  // older than the last kSpans count as off: a task that old was long and
  // kept the clocks on throughout, so it is never asked about.
  uint64_t off_within(uint64_t from, uint64_t to) const;

  static constexpr size_t kSpans = 256;

 private:
  std::deque<std::pair<uint64_t, uint64_t>> spans_;  // [on, off]; off 0 while on
};

}  // namespace jankbpf
