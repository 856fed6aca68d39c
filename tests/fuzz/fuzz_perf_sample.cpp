// PERF_RECORD_SAMPLE records, every size field wrong or cut short: the
// first 16 bytes pick attr.sample_type and sample_regs_user, the rest is
// the record (perf_event_header first), copied to an 8-byte-aligned buffer
// as the sampler's ring copy is. Every view the parser hands out must lie
// inside the record.
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stack/perf_sample.h"

using namespace jankbpf::stack;

namespace {

template <class T>
void inside(std::span<const T> v, const uint8_t* lo, const uint8_t* hi) {
  if (v.empty()) return;
  auto* b = reinterpret_cast<const uint8_t*>(v.data());
  if (b < lo || b > hi || v.size_bytes() > static_cast<size_t>(hi - b)) abort();
  // Touch both ends so ASan sees any stray view.
  volatile uint8_t x = b[0];
  x = b[v.size_bytes() - 1];
  (void)x;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16 + 8) return 0;  // the parser refuses less than a header anyway
  uint64_t sample_type, regs_mask;
  std::memcpy(&sample_type, data, 8);
  std::memcpy(&regs_mask, data + 8, 8);
  // Exactly the record's bytes, aligned, so ASan catches a read past it.
  std::vector<uint64_t> buf((size - 16 + 7) / 8);
  std::memcpy(buf.data(), data + 16, size - 16);
  std::span<const uint8_t> rec(reinterpret_cast<const uint8_t*>(buf.data()), size - 16);
  PerfSampleView s;
  if (!parse_perf_sample(rec, sample_type, regs_mask, s)) return 0;
  perf_event_header h;
  std::memcpy(&h, rec.data(), sizeof h);
  const uint8_t* lo = rec.data() + sizeof h;
  const uint8_t* hi = rec.data() + h.size;
  inside(s.callchain, lo, hi);
  inside(s.raw, lo, hi);
  inside(s.regs, lo, hi);
  inside(s.stack, lo, hi);
  if (s.stack_dyn_size > s.stack.size()) abort();
  SampleInput in = to_sample_input(s, regs_mask);
  if (in.stack.size() != s.stack.size() || in.regs.size() != s.regs.size()) abort();
  return 0;
}
