#include "sampling/perf_sampler.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace jankbpf {

size_t ring_pages_for(uint32_t stack_bytes, size_t page_size) {
  // A sample: the stack copy, its size words, registers, a kernel
  // callchain (up to 127 entries) and the header fields.
  const size_t sample = size_t{stack_bytes} + 2048;
  size_t pages = 64;
  while (pages * page_size < 12 * sample && pages < 4096) pages *= 2;
  return pages;
}

uint64_t perf_sample_type() {
  return PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
         PERF_SAMPLE_STACK_USER;
}

bool PerfSampler::open(const PerfSamplerConfig& cfg, std::string* error) {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  sample_type_ = perf_sample_type();
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = cfg.period_ns;
  attr.sample_type = sample_type_;
  attr.sample_regs_user = cfg.regs_mask;
  attr.sample_stack_user = cfg.stack_bytes;
  attr.exclude_callchain_user = 1;  // user stacks are unwound from the copy
  attr.disabled = 1;
  // Wake the reader when half the ring is full, not per sample: a wakeup
  // cost more than the sample's copy. Samples that are wanted at once (a
  // Python process's) are announced by the filter on the BPF ring instead.
  attr.watermark = 1;
  attr.wakeup_watermark = static_cast<uint32_t>(cfg.ring_pages * page_ / 2);
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;  // same clock as the BPF events

  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  for (long cpu = 0; cpu < ncpu; cpu++) {
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno == ENODEV) continue;  // offline CPU
      *error = std::string("perf_event_open(cpu-clock, cpu ") + std::to_string(cpu) +
               "): " + strerror(errno);
      return false;
    }
    Cpu c;
    c.fd.reset(fd);
    c.ring_size = cfg.ring_pages * page_;
    c.ring = mmap(nullptr, c.ring_size + page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c.ring == MAP_FAILED) {
      *error = std::string("mmap of the perf ring: ") + strerror(errno);
      return false;
    }
    if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, cfg.bpf_prog_fd)) {
      munmap(c.ring, c.ring_size + page_);
      *error = std::string("attaching the sample filter: ") + strerror(errno);
      return false;
    }
    cpus_.push_back(std::move(c));
  }
  if (cpus_.empty()) {
    *error = "no CPU to sample on";
    return false;
  }
  return true;
}

PerfSampler::~PerfSampler() {
  for (auto& c : cpus_)
    if (c.ring) munmap(c.ring, c.ring_size + page_);
}

void PerfSampler::enable() {
  if (enabled_) return;
  for (auto& c : cpus_) ioctl(c.fd.get(), PERF_EVENT_IOC_ENABLE, 0);
  enabled_ = true;
}

void PerfSampler::disable() {
  if (!enabled_) return;
  for (auto& c : cpus_) ioctl(c.fd.get(), PERF_EVENT_IOC_DISABLE, 0);
  enabled_ = false;
}

std::vector<int> PerfSampler::fds() const {
  std::vector<int> out;
  for (auto& c : cpus_) out.push_back(c.fd.get());
  return out;
}

void PerfSampler::drain(size_t i, const std::function<void(std::span<const uint8_t>)>& sink) {
  drain_perf_ring(cpus_[i].ring, cpus_[i].ring_size, page_, scratch_, &lost_, sink);
}

void drain_perf_ring(void* base, size_t data_size, size_t page, std::vector<uint64_t>& scratch, uint64_t* lost,
                     const std::function<void(std::span<const uint8_t>)>& sink) {
  auto* meta = static_cast<perf_event_mmap_page*>(base);
  const auto* data = static_cast<const uint8_t*>(base) + page;
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    // Records may wrap around the end of the data area: copy byte-wise
    // through the ring, after checking the header's size is sane.
    perf_event_header hdr;
    for (size_t k = 0; k < sizeof hdr; k++)
      reinterpret_cast<uint8_t*>(&hdr)[k] = data[(tail + k) % data_size];
    if (hdr.size < sizeof hdr || hdr.size > head - tail) break;  // torn: resync next time
    if (hdr.type == PERF_RECORD_SAMPLE) {
      // In place where it is contiguous (records are 8-byte aligned in the
      // ring); a record that wraps is joined in scratch first.
      size_t off = tail % data_size;
      size_t first = std::min<size_t>(hdr.size, data_size - off);
      if (first == hdr.size) {
        sink(std::span<const uint8_t>(data + off, hdr.size));
      } else {
        scratch.resize((hdr.size + 7) / 8);
        auto* s = reinterpret_cast<uint8_t*>(scratch.data());
        memcpy(s, data + off, first);
        memcpy(s + first, data, hdr.size - first);
        sink(std::span<const uint8_t>(s, hdr.size));
      }
    } else if (hdr.type == PERF_RECORD_LOST) {
      uint64_t n[2];  // id, count
      for (size_t k = 0; k < sizeof n; k++)
        reinterpret_cast<uint8_t*>(n)[k] = data[(tail + sizeof hdr + k) % data_size];
      *lost += n[1];
    }
    tail += hdr.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

void PerfSampler::drain_all(const std::function<void(std::span<const uint8_t>)>& sink) {
  for (size_t i = 0; i < cpus_.size(); i++) drain(i, sink);
}

}  // namespace jankbpf
