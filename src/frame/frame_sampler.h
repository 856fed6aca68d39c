// Stacks of frames past their deadline: a cpu-clock perf event on each
// Wayland client's main thread, filtered by jb_frame_sample. A per-thread
// clock ticks only while that thread runs, so it costs nothing while the
// client sleeps, and the first stack of a late frame comes one period after
// its deadline, whatever the machine-wide sampler (off until a task turns
// long) is doing. Each sample wakes the reader at once: a Python client's
// frames must be read while they still describe it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "util/fd.h"

namespace jankbpf::frame {

class FrameSampler {
 public:
  struct Config {
    uint64_t period_ns = 4'000'000;
    uint32_t stack_bytes = 16384;
    uint64_t regs_mask = 0;
    int bpf_prog_fd = -1;
  };
  explicit FrameSampler(Config cfg) : cfg_(cfg) {}
  uint64_t period_ns() const { return cfg_.period_ns; }
  ~FrameSampler();
  FrameSampler(const FrameSampler&) = delete;
  FrameSampler& operator=(const FrameSampler&) = delete;

  // Starts sampling thread `tid`; its fd (for epoll), or -1 with *error.
  int watch(pid_t tid, std::string* error);
  // Stops sampling the threads of process `pid` (after a last drain).
  void forget(pid_t pid, const std::function<void(std::span<const uint8_t>)>& sink);
  bool watching(pid_t tid) const { return threads_.count(tid) != 0; }
  void drain(int fd, const std::function<void(std::span<const uint8_t>)>& sink);
  void drain_all(const std::function<void(std::span<const uint8_t>)>& sink);
  uint64_t lost() const { return lost_; }
  size_t threads() const { return threads_.size(); }

  // At most this many threads at once (each holds a descriptor and a ring).
  static constexpr size_t kMaxThreads = 256;

 private:
  struct Thread {
    pid_t pid = 0;
    Fd fd;
    void* ring = nullptr;
  };
  void close(Thread& t);
  Config cfg_;
  size_t page_ = 4096, data_size_ = 0;
  std::map<pid_t, Thread> threads_;  // by tid
  std::vector<uint64_t> scratch_;
  uint64_t lost_ = 0;
};

}  // namespace jankbpf::frame
