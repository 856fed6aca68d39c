// Reads a BPF ring buffer map through one mapping of its data.
//
// libbpf's reader maps the data area twice, back to back, so that a record
// wrapping past the end reads as one; the kernel maps every page of a ring
// at mmap time, so that reader's resident size is twice the ring's (10 MB
// of jankbpf's RSS for its 5 MB of rings). Records are small next to the
// ring and rarely wrap: the few that do are copied whole into a buffer
// before the handler sees them. The protocol is the kernel's
// (kernel/bpf/ringbuf.c): an 8-byte header per record whose length carries
// a busy bit (still being written) and a discard bit; the reader publishes
// how far it has read in the consumer page, the only page it may write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace jankbpf {

class RingReader {
 public:
  using Handler = std::function<void(std::span<const uint8_t> record)>;

  // Maps the ring of `map_fd` (a BPF_MAP_TYPE_RINGBUF map; not taken over).
  // nullptr with *error set when it cannot be mapped.
  static std::unique_ptr<RingReader> open(int map_fd, Handler handler, std::string* error);
  // The same reader over memory laid out as the kernel's (tests): the
  // consumer page, and the producer page followed by `size` bytes of data.
  static std::unique_ptr<RingReader> over_memory(void* consumer_page, const void* producer_page, size_t page,
                                                 uint64_t size, Handler handler);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Readable (EPOLLIN, level) while records wait: the map itself.
  int fd() const { return map_fd_; }
  // Hands every record written so far to the handler, in order; how many.
  int consume();
  // Records that wrapped past the ring's end (copied before handing over).
  uint64_t wrapped() const { return wrapped_; }

 private:
  RingReader() = default;

  int map_fd_ = -1;
  Handler handler_;
  size_t page_ = 0;
  uint64_t size_ = 0, mask_ = 0;  // the data area: a power of two
  void* consumer_ = nullptr;      // its page (read-write)
  void* producer_ = nullptr;      // its page, then the data (read-only)
  const uint8_t* data_ = nullptr;
  bool mapped_ = false;  // ours to unmap
  std::vector<uint8_t> bounce_;
  uint64_t wrapped_ = 0;
};

}  // namespace jankbpf
