#include "report/report_sink.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>

#include "util/clock.h"
#include "util/log.h"

namespace jankbpf::report {

ReportSink::ReportSink(ReportFiles files, int64_t min_interval_ms)
    : min_interval_ms_(min_interval_ms), writer_(std::move(files)) {}

ReportSink::~ReportSink() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ReportSink::start(std::string* error) {
  if (!writer_.check(error)) return false;
  Run empty;
  if (!writer_.write(empty, false, error)) return false;
  // The thread takes no signals: SIGCHLD of the watched command (and
  // SIGINT/SIGTERM) belong to the main thread's signalfd, and a thread
  // that left them unblocked would swallow them.
  // A fault of its own still reaches the crash report (util/crash.h): a
  // fault while SIGSEGV is blocked kills the process without a word.
  sigset_t all, old;
  sigfillset(&all);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigdelset(&all, sig);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return true;
}

void ReportSink::emit(const TaskRecord& r) {
  {
    std::lock_guard lk(mu_);
    if (tasks_accepted_ >= Run::kMaxTasks) {
      tasks_dropped_++;
      return;
    }
    tasks_accepted_++;
    pending_tasks_.push_back(r);
    dirty_ = true;
  }
  cv_.notify_all();
}

void ReportSink::emit(const FrameRecord& r) {
  {
    std::lock_guard lk(mu_);
    if (janky_frames_accepted_ >= Run::kMaxTasks) return;  // as Run::add(FrameRecord) keeps them
    janky_frames_accepted_++;
    pending_janky_frames_.push_back(r);
    dirty_ = true;
  }
  cv_.notify_all();
}

void ReportSink::emit(const FrameBatch& b) {
  std::lock_guard lk(mu_);
  for (const auto& [pid, p] : b.procs) pending_frame_procs_[pid] = p.comm;
  for (const auto& f : b.frames) {
    if (pending_frames_.size() >= Run::kMaxFrames) {  // the run would let them go too
      pending_frames_.pop_front();
      pending_frames_dropped_++;
    }
    pending_frames_.push_back(f);
  }
}

void ReportSink::emit(const ExitRecord& r) {
  std::lock_guard lk(mu_);
  if (exits_accepted_ >= Run::kMaxExits) {
    exits_dropped_++;
    return;
  }
  exits_accepted_++;
  pending_exits_.push_back(r);
}

void ReportSink::emit(const SummaryRecord& r) {
  {
    std::lock_guard lk(mu_);
    summary_ = r;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  write_now(true);
}

void ReportSink::write_now(bool final) {
  std::lock_guard wl(write_mu_);
  std::vector<TaskRecord> tasks;
  std::vector<ExitRecord> exits;
  std::vector<FrameRecord> janky;
  FrameBatch batch;
  {
    // Only the hand-over happens under the lock emit() takes.
    std::lock_guard lk(mu_);
    tasks.swap(pending_tasks_);
    exits.swap(pending_exits_);
    janky.swap(pending_janky_frames_);
    batch.frames.assign(pending_frames_.begin(), pending_frames_.end());
    pending_frames_.clear();
    for (auto& [pid, comm] : pending_frame_procs_) batch.procs.push_back({pid, {std::move(comm), {}, {}}});
    pending_frame_procs_.clear();
    run_.frames_dropped += pending_frames_dropped_;
    pending_frames_dropped_ = 0;
    dirty_ = false;
    if (summary_) run_.summary = summary_;
    run_.tasks_dropped = tasks_dropped_;
    run_.exits_dropped = exits_dropped_;
  }
  for (auto& t : tasks) run_.add(std::move(t));
  for (auto& e : exits) run_.add(std::move(e));
  for (auto& f : janky) run_.add(std::move(f));
  run_.add(batch);
  const uint64_t t0 = monotonic_ns();
  std::string error;
  bool ok = writer_.write(run_, final, &error);
  last_render_ns_ = monotonic_ns() - t0;
  if (!ok) log::warn("%s", error.c_str());
}

void ReportSink::run() {
  // A render must not take the CPU from the application being watched.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10) != 0)
    log::warn("--report: cannot lower the report writer's priority (nice 10): %s; it renders at the normal one",
              strerror(errno));
  uint64_t last_ns = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || dirty_; });
      if (stopping_) return;
      // Throttle: no more than one write per interval, and no more than
      // one render's worth of time in kRenderShare.
      uint64_t gap = std::max<uint64_t>(static_cast<uint64_t>(min_interval_ms_) * 1'000'000,
                                        kRenderShare * last_render_ns_);
      uint64_t now = monotonic_ns();
      if (last_ns && now < last_ns + gap) {
        cv_.wait_for(lk, std::chrono::nanoseconds(last_ns + gap - now), [&] { return stopping_; });
        if (stopping_) return;
      }
    }
    write_now(false);
    last_ns = monotonic_ns();
  }
}

}  // namespace jankbpf::report
