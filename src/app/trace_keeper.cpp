#include "app/trace_keeper.h"

#include <sys/timerfd.h>

#include <algorithm>

#include "logs/quota.h"
#include "trace/capture.h"
#include "trace/ftrace_instance.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf {
namespace {

constexpr int64_t kSaveAfterMs = 3000;  // the seed: the capture ends 3 s after the trigger
constexpr int64_t kPollMs = 50;         // a capture with no pidfd to wait on is polled

}  // namespace

TraceKeeper::TraceKeeper(Reporter& reporter, CaptureOptions options, RecorderOptions recorder)
    : reporter_(reporter), options_(std::move(options)), recorder_(recorder) {}
TraceKeeper::~TraceKeeper() = default;

bool TraceKeeper::start(std::string* error) {
  FtraceOptions fo;
  fo.record_at_start = !recorder_.on_demand;
  auto inst = std::make_unique<FtraceInstance>(fo);
  if (!inst->create(*error)) return false;
  deadline_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!deadline_) {
    *error = "timerfd_create failed";
    return false;
  }
  instance_ = std::move(inst);
  if (!recorder_.on_demand) recording_since_ns_ = monotonic_ns();  // on demand: want_recording() sets it
  capture_ = std::make_unique<TraceCapture>(*instance_, reporter_.logs(), options_);
  log::info("ftrace instance %s ready (%u KB per CPU), recording %s", instance_->name().c_str(),
            instance_->buffer_kb_per_cpu(), recorder_.on_demand ? "on demand" : "always");
  return true;
}

bool TraceKeeper::recording() const { return instance_ && instance_->recording(); }

bool TraceKeeper::capturing() const { return scheduled_ || (capture_ && capture_->running()); }

void TraceKeeper::want_recording(pid_t pid, uint64_t proc_start_ns) {
  if (!recorder_.on_demand || !instance_ || stopped_) return;
  if (reporter_.quota().peek_trace(ProcessKey{pid, proc_start_ns}, monotonic_ns() / 1'000'000) != Suppressed::None)
    return;
  want_recording();
}

void TraceKeeper::want_recording() {
  if (!recorder_.on_demand || !instance_ || stopped_) return;
  const uint64_t now = monotonic_ns();
  hold_until_ns_ = std::max(hold_until_ns_, now + recorder_.hold_ns);
  if (instance_->recording()) return;
  // tracing_on is a flag the events check: instant, no grace period.
  instance_->set_recording(true);
  recording_since_ns_ = now;
  log::debug("trace recorder on (a watched task is long)");
  if (!capturing()) arm_hold();
}

