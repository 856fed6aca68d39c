#include "app/trace_keeper.h"

#include <sys/timerfd.h>

#include "logs/quota.h"
#include "trace/capture.h"
#include "trace/ftrace_instance.h"
#include "util/clock.h"
#include "util/log.h"

namespace jankbpf {
namespace {

constexpr int64_t kSaveAfterMs = 3000;  // the seed: the capture ends 3 s after the trigger

}  // namespace

TraceKeeper::TraceKeeper(Reporter& reporter) : reporter_(reporter) {}
TraceKeeper::~TraceKeeper() = default;

bool TraceKeeper::start(std::string* error) {
  auto inst = std::make_unique<FtraceInstance>();
  if (!inst->create(*error)) return false;
  deadline_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!deadline_) {
    *error = "timerfd_create failed";
    return false;
  }
  instance_ = std::move(inst);
  capture_ = std::make_unique<TraceCapture>(*instance_, reporter_.logs());
  log::info("ftrace instance %s recording (%u KB per CPU)", instance_->name().c_str(),
            instance_->buffer_kb_per_cpu());
  return true;
}

int TraceKeeper::capture_fd() const { return capture_ && capture_->running() ? capture_->wait_fd() : -1; }

void TraceKeeper::on_trigger(pid_t pid, pid_t tid, uint64_t seq, uint64_t proc_start_ns) {
  auto pending = std::make_shared<PendingTrace>();
  by_task_[{tid, seq}] = pending;
  if (!instance_) {
    pending->note = "no trace: the ftrace instance could not be created";
    pending->finish();
    return;
  }
  Suppressed why;
  {
    std::lock_guard lk(reporter_.quota_mutex());
    why = reporter_.quota().take_trace(ProcessKey{pid, proc_start_ns}, monotonic_ns() / 1'000'000);
  }
  if (why != Suppressed::None) {
    pending->suppressed = std::string(suppressed_name(why));
    pending->finish();
    return;
  }
  // One flight recorder: another process's trigger while a capture is
  // scheduled or running shares that capture (the trace covers both).
  if (scheduled_ || (capture_ && capture_->running())) {
    shared_.push_back(pending);  // filled in when that capture finishes
    return;
  }
  current_ = pending;
  capture_pid_ = pid;
  scheduled_ = true;
  itimerspec its{};
  its.it_value.tv_sec = kSaveAfterMs / 1000;
  its.it_value.tv_nsec = (kSaveAfterMs % 1000) * 1'000'000;
  timerfd_settime(deadline_.get(), 0, &its, nullptr);
}

std::shared_ptr<PendingTrace> TraceKeeper::take(pid_t tid, uint64_t seq) {
  auto it = by_task_.find({tid, seq});
  if (it == by_task_.end()) return nullptr;
  auto p = it->second;
  by_task_.erase(it);
  return p;
}

void TraceKeeper::on_deadline() {
  uint64_t n;
  (void)!read(deadline_.get(), &n, sizeof n);
  if (scheduled_) begin_capture();
}

void TraceKeeper::begin_capture() {
  scheduled_ = false;
  if (!capture_->start(capture_pid_)) {
    current_->error = "trace capture could not start";
    current_->finish();
    current_.reset();
  }
}

void TraceKeeper::on_capture_done() { finish_capture(false); }

void TraceKeeper::finish_capture(bool block) {
  std::optional<CaptureResult> r;
  {
    // The capture adopts its file into the log directory the reporter writes too.
    std::lock_guard lk(reporter_.logs_mutex());
    r = capture_->finish(block);
  }
  if (!r) return;  // still running
  auto fill = [&](PendingTrace& p) {
    if (r->log.ok()) p.paths.push_back(r->log.path);
    p.over_limit = r->log.over_limit;
    p.error = !r->error.empty() ? r->error : r->log.error;
    if (!r->note.empty()) p.note = r->note;
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
  if (r->log.ok()) saved_++;
  log::info("trace saved: %s (%s, %lld ms)", r->log.path.c_str(), r->format.c_str(),
            static_cast<long long>(r->duration_ms));
}

void TraceKeeper::shutdown() {
  if (!capture_) return;
  if (scheduled_) begin_capture();
  if (capture_->running()) finish_capture(true);
  for (auto& [key, p] : by_task_)
    if (!p->done) {
      p->error = "jankbpf stopped before the trace was saved";
      p->finish();
    }
}

}  // namespace jankbpf
