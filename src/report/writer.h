// Renders a run into the files the user asked for (--report, --perfetto,
// --folded, or `jankbpf report`) and replaces each atomically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/folded.h"
#include "report/run.h"
#include "report/sched_trace.h"

namespace jankbpf::report {

struct ReportFiles {
  std::string html, perfetto, folded;
  FoldedBy folded_by = FoldedBy::Process;
  bool any() const { return !html.empty() || !perfetto.empty() || !folded.empty(); }
};

class ReportWriter {
 public:
  explicit ReportWriter(ReportFiles files) : files_(std::move(files)) {}
  // Before a run: every path can be written (directory exists, no symlink).
  bool check(std::string* error) const;
  // Writes every file. False with *error naming the first that failed (the
  // others are still written).
  bool write(const Run& run, bool final, std::string* error);
  const ReportFiles& files() const { return files_; }

 private:
  std::vector<SchedEvent> sched_events(const Run& run);
  ReportFiles files_;
  // Converted traces by path, with the window converted: trace-cmd runs
  // again only when a trace's window grows. Only the traces of the last
  // write are kept.
  struct Converted {
    uint64_t from_ns = 0, to_ns = 0;
    std::vector<SchedEvent> events;
  };
  std::map<std::string, Converted> sched_cache_;
  unsigned warned_traces_ = 0, warned_budget_ = 0;  // said once per writer, not per rewrite

 public:
  // What converting traces may cost one write: the records name the
  // traces, so their number, trace-cmd's time and the events kept are bounded.
  static constexpr size_t kMaxTraces = 64;              // the latest ones
  static constexpr int kConvertBudgetMs = 30000;        // trace-cmd time per write
  static constexpr size_t kMaxSchedEvents = 2u << 20;   // over all traces
};

}  // namespace jankbpf::report