void TraceKeeper::arm_hold() {
  if (!recorder_.on_demand || !recording()) {
    arm_deadline(0);
    return;
  }
  const uint64_t now = monotonic_ns();
  arm_deadline(hold_until_ns_ > now ? std::max<int64_t>(1, (hold_until_ns_ - now + 999'999) / 1'000'000) : 1);
}

void TraceKeeper::check_hold() {
  if (!recorder_.on_demand || !recording() || capturing()) return;
  if (monotonic_ns() < hold_until_ns_) {
    arm_hold();
    return;
  }
  instance_->set_recording(false);
  log::debug("trace recorder off (no long task)");
  arm_hold();  // not recording: disarms
}

int TraceKeeper::capture_fd() const { return capture_ && capture_->running() ? capture_->wait_fd() : -1; }

void TraceKeeper::on_trigger(pid_t pid, pid_t tid, uint64_t seq, uint64_t proc_start_ns, uint64_t begin_ns) {
  auto pending = std::make_shared<PendingTrace>();
  if (by_task_.size() >= kMaxPending && !by_task_.count({tid, seq})) {
    auto oldest = std::min_element(by_task_.begin(), by_task_.end(), [](const auto& a, const auto& b) {
      return a.second.order < b.second.order;
    });
    by_task_.erase(oldest);
    ++evicted_;
  }
  by_task_[{tid, seq}] = {pending, ++triggers_};
  if (stopped_) {
    pending->error = "jankbpf stopped before the trace was saved";
    pending->finish();
    return;
  }
  if (!instance_) {
    pending->note = "no trace: the ftrace instance could not be created";
    pending->finish();
    return;
  }
  const Suppressed why = reporter_.quota().take_trace(ProcessKey{pid, proc_start_ns}, monotonic_ns() / 1'000'000);
  if (why != Suppressed::None) {
    pending->suppressed = why;
    pending->finish();
    return;
  }
  want_recording();  // on demand it began at the task's early mark or crossing
  // The recorder is set up beside the BPF load and can be ready after a
  // task began (the first tasks of a run, on a slow machine), and on demand
  // it begins inside the task: say so.
  if (recording_since_ns_ > begin_ns)
    pending->note = "the recorder started " + std::to_string((recording_since_ns_ - begin_ns) / 1'000'000) +
                    " ms into the task: the trace misses its beginning";
  // One flight recorder: another process's trigger while a capture is
  // scheduled or running shares that capture (the trace covers both).
  if (scheduled_ || (capture_ && capture_->running())) {
    shared_.push_back(pending);  // filled in when that capture finishes
    return;
  }
  current_ = pending;
  capture_pid_ = pid;
  scheduled_ = true;
  arm_deadline(kSaveAfterMs);
}

// ms 0 disarms.
void TraceKeeper::arm_deadline(int64_t ms) {
  itimerspec its{};
  its.it_value.tv_sec = ms / 1000;
  its.it_value.tv_nsec = (ms % 1000) * 1'000'000;
  timerfd_settime(deadline_.get(), 0, &its, nullptr);
}

std::shared_ptr<PendingTrace> TraceKeeper::take(pid_t tid, uint64_t seq) {
  auto it = by_task_.find({tid, seq});
  if (it == by_task_.end()) return nullptr;
  auto p = it->second.trace;
  by_task_.erase(it);
  return p;
}

void TraceKeeper::on_deadline() {
  uint64_t n;
  (void)!read(deadline_.get(), &n, sizeof n);
  if (scheduled_) {
    begin_capture();
  } else if (capture_ && capture_->running()) {
    finish_capture(false);  // polling a trace-cmd we have no pidfd for
    if (capture_->running()) arm_deadline(kPollMs);
  } else {
    check_hold();
  }
}

void TraceKeeper::begin_capture() {
  scheduled_ = false;
  if (!capture_->start(capture_pid_)) {
    current_->error = "trace capture could not start";
    current_->finish();
    current_.reset();
    arm_hold();
    return;
  }
  // Nothing to wait for when trace-cmd did not start (missing, no temp dir,
  // no tracefs to isolate it): the text trace, or the error, is ready now,
  // and the paused instance must record again at once. A trace-cmd without
  // a pidfd (pidfd_open failed) is polled on the deadline timer.
  if (capture_->wait_fd() < 0) {
    if (capture_->tool_running())
      arm_deadline(kPollMs);
    else
      finish_capture(true);
  }
}

void TraceKeeper::on_capture_done() { finish_capture(false); }

void TraceKeeper::finish_capture(bool block) {
  // The capture adopts its file into the log directory (LogDir has its own lock).
  std::optional<CaptureResult> r = capture_->finish(block);
  if (!r) return;  // still running
  auto fill = [&](PendingTrace& p) {
    if (r->log.ok()) p.paths.push_back(r->log.path);
    p.over_limit = r->log.over_limit;
    p.error = !r->error.empty() ? r->error : r->log.error;
    if (!r->note.empty()) p.note = p.note.empty() ? r->note : p.note + "; " + r->note;
  };
  if (current_) {
    fill(*current_);
    current_->finish();
    current_.reset();
  }
  for (auto& s : shared_) {
    fill(*s);
    s->note = "shares the trace of an earlier task" + (s->note.empty() ? std::string() : "; " + s->note);
    s->finish();
  }
  shared_.clear();
  if (r->log.ok()) {
    saved_++;
    log::info("trace saved: %s (%s, %lld ms)", r->log.path.c_str(), r->format.c_str(),
              static_cast<long long>(r->duration_ms));
  } else {
    const std::string& why = !r->error.empty() ? r->error : r->log.error;
    log::error("trace not saved: %s", why.empty() ? "log directory over its cap" : why.c_str());
  }
  if (!r->note.empty()) log::info("trace: %s", r->note.c_str());
  if (!capturing()) arm_hold();  // the capture re-armed the instance as recording
}

void TraceKeeper::shutdown(std::chrono::milliseconds budget) {
  stopped_ = true;
  if (!capture_) return;
  capture_->set_stopping();
  if (scheduled_) begin_capture();
  if (capture_->running()) {
    capture_->cut_short(budget.count());
    finish_capture(true);
  }
  for (auto& [key, t] : by_task_)
    if (!t.trace->done) {
      t.trace->error = "jankbpf stopped before the trace was saved";
      t.trace->finish();
    }
}

double TraceKeeper::remove_instance() {
  if (!instance_) return 0;
  const uint64_t t0 = monotonic_ns();
  instance_->remove();
  return (monotonic_ns() - t0) / 1e6;
}

}  // namespace jankbpf
