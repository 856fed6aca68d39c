// The live sink behind --report, --perfetto and --folded: keeps the run's
// records and rewrites the files as janks arrive -- at most once a second
// (less often when a render takes longer), from a thread of its own so
// neither the ring-buffer reader nor the reporter waits for a render -- and
// once more, final, at the summary.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "output/output.h"
#include "report/run.h"
#include "report/writer.h"

namespace jankbpf::report {

class ReportSink final : public Output {
 public:
  explicit ReportSink(ReportFiles files, int64_t min_interval_ms = 1000);
  ~ReportSink() override;
  ReportSink(const ReportSink&) = delete;
  ReportSink& operator=(const ReportSink&) = delete;

  // Writes the files once (empty) so they exist from the start; false with
  // *error when one cannot be written.
  bool start(std::string* error);
  // Each takes the lock for a copy into the pending queue (bounded by
  // Run::kMaxTasks / kMaxExits over the run), never for a render.
  void emit(const TaskRecord& r) override;
  void emit(const ExitRecord& r) override;
  void emit(const SummaryRecord& r) override;  // the final write, before it returns
  void emit(const FrameRecord& r) override;    // a janky frame: a rewrite is due
  void emit(const FrameBatch& b) override;     // every frame: kept for the final write and the next

  // What the run holds now (tests: after the summary).
  size_t held_tasks() {
    std::lock_guard wl(write_mu_);
    return run_.tasks.size();
  }
  size_t held_exits() {
    std::lock_guard wl(write_mu_);
    return run_.exits.size();
  }
  size_t held_frames() {
    std::lock_guard wl(write_mu_);
    return run_.frames.size();
  }
  uint64_t dropped_frames() {
    std::lock_guard wl(write_mu_);
    return run_.frames_dropped;
  }

  // The next rewrite waits at least this many render times: rendering (at
  // nice 10) takes at most 1/kRenderShare of the writer thread's time.
  static constexpr int kRenderShare = 4;

 private:
  void run();
  void write_now(bool final);

  const int64_t min_interval_ms_;
  std::mutex mu_;  // what emit() touches: the pending records and the flags
  std::condition_variable cv_;
  // Records wait here for the writer thread, which alone touches run_: a
  // render reads run_ with no lock emit() takes (it once read run_.frames
  // while emit() pushed to them, and crashed).
  std::vector<TaskRecord> pending_tasks_;
  std::vector<ExitRecord> pending_exits_;
  std::vector<FrameRecord> pending_janky_frames_;
  std::deque<FrameTiming> pending_frames_;  // the newest Run::kMaxFrames
  std::map<pid_t, std::string> pending_frame_procs_;
  size_t tasks_accepted_ = 0, exits_accepted_ = 0, janky_frames_accepted_ = 0;
  uint64_t tasks_dropped_ = 0, exits_dropped_ = 0, pending_frames_dropped_ = 0;
  std::optional<SummaryRecord> summary_;
  bool dirty_ = false, stopping_ = false;

  std::mutex write_mu_;  // one render at a time; the run and the writer are the writer's own
  ReportWriter writer_;
  Run run_;
  uint64_t last_render_ns_ = 0;
  std::thread thread_;
};

}  // namespace jankbpf::report
