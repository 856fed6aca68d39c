#include "report/report_sink.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include "util/clock.h"
#include "util/log.h"

namespace jankbpf::report {

ReportSink::ReportSink(ReportFiles files, int64_t min_interval_ms)
    : writer_(std::move(files)), min_interval_ms_(min_interval_ms) {}

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
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return true;
}

void ReportSink::emit(const TaskRecord& r) {
  {
    std::lock_guard lk(mu_);
    run_.add(r);
    dirty_ = true;
  }
  cv_.notify_all();
}

void ReportSink::emit(const FrameRecord& r) {
  {
    std::lock_guard lk(mu_);
    run_.add(r);
    dirty_ = true;
  }
  cv_.notify_all();
}

void ReportSink::emit(const FrameBatch& b) {
  std::lock_guard lk(mu_);
  run_.add(b);
}

void ReportSink::emit(const ExitRecord& r) {
  std::lock_guard lk(mu_);
  run_.exits.push_back(r);
}

void ReportSink::emit(const SummaryRecord& r) {
  {
    std::lock_guard lk(mu_);
    run_.summary = r;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  write_now(true);
}

void ReportSink::write_now(bool final) {
  std::lock_guard wl(write_mu_);
  std::string error;
  bool ok;
  {
    // Rendering reads the run: hold it still meanwhile (a render of a
    // thousand janks takes tens of ms; emit() waits that long at most).
    std::lock_guard lk(mu_);
    dirty_ = false;
    if (final) final_written_ = true;
    ok = writer_.write(run_, final, &error);
  }
  if (!ok) log::warn("%s", error.c_str());
}

void ReportSink::run() {
  // A render must not take the CPU from the application being watched.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  uint64_t last_ns = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || dirty_; });
      if (stopping_) return;
      // Throttle: no more than one write per interval.
      uint64_t due = last_ns + static_cast<uint64_t>(min_interval_ms_) * 1'000'000;
      uint64_t now = monotonic_ns();
      if (last_ns && now < due) {
        cv_.wait_for(lk, std::chrono::nanoseconds(due - now), [&] { return stopping_; });
        if (stopping_) return;
      }
    }
    write_now(false);
    last_ns = monotonic_ns();
  }
}

}  // namespace jankbpf::report
