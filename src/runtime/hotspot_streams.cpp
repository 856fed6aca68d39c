// HotSpot's compressed streams: UNSIGNED5 numbers (debug info, line
// tables) and the compressed line number table (hotspot_frames.h).
#include "runtime/hotspot_frames.h"

namespace jankbpf::runtime {
namespace {

int32_t zigzag(uint32_t v) { return static_cast<int32_t>(v >> 1) ^ -static_cast<int32_t>(v & 1); }

}  // namespace

bool read_unsigned5(std::span<const uint8_t> s, size_t& pos, uint32_t& out, uint8_t excluded) {
  // Pack200's UNSIGNED5: bytes of 6 payload bits and a "more" range; a
  // byte below L ends the number, 5 bytes at most. JDK 20 shifted every
  // byte up by the excluded values (the null byte) so streams hold none.
  const uint32_t l = 192 - excluded;
  uint32_t sum = 0;
  for (int i = 0, shift = 0; i < 5; ++i, shift += 6) {
    if (pos >= s.size()) return false;
    uint32_t b = s[pos++];
    if (b < excluded) return false;
    b -= excluded;
    sum += b << shift;
    if (b < l || i == 4) {
      out = sum;
      return true;
    }
  }
  return false;
}

bool decode_line_table(std::span<const uint8_t> s, uint8_t excluded, std::vector<std::pair<uint32_t, uint32_t>>& out,
                       size_t max_pairs, size_t* used) {
  // CompressedLineNumberReadStream: one byte (bci delta << 3 | line delta)
  // for small steps, 0xff and two signed UNSIGNED5 deltas for others, 0 at
  // the end.
  uint32_t bci = 0, line = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    uint8_t b = s[pos++];
    if (b == 0) {
      if (used) *used = pos;
      return true;
    }
    if (b == 0xff) {
      uint32_t db = 0, dl = 0;
      if (!read_unsigned5(s, pos, db, excluded) || !read_unsigned5(s, pos, dl, excluded)) return false;
      bci += static_cast<uint32_t>(zigzag(db));
      line += static_cast<uint32_t>(zigzag(dl));
    } else {
      bci += b >> 3;
      line += b & 7;
    }
    if (out.size() >= max_pairs) return false;
    out.emplace_back(bci, line);
  }
  return false;  // no terminator in the bytes given
}

uint32_t java_line(const std::vector<std::pair<uint32_t, uint32_t>>& pairs, int32_t bci) {
  if (bci < 0) bci = 0;  // the method's entry (a synchronized method's lock)
  uint32_t best_bci = 0, best_line = 0;
  bool found = false;
  for (const auto& [b, line] : pairs) {
    if (b == static_cast<uint32_t>(bci)) return line;
    if (b < static_cast<uint32_t>(bci) && (!found || b >= best_bci)) {
      best_bci = b;
      best_line = line;
      found = true;
    }
  }
  return best_line;
}

}  // namespace jankbpf::runtime
