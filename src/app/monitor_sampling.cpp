// The sampler's duty cycle: perf clocks on only while some task is long,
// drained by a 100 ms lease, and the processes whose samples the kernel
// announces one by one (Python).
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

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
    sampler_on_.on(monotonic_ns());
    its.it_value.tv_nsec = kLeaseNs;
    its.it_interval.tv_nsec = kLeaseNs;
  } else {
    sampler_.disable();
    sampler_on_.off(monotonic_ns());
  }
  timerfd_settime(lease_.get(), 0, &its, nullptr);
}

double Monitor::unsampled_ms(const jb_task_event& e, const TaskRecord& rec) {
  if (!sampling_) return 0;
  const DetectorConfig dc = detector_config(opts_);  // the window the kernel samples in
  if (!dc.early_ns || e.end_ns <= e.begin_ns + dc.early_ns) return 0;
  const uint64_t from = e.begin_ns + dc.early_ns;
  const uint64_t to = std::min(e.end_ns, e.begin_ns + dc.sample_window_ns);
  const uint64_t off = sampler_on_.off_within(from, to);
  // At most its running time: asleep, a thread needs no clock (its
  // off-CPU captures are taken at the switch). Turning the clocks on takes
  // the event thread a wakeup: within one period that costs at most the
  // sample it would have taken.
  const double ms = std::min(static_cast<double>(off) / 1e6, rec.state.running_ms);
  if (ms * 1e6 <= static_cast<double>(dc.sample_period_ns)) return 0;
  if (unsampled_tasks_++ == 0)
    log::warn("pid %d tid %d: %.0f ms of a %.0f ms task ran with the sampling clocks still off: jankbpf's "
              "event thread waited for a CPU to turn them on (unsampled_ms in its record; counted as "
              "unsampled_tasks in the summary)",
              rec.proc.pid, rec.tid, ms, rec.duration_ms);
  return ms;
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
