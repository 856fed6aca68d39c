// /tmp/perf-PID.map as the process writing it likes (bad hex, huge and
// wrapping sizes, huge names): parse and lookup must not crash, a lookup
// must only return an entry covering the address, and JIT names split into
// function and location without reading out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "stack/perf_map.h"

using namespace jankbpf::stack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  PerfMap m = PerfMap::parse(text);
  // Probe around the input's own numbers: the first 8 bytes as an address,
  // plus 0 and the top of the address space.
  uint64_t probe = 0;
  std::memcpy(&probe, data, size < 8 ? size : 8);
  for (uint64_t a : {probe, uint64_t{0}, ~uint64_t{0}, uint64_t{probe & 0xffffffffff}}) {
    const PerfMap::Entry* e = m.lookup(a);
    if (e && (a < e->start || a - e->start >= e->size)) abort();
    if (e) {
      JitSymbol j = parse_jit_name(e->name);
      if (j.function.empty()) abort();
    }
  }
  // Names as a whole are attacker text too.
  JitSymbol j = parse_jit_name(text.substr(0, 4096));
  if (j.function.empty() && !text.empty()) abort();
  return 0;
}
