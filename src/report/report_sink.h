// The live sink behind --report, --perfetto and --folded: keeps the run's
// records and rewrites the files as janks arrive -- at most once a second,
// from a thread of its own so neither the ring-buffer reader nor the
// reporter waits for a render -- and once more, final, at the summary.
#pragma once

#include <condition_variable>
#include <mutex>
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
  void emit(const TaskRecord& r) override;
  void emit(const ExitRecord& r) override;
  void emit(const SummaryRecord& r) override;  // the final write, before it returns
  void emit(const FrameRecord& r) override;    // a janky frame: a rewrite is due
  void emit(const FrameBatch& b) override;     // every frame: kept for the final write and the next

 private:
  void run();
  void write_now(bool final);

  ReportWriter writer_;
  const int64_t min_interval_ms_;
  std::mutex mu_;           // run_, dirty_, stopping_
  std::mutex write_mu_;     // one render at a time
  std::condition_variable cv_;
  Run run_;
  bool dirty_ = false, stopping_ = false, final_written_ = false;
  std::thread thread_;
};

}  // namespace jankbpf::report
