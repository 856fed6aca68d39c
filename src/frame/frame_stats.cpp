#include "frame/frame_stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace jankbpf::frame {
namespace {

// 0.1 ms bins to 50 ms, 1 ms bins to 1 s, 100 ms bins to 60 s, then one more.
constexpr size_t kFine = 500, kMid = 950, kCoarse = 590;
constexpr size_t kBins = kFine + kMid + kCoarse + 1;

}  // namespace

FrameStats::FrameStats() : bins_(kBins), buckets_(std::size(kFrameBucketsMs) + 1) {}

size_t FrameStats::bin_of(double ms) {
  if (!(ms > 0)) return 0;
  if (ms <= 50) return std::min<size_t>(kFine - 1, static_cast<size_t>(std::ceil(ms * 10)) - (ms > 0 ? 1 : 0));
  if (ms <= 1000) return kFine + std::min<size_t>(kMid - 1, static_cast<size_t>(std::ceil(ms)) - 51);
  if (ms <= 60000) return kFine + kMid + std::min<size_t>(kCoarse - 1, static_cast<size_t>(std::ceil(ms / 100)) - 11);
  return kBins - 1;
}

double FrameStats::bin_upper(size_t bin) {
  if (bin < kFine) return (bin + 1) / 10.0;
  if (bin < kFine + kMid) return static_cast<double>(bin - kFine + 51);
  if (bin < kFine + kMid + kCoarse) return (bin - kFine - kMid + 11) * 100.0;
  return INFINITY;
}

void FrameStats::add(const FrameTiming& f) {
  const double ms = f.duration_ms();
  frames_++;
  if (f.janky) janky_++;
  if (ms > 16) slow_++;     // Android vitals: a slow frame took over 16 ms
  if (ms > 700) frozen_++;  // and a frozen one over 700 ms
  by_jank_[static_cast<size_t>(f.jank)]++;
  bins_[bin_of(ms)]++;
  size_t b = 0;
  while (b < std::size(kFrameBucketsMs) && ms > kFrameBucketsMs[b]) b++;
  buckets_[b]++;
  max_ms_ = std::max(max_ms_, ms);
  sum_ms_ += ms;
}

double FrameStats::percentile(double p) const {
  if (!frames_) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p / 100.0 * frames_)));
  uint64_t seen = 0;
  for (size_t i = 0; i < bins_.size(); i++) {
    seen += bins_[i];
    if (seen >= rank) return std::min(bin_upper(i), max_ms_);
  }
  return max_ms_;
}

void FrameStats::fill(SurfaceFrameStats* out) const {
  out->frames = frames_;
  out->janky = janky_;
  out->slow = slow_;
  out->frozen = frozen_;
  out->abandoned = abandoned_;
  std::copy(std::begin(by_jank_), std::end(by_jank_), std::begin(out->by_jank));
  out->p50_ms = percentile(50);
  out->p90_ms = percentile(90);
  out->p99_ms = percentile(99);
  out->max_ms = max_ms_;
  out->sum_ms = sum_ms_;
  out->buckets = buckets_;
}

}  // namespace jankbpf::frame
