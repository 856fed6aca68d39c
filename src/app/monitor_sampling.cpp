// The sampler's duty cycle: perf clocks on only while some task is long,
// drained by a 100 ms lease, and the processes whose samples the kernel
// announces one by one (Python).
#include <sys/timerfd.h>
#include <unistd.h>

#include "app/monitor.h"
#include "util/log.h"

namespace jankbpf {
namespace {

// While sampling is on, how often to check whether a task is still long.
constexpr int64_t kLeaseNs = 100'000'000;

}  // namespace

// Sampling clocks run only while some task is long: on at its early mark,
// off at the first lease check that finds none.
void Monitor::keep_sampling(bool on) {
  if (!sampling_ || on == sampler_.enabled()) return;
  itimerspec its{};
  if (on) {
    sampler_.enable();
    its.it_value.tv_nsec = kLeaseNs;
    its.it_interval.tv_nsec = kLeaseNs;
  } else {
    sampler_.disable();
  }
  timerfd_settime(lease_.get(), 0, &its, nullptr);
}

void Monitor::on_lease() {
  uint64_t n;
  (void)!read(lease_.get(), &n, sizeof n);
  // Samples wake this thread only when half a ring is full: hand what is
  // there to the reporter now, so it unwinds while the task runs.
  drain_samples();
  if (detector_->long_tasks() <= 0) keep_sampling(false);
}

void Monitor::drain_samples() {
  if (sampling_) sampler_.drain_all([&](std::span<const uint8_t> r) { reporter_->add_perf_sample(r); });
}

void Monitor::set_eager(pid_t pid, bool on) {
  if (on == (eager_.count(pid) != 0)) return;
  if (on && eager_.size() >= 4096) eager_.clear();  // the kernel's map is LRU: it forgets too
  if (!detector_->set_eager(pid, on) && on) {
    log::info("pid %d: samples not announced at once (eager map full): runtime frames may read late", pid);
    return;
  }
  if (on) {
    eager_.insert(pid);
    log::info("pid %d: Python, JavaScript or Java: each sample read at once", pid);
  } else {
    eager_.erase(pid);
  }
}

}  // namespace jankbpf
