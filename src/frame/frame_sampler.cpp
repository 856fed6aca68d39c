#include "frame/frame_sampler.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <cstring>

#include "sampling/perf_sampler.h"

namespace jankbpf::frame {
namespace {

constexpr size_t kRingPages = 32;  // drained at every sample: a few samples of room

}  // namespace

FrameSampler::~FrameSampler() {
  for (auto& [tid, t] : threads_) close(t);
}

void FrameSampler::close(Thread& t) {
  if (t.ring) munmap(t.ring, data_size_ + page_);
  t.ring = nullptr;
  t.fd.reset();
}

int FrameSampler::watch(pid_t tid, std::string* error) {
  if (threads_.count(tid)) return threads_[tid].fd.get();
  if (threads_.size() >= kMaxThreads) {
    *error = "already sampling " + std::to_string(kMaxThreads) + " Wayland threads";
    return -1;
  }
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  data_size_ = kRingPages * page_;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = cfg_.period_ns;
  attr.sample_type = perf_sample_type();
  attr.sample_regs_user = cfg_.regs_mask;
  attr.sample_stack_user = cfg_.stack_bytes;
  attr.exclude_callchain_user = 1;
  attr.wakeup_events = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    *error = "perf_event_open(cpu-clock, tid " + std::to_string(tid) + "): " + strerror(errno);
    return -1;
  }
  Thread t;
  t.fd.reset(fd);
  t.ring = mmap(nullptr, data_size_ + page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (t.ring == MAP_FAILED) {
    t.ring = nullptr;
    *error = std::string("mmap of a frame sampler's ring: ") + strerror(errno);
    return -1;
  }
  if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, cfg_.bpf_prog_fd)) {
    *error = std::string("attaching the frame sample filter: ") + strerror(errno);
    close(t);
    return -1;
  }
  char status[64];
  snprintf(status, sizeof status, "/proc/%d/status", tid);  // the tgid, for forget()
  t.pid = tid;
  if (FILE* f = fopen(status, "re")) {
    char line[128];
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "Tgid: %d", &t.pid) == 1) break;
    fclose(f);
  }
  threads_[tid] = std::move(t);
  return fd;
}

void FrameSampler::drain(int fd, const std::function<void(std::span<const uint8_t>)>& sink) {
  for (auto& [tid, t] : threads_)
    if (t.fd.get() == fd && t.ring) drain_perf_ring(t.ring, data_size_, page_, scratch_, &lost_, sink);
}

void FrameSampler::drain_all(const std::function<void(std::span<const uint8_t>)>& sink) {
  for (auto& [tid, t] : threads_)
    if (t.ring) drain_perf_ring(t.ring, data_size_, page_, scratch_, &lost_, sink);
}

void FrameSampler::forget(pid_t pid, const std::function<void(std::span<const uint8_t>)>& sink) {
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->second.pid != pid) {
      ++it;
      continue;
    }
    if (it->second.ring) drain_perf_ring(it->second.ring, data_size_, page_, scratch_, &lost_, sink);
    close(it->second);
    it = threads_.erase(it);
  }
}

}  // namespace jankbpf::frame
