#include "bpf/ring_reader.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace jankbpf {
namespace {

// A record's length with its flags off, rounded up to the 8-byte step the
// kernel advances by, its header included.
uint64_t record_step(uint32_t len) {
  const uint64_t n = (len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) + BPF_RINGBUF_HDR_SZ;
  return (n + 7) & ~uint64_t{7};
}

}  // namespace

std::unique_ptr<RingReader> RingReader::open(int map_fd, Handler handler, std::string* error) {
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(map_fd, &info, &len) != 0) {
    *error = std::string("cannot read the ring's map info: ") + strerror(errno);
    return nullptr;
  }
  if (info.type != BPF_MAP_TYPE_RINGBUF || info.max_entries == 0 ||
      (info.max_entries & (info.max_entries - 1)) != 0) {
    *error = "not a ring buffer map";
    return nullptr;
  }
  std::unique_ptr<RingReader> r(new RingReader());
  r->map_fd_ = map_fd;
  r->handler_ = std::move(handler);
  r->page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  r->size_ = info.max_entries;
  r->mask_ = r->size_ - 1;
  void* c = mmap(nullptr, r->page_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (c == MAP_FAILED) {
    *error = std::string("cannot map the ring's consumer page: ") + strerror(errno);
    return nullptr;
  }
  r->consumer_ = c;
  r->mapped_ = true;
  void* p = mmap(nullptr, r->page_ + r->size_, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(r->page_));
  if (p == MAP_FAILED) {
    *error = std::string("cannot map the ring's data: ") + strerror(errno);
    return nullptr;
  }
  r->producer_ = p;
  r->data_ = static_cast<const uint8_t*>(p) + r->page_;
  return r;
}

std::unique_ptr<RingReader> RingReader::over_memory(void* consumer_page, const void* producer_page, size_t page,
                                                    uint64_t size, Handler handler) {
  if (size == 0 || (size & (size - 1)) != 0) return nullptr;
  std::unique_ptr<RingReader> r(new RingReader());
  r->handler_ = std::move(handler);
  r->page_ = page;
  r->size_ = size;
  r->mask_ = size - 1;
  r->consumer_ = consumer_page;
  r->producer_ = const_cast<void*>(producer_page);
  r->data_ = static_cast<const uint8_t*>(producer_page) + page;
  return r;
}

RingReader::~RingReader() {
  if (!mapped_) return;
  if (producer_) munmap(producer_, page_ + size_);
  if (consumer_) munmap(consumer_, page_);
}

int RingReader::consume() {
  auto* cons_pos = static_cast<uint64_t*>(consumer_);
  auto* prod_pos = static_cast<const uint64_t*>(producer_);
  uint64_t cons = __atomic_load_n(cons_pos, __ATOMIC_ACQUIRE);
  int n = 0;
  for (;;) {
    bool progress = false;
    const uint64_t prod = __atomic_load_n(prod_pos, __ATOMIC_ACQUIRE);
    while (cons < prod) {
      // Headers are 8-byte aligned and the ring a whole number of pages:
      // a header never wraps, a record's body may.
      const uint64_t at = cons & mask_;
      const uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t*>(data_ + at), __ATOMIC_ACQUIRE);
      if (len & BPF_RINGBUF_BUSY_BIT) {
        __atomic_store_n(cons_pos, cons, __ATOMIC_RELEASE);
        return n;
      }
      progress = true;
      cons += record_step(len);
      const uint64_t body = len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
      if (!(len & BPF_RINGBUF_DISCARD_BIT) && body <= size_ - BPF_RINGBUF_HDR_SZ) {
        const uint64_t start = (at + BPF_RINGBUF_HDR_SZ) & mask_;
        if (start + body <= size_) {
          handler_({data_ + start, static_cast<size_t>(body)});
        } else {
          const uint64_t first = size_ - start;
          bounce_.resize(body);
          std::memcpy(bounce_.data(), data_ + start, first);
          std::memcpy(bounce_.data() + first, data_, body - first);
          ++wrapped_;
          handler_({bounce_.data(), static_cast<size_t>(body)});
        }
        ++n;
      }
      __atomic_store_n(cons_pos, cons, __ATOMIC_RELEASE);
    }
    if (!progress) break;
  }
  return n;
}

}  // namespace jankbpf
