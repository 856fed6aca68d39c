// Perf sample copies, recycled. A fresh 16 KB vector per sample cost more
// than the copy itself: malloc of a block that size first consolidates
// every small chunk freed since (malloc_consolidate), and the vector zeroed
// the bytes it was about to overwrite. The ring thread takes a buffer, the
// reporter gives it back once the sample is unwound.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace jankbpf {

// An allocator whose resize() leaves new bytes as they are (a copy fills them).
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

using RecordBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

class RecordPool {
 public:
  // Buffers kept for reuse: as many as samples wait for the reporter in a
  // burst; beyond, a returned buffer is freed.
  static constexpr size_t kMaxKept = 128;

  // `size` bytes, contents undefined.
  RecordBytes take(size_t size) {
    RecordBytes b;
    {
      std::lock_guard lk(mu_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    b.resize(size);
    return b;
  }

  void give(RecordBytes&& b) {
    if (b.capacity() == 0) return;
    std::lock_guard lk(mu_);
    if (free_.size() < kMaxKept) free_.push_back(std::move(b));
  }

 private:
  std::mutex mu_;
  std::vector<RecordBytes> free_;
};

}  // namespace jankbpf
