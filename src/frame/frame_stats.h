// Frame times of one surface over the run, for its summary row and the
// metrics: counts, a fine histogram for percentiles (0.1 ms steps to 50 ms,
// 1 ms to 1 s, 100 ms to a minute; a percentile is its bin's upper bound)
// and the coarse Prometheus buckets of model/frames.h.
#pragma once

#include <cstdint>
#include <vector>

#include "model/frames.h"

namespace jankbpf::frame {

class FrameStats {
 public:
  FrameStats();
  void add(const FrameTiming& f);
  void abandoned() { abandoned_++; }
  // Fills the counts, percentiles and buckets of *out.
  void fill(SurfaceFrameStats* out) const;
  uint64_t frames() const { return frames_; }
  double percentile(double p) const;  // ms

 private:
  static size_t bin_of(double ms);
  static double bin_upper(size_t bin);
  std::vector<uint32_t> bins_;
  uint64_t frames_ = 0, janky_ = 0, slow_ = 0, frozen_ = 0, abandoned_ = 0;
  uint64_t by_jank_[6] = {};
  std::vector<uint64_t> buckets_;
  double max_ms_ = 0, sum_ms_ = 0;
};

}  // namespace jankbpf::frame
