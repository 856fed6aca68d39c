#include "stack/inflate_index.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace jankbpf::stack {
namespace {

constexpr size_t kInChunk = 16 << 10;

struct Inflater {
  z_stream s{};
  bool ok = false;
  explicit Inflater(int window_bits) { ok = inflateInit2(&s, window_bits) == Z_OK; }
  ~Inflater() {
    if (ok) inflateEnd(&s);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
};

}  // namespace

bool InflateIndex::build(const Reader& read, uint64_t in_len, uint64_t out_len, uint64_t span) {
  points_.clear();
  in_len_ = in_len;
  out_len_ = out_len;
  Inflater z(15);  // a zlib stream: its header, then deflate
  if (!z.ok) return false;
  z_stream& s = z.s;
  std::vector<uint8_t> in(kInChunk), win(kWindow);
  uint64_t in_off = 0, totin = 0, totout = 0, last = 0;
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    if (s.avail_in == 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(in.size(), in_len - in_off));
      const size_t got = want ? read(in_off, in.data(), want) : 0;
      if (got == 0 || got > want) break;  // the input ended before the stream did
      in_off += got;
      s.next_in = in.data();
      s.avail_in = static_cast<uInt>(got);
    }
    do {
      if (s.avail_out == 0) {
        s.next_out = win.data();
        s.avail_out = static_cast<uInt>(win.size());
      }
      const uInt in_before = s.avail_in, out_before = s.avail_out;
      ret = inflate(&s, Z_BLOCK);
      totin += in_before - s.avail_in;
      totout += out_before - s.avail_out;
      if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) return points_.clear(), false;
      if (totout > out_len) return points_.clear(), false;  // it claimed less than it holds
      if (ret == Z_STREAM_END) break;
      if (in_before == s.avail_in && out_before == s.avail_out) {
        if (s.avail_in != 0) return points_.clear(), false;  // stuck with input left: never loop
        break;                                                // wants input
      }
      // At a block's end (not the last block's), all output of the block
      // is out and at most 7 bits of the next are in: a place to restart.
      if ((s.data_type & 128) && !(s.data_type & 64) && (totout == 0 || totout - last >= span)) {
        Point p;
        p.out = totout;
        p.in = totin;
        p.bits = s.data_type & 7;
        p.window.resize(kWindow);
        const size_t left = s.avail_out;  // the circular window's oldest bytes start at kWindow - left
        std::memcpy(p.window.data(), win.data() + kWindow - left, left);
        std::memcpy(p.window.data() + left, win.data(), kWindow - left);
        points_.push_back(std::move(p));
        last = totout;
      }
    } while (s.avail_in != 0);
  }
  if (ret != Z_STREAM_END || totout != out_len || points_.empty() || points_[0].out != 0) {
    points_.clear();
    return false;
  }
  return true;
}

size_t InflateIndex::read(const Reader& read, uint64_t off, uint8_t* buf, size_t n) const {
  if (points_.empty() || off >= out_len_ || n == 0) return 0;
  n = static_cast<size_t>(std::min<uint64_t>(n, out_len_ - off));
  auto it = std::upper_bound(points_.begin(), points_.end(), off, [](uint64_t o, const Point& p) { return o < p.out; });
  const Point& at = *std::prev(it);
  Inflater z(-15);  // raw deflate from the point on
  if (!z.ok) return 0;
  z_stream& s = z.s;
  uint64_t in_off = at.in;
  if (at.bits) {
    uint8_t b = 0;
    if (at.in == 0 || read(at.in - 1, &b, 1) != 1) return 0;
    if (inflatePrime(&s, at.bits, b >> (8 - at.bits)) != Z_OK) return 0;
  }
  if (inflateSetDictionary(&s, at.window.data(), static_cast<uInt>(at.window.size())) != Z_OK) return 0;
  std::vector<uint8_t> in(kInChunk), skip(kWindow);
  uint64_t pos = at.out;
  size_t produced = 0;
  while (produced < n) {
    if (s.avail_in == 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(in.size(), in_len_ - std::min(in_len_, in_off)));
      const size_t got = want ? read(in_off, in.data(), want) : 0;
      if (got == 0 || got > want) break;
      in_off += got;
      s.next_in = in.data();
      s.avail_in = static_cast<uInt>(got);
    }
    const bool skipping = pos < off;
    if (skipping) {
      s.next_out = skip.data();
      s.avail_out = static_cast<uInt>(std::min<uint64_t>(skip.size(), off - pos));
    } else {
      s.next_out = buf + produced;
      s.avail_out = static_cast<uInt>(std::min<size_t>(n - produced, UINT32_MAX));
    }
    const uInt in_before = s.avail_in, out_before = s.avail_out;
    const int ret = inflate(&s, Z_NO_FLUSH);
    const size_t made = out_before - s.avail_out;
    pos += made;
    if (!skipping) produced += made;
    if (ret == Z_STREAM_END) break;
    if (ret != Z_OK && ret != Z_BUF_ERROR) break;  // no longer inflates: what there is
    if (in_before == s.avail_in && made == 0 && s.avail_in != 0) break;
  }
  return produced;
}

}  // namespace jankbpf::stack
