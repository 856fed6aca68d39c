// The on-CPU stack sampler: one cpu-clock perf event per CPU, each with
// jankbpf's jb_sample BPF program as its filter, so only samples of watched
// threads inside long tasks are written. The events stay disabled while no
// task is long: an idle machine gets no sampling interrupts.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "util/fd.h"

namespace jankbpf {

struct PerfSamplerConfig {
  uint64_t period_ns = 10'000'000;  // cpu-clock period
  uint32_t stack_bytes = 16384;     // PERF_SAMPLE_STACK_USER size
  uint64_t regs_mask = 0;           // PERF_SAMPLE_REGS_USER mask (arch table)
  int bpf_prog_fd = -1;             // the filter
  size_t ring_pages = 64;           // per CPU (power of two); see ring_pages_for()
};

// Pages per CPU ring that hold at least 12 samples of stack_bytes (the
// reader is woken at half: 6 samples, 60 ms at the default period; the
// 100 ms lease drains it too).
size_t ring_pages_for(uint32_t stack_bytes, size_t page_size);

// The attributes of jankbpf's cpu-clock sampling events (their
// sample_type is what the reporter parses): disabled, woken at half the ring.
uint64_t perf_sample_type();

// Every waiting record of one mmapped perf ring (`base`: the meta page, then
// `data_size` bytes): each sample to `sink`, lost records counted in *lost.
void drain_perf_ring(void* base, size_t data_size, size_t page, std::vector<uint64_t>& scratch, uint64_t* lost,
                     const std::function<void(std::span<const uint8_t>)>& sink);

class PerfSampler {
 public:
  // Opens and maps the events (disabled). Returns false with *error set.
  bool open(const PerfSamplerConfig& cfg, std::string* error);
  ~PerfSampler();

  void enable();
  void disable();
  bool enabled() const { return enabled_; }

  // fds that become readable when samples are waiting (for epoll).
  std::vector<int> fds() const;
  // Copies every waiting record of CPU slot `i` out and passes each sample
  // (a PERF_RECORD_SAMPLE, header included, 8-byte aligned) to `sink`.
  void drain(size_t i, const std::function<void(std::span<const uint8_t>)>& sink);
  void drain_all(const std::function<void(std::span<const uint8_t>)>& sink);

  uint64_t sample_type() const { return sample_type_; }
  uint64_t lost() const { return lost_; }  // samples the kernel dropped (ring full)

 private:
  struct Cpu {
    Fd fd;
    void* ring = nullptr;
    size_t ring_size = 0;  // data area bytes
  };
  std::vector<Cpu> cpus_;
  size_t page_ = 4096;
  uint64_t sample_type_ = 0;
  uint64_t lost_ = 0;
  bool enabled_ = false;
  std::vector<uint64_t> scratch_;  // a record that wraps around the ring, joined
};

}  // namespace jankbpf
