// Prometheus metrics from the records: an Output sink (it sees every task,
// exit and summary record on the reporter thread) that keeps counters per
// label set and renders the text exposition format for the HTTP server.
//
// Labels are comm (the process name), exe and container_id -- never pid: a
// pid is a new series for every process, which a fleet's Prometheus cannot
// keep. Label sets are capped; records of sets past the cap are counted in
// one series labelled "other", and jankbpf_label_sets_dropped_total says
// how many records went there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "output/output.h"

namespace jankbpf {

// Live counters read at scrape time (from the BPF maps), not from records.
struct MetricsLive {
  uint64_t lost_events = 0;    // ring-buffer reservations that failed
  uint64_t tasks_checked = 0;  // every task that ended on a watched thread
  uint64_t records_dropped = 0;  // records the reporter dropped: its queue over its bound
  uint64_t records_rate_limited = 0;  // records --record-rate(-uid) did not send (counted in the kernel)
};

class MetricsOutput final : public Output {
 public:
  static constexpr size_t kDefaultMaxLabelSets = 500;
  // Histogram bounds of jankbpf_jank_duration_seconds (upper, inclusive).
  static const std::vector<double>& buckets();

  explicit MetricsOutput(size_t max_label_sets = kDefaultMaxLabelSets, std::string version = "");
  void set_live(std::function<MetricsLive()> live);

  void emit(const TaskRecord& r) override;
  void emit(const ExitRecord&) override {}
  void emit(const SummaryRecord& r) override;

  // The text exposition format (version 0.0.4), every family with HELP and TYPE.
  std::string render();

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // comm, exe, container_id
  struct Series {
    uint64_t janks = 0, hangs = 0;
    uint64_t rate_limited = 0;  // its records --record-rate(-uid) did not send, as its records said
    double blocked_s = 0;
    std::vector<uint64_t> bucket_counts;  // per bound, not cumulative
    uint64_t count = 0;
    double sum_s = 0;
  };
  Series& series_for(const TaskRecord& r);

  const size_t max_label_sets_;
  const std::string version_;
  std::mutex mu_;  // records come on the reporter thread, scrapes on the server's
  std::map<Key, Series> series_;
  uint64_t dropped_ = 0;
  std::function<MetricsLive()> live_;
  MetricsLive final_;  // from the summary record, once the BPF side is gone
  bool have_final_ = false;
};

}  // namespace jankbpf
