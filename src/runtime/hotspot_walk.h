// What the HotSpot walker's files share (hotspot_frames.cpp,
// hotspot_methods.cpp, hotspot_threads.cpp): byte access, the stack view,
// and one walk's state. Private to src/runtime/hotspot_*.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/hotspot_frames.h"

namespace jankbpf::runtime {
namespace hotspot_detail {

// Return addresses as stored: arm64 pointer-authentication bits above a
// 48-bit user address are not part of them.
inline constexpr uint64_t kUserAddrMask = (uint64_t{1} << 48) - 1;
inline constexpr uint8_t kSegmapFree = 0xff;  // CodeHeap's free_sentinel
inline constexpr size_t kStackPage = 4096;

// A field of a structure read into `b`, zero when it is not there.
template <typename T>
T get(const std::vector<uint8_t>& b, size_t off) {
  T v{};
  if (off != kHsNone && off + sizeof v <= b.size()) std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}


// The sampled thread's stack: the copy the sample carries, then the live
// stack read in pages (callers further out than the copy: they stay where
// they are while the thread runs above them), at most kMaxStackReadBytes.
class StackView {
 public:
  StackView(MemReader& mem, const NativeStack& s) : mem_(mem), s_(s) {}
  bool word(uint64_t addr, uint64_t* out) {
    if ((addr & 7) || addr + 8 < addr) return false;
    if (addr >= s_.sp && addr + 8 <= s_.sp + s_.stack.size()) {
      std::memcpy(out, s_.stack.data() + (addr - s_.sp), 8);
      return true;
    }
    uint64_t page = addr & ~uint64_t{kStackPage - 1};
    if (page != last_page_) {
      auto it = std::find(pages_.begin(), pages_.end(), page);
      if (it == pages_.end()) {
        if ((pages_.size() + 1) * kStackPage > kMaxStackReadBytes) return false;
        bytes_.resize((pages_.size() + 1) * kStackPage);
        if (!mem_.read(page, bytes_.data() + pages_.size() * kStackPage, kStackPage)) {
          bytes_.resize(pages_.size() * kStackPage);
          return false;
        }
        pages_.push_back(page);
        it = pages_.end() - 1;
      }
      last_page_ = page;
      last_index_ = static_cast<size_t>(it - pages_.begin());
    }
    std::memcpy(out, bytes_.data() + last_index_ * kStackPage + (addr - page), 8);
    return true;
  }

 private:
  MemReader& mem_;
  const NativeStack& s_;
  std::vector<uint64_t> pages_;
  std::vector<uint8_t> bytes_;
  // No page is all ones: before the first read, an address in page 0
  // must not pass for the cached page (there are no bytes yet).
  uint64_t last_page_ = ~uint64_t{0};
  size_t last_index_ = 0;
};


}  // namespace hotspot_detail

// One frame as the physical walk found it, before its method is named.
struct HotSpotWalker::Physical {
  JavaFrame::Kind kind = JavaFrame::Kind::Unreadable;
  uint64_t method = 0;  // Method* (0: not known)
  int32_t bci = -1;     // -1: not known
  std::array<uint64_t, 8> below{};  // interpreted: the words below the method slot (one is the bcp)
  uint64_t bcp_reg = 0;             // the leaf's: the interpreter's bcp register
  std::string stub;
};

struct HotSpotWalker::Walk {
  Walk(MemReader& mem, const NativeStack& s) : stack(mem, s), interp_bcp(s.interp_bcp) {}
  hotspot_detail::StackView stack;
  uint64_t interp_bcp;
  std::vector<uint64_t> used_blobs;  // cached blobs this walk relied on, to re-check
  std::vector<std::vector<Physical>> segments;
  size_t physical = 0, logical = 0;
};

}  // namespace jankbpf::runtime
