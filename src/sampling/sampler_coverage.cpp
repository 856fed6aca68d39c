#include "sampling/sampler_coverage.h"

#include <algorithm>

namespace jankbpf {

void SamplerCoverage::on(uint64_t ns) {
  if (!spans_.empty() && spans_.back().second == 0) return;  // on already
  if (spans_.size() >= kSpans) spans_.pop_front();
  spans_.emplace_back(ns, 0);
}

void SamplerCoverage::off(uint64_t ns) {
  if (!spans_.empty() && spans_.back().second == 0) spans_.back().second = std::max(ns, spans_.back().first);
}

uint64_t SamplerCoverage::off_within(uint64_t from, uint64_t to) const {
  if (to <= from) return 0;
  uint64_t covered = 0;
  for (const auto& [on, off] : spans_) {
    const uint64_t a = std::max(on, from), b = std::min(off ? off : to, to);
    if (b > a) covered += b - a;  // spans never overlap: on() while on is ignored
  }
  return to - from - std::min(covered, to - from);
}

}  // namespace jankbpf
