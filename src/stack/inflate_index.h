// Random access into a zlib stream: a compressed ELF section (SHF_COMPRESSED,
// ELFCOMPRESS_ZLIB), read page by page as libdw touches it instead of
// inflated whole. Debian's debug files (libc6-dbg, *-dbgsym) compress their
// DWARF; libelf inflates each section whole into the heap, ~10 MB for libc's
// alone, the largest part of jankbpf's peak RSS with stacks (issue 30).
//
// The method is zlib's "zran": one pass over the stream records, at a
// deflate block boundary every kSpan bytes of output, where the input is
// (byte and bit) and the 32 KB of output before it; a read starts a raw
// inflate at the nearest such point with that window as its dictionary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace jankbpf::stack {

class InflateIndex {
 public:
  // Output bytes between access points: a read inflates at most this much
  // more than it returns (~1.5 ms here). Each point keeps a 32 KB window,
  // so the index is 1/16 of the inflated size (0.5 MB for libc's DWARF).
  static constexpr uint64_t kSpan = 512 << 10;
  static constexpr size_t kWindow = 32 << 10;

  // The compressed stream's bytes at offset `off` of the stream: up to n
  // into buf, how many were read (fewer at its end, or when the file no
  // longer has them).
  using Reader = std::function<size_t(uint64_t off, uint8_t* buf, size_t n)>;

  // One pass over a zlib stream of in_len bytes that must inflate to
  // exactly out_len bytes. False if it does not (corrupt, truncated, a
  // size that lies): the caller lets libelf inflate it, or refuse it.
  // `span`: kSpan, or smaller for tests and the fuzzer (more points on a
  // small stream).
  bool build(const Reader& read, uint64_t in_len, uint64_t out_len, uint64_t span = kSpan);
  // n bytes of output at `off` into buf; how many could be produced
  // (0 if the stream no longer inflates as it did).
  size_t read(const Reader& read, uint64_t off, uint8_t* buf, size_t n) const;

  uint64_t size() const { return out_len_; }
  size_t points() const { return points_.size(); }
  size_t memory_bytes() const { return points_.size() * (sizeof(Point) + kWindow); }

 private:
  struct Point {
    uint64_t out = 0;  // output offset
    uint64_t in = 0;   // input offset of the first whole byte after it
    int bits = 0;      // bits of the byte before `in` still to be read (0-7)
    std::vector<uint8_t> window;  // the kWindow output bytes before `out`
  };
  std::vector<Point> points_;
  uint64_t in_len_ = 0, out_len_ = 0;
};

}  // namespace jankbpf::stack
