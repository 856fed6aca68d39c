// A compressed DWARF section as a hostile file holds it: the inflate index
// (stack/inflate_index.h) must refuse a stream that does not inflate to
// the size it claims, never loop or overrun, and, when it accepts one,
// give exactly what zlib's one-shot inflate gives for every range.
// Input: 3 bytes of claimed size (at most 256 KB), 1 byte choosing a byte
// of the stream to flip for the reads and the span between access points
// (1-16 KB: many points on a small stream), then the zlib stream.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stack/inflate_index.h"

using jankbpf::stack::InflateIndex;

namespace {

InflateIndex::Reader reader_of(const std::vector<uint8_t>& z) {
  return [&z](uint64_t off, uint8_t* buf, size_t n) -> size_t {
    if (off >= z.size()) return 0;
    n = n < z.size() - off ? n : z.size() - off;
    std::memcpy(buf, z.data() + off, n);
    return n;
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t claimed = (uint64_t{data[0]} | uint64_t{data[1]} << 8 | uint64_t{data[2]} << 16) & ((256u << 10) - 1);
  const uint8_t flip = data[3];
  std::vector<uint8_t> z(data + 4, data + size);
  InflateIndex index;
  const bool ok = index.build(reader_of(z), z.size(), claimed, (uint64_t{flip & 15u} + 1) << 10);
  // zlib's own answer: the stream inflates to exactly `claimed` bytes.
  std::vector<uint8_t> truth(claimed + 1);
  uLongf n = static_cast<uLongf>(truth.size());
  const int zret = uncompress(truth.data(), &n, z.data(), static_cast<uLong>(z.size()));
  const bool whole = zret == Z_OK && n == claimed && claimed > 0;
  if (ok && !whole) abort();  // accepted what zlib does not inflate to that size
  std::vector<uint8_t> out(70000);
  if (ok) {
    for (uint64_t off = flip; off < claimed; off += 6000) {  // ranges across the points
      const size_t want = static_cast<size_t>(claimed - off < 9000 ? claimed - off : 9000);
      if (index.read(reader_of(z), off, out.data(), want) != want) abort();
      if (std::memcmp(out.data(), truth.data() + off, want) != 0) abort();
    }
    if (index.read(reader_of(z), claimed, out.data(), 1) != 0) abort();
    // The file changed under the index: short or wrong bytes, never more.
    if (!z.empty()) {
      z[flip % z.size()] ^= 0xff;
      if (index.read(reader_of(z), claimed / 2, out.data(), out.size()) > out.size()) abort();
    }
  } else if (index.read(reader_of(z), 0, out.data(), out.size()) != 0) {
    abort();  // refused: reads nothing
  }
  return 0;
}
