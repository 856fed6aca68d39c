// Prometheus metrics from the records: an Output sink (it sees every task,
// exit and summary record on the reporter thread) that keeps counters per
// label set and renders the text exposition format for the HTTP server.
//
// Labels are comm (the process name), exe and container_id -- never pid: a
// pid is a new series for every process, which a fleet's Prometheus cannot
// keep. Label values are the watched processes' own bytes: they are made
// valid UTF-8 (U+FFFD for what is not) and cut to a few hundred bytes, so
// one process can neither make a scrape invalid nor make it large.
//
// Label sets are capped. When the table is full, a new set takes the slot
// of (1) the least recently active set of the uid holding the most slots,
// if that uid holds more than its fair share (the cap over the uids
// present) -- so one user's made-up names cannot keep other users' apps
// out -- else (2) the least recently active set of all, if it has had no
// record for idle_before_reuse (names that stopped janking age out). The
// set taken has its counts folded into "other", so sums over the series
// stay monotonic. When neither applies the record is counted under
// "other"; jankbpf_label_sets_dropped_total says how many were.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "jankbpf/events.h"
#include "metrics/frame_metrics.h"
#include "output/output.h"
#include "util/fd.h"

namespace jankbpf {

// Live counters read at scrape time (from the BPF maps), not from records.
struct MetricsLive {
  uint64_t lost_events = 0;    // ring-buffer reservations that failed
  uint64_t tasks_checked = 0;  // every task that ended on a watched thread
  uint64_t records_dropped = 0;  // records the reporter dropped: its queue over its bound
  uint64_t records_rate_limited = 0;  // records --record-rate(-uid) did not send (counted in the kernel)
};

// A label value as the exposition format allows it: valid UTF-8 (invalid
// bytes and control characters other than newline become U+FFFD), at most
// `max_bytes` long ("…" marks a cut: the tail is kept when `keep_tail`, for
// paths, else the head), then backslash, double quote and newline escaped.
std::string prometheus_label_value(std::string_view raw, size_t max_bytes, bool keep_tail = false);

class MetricsOutput final : public Output {
 public:
  static constexpr size_t kDefaultMaxLabelSets = 500;
  static constexpr int64_t kDefaultIdleBeforeReuseMs = 15 * 60 * 1000;
  // Bytes of a label value before escaping. With the cap this bounds a
  // scrape: (500 + 1) sets x 26 lines (the janks counter: 12 cause kinds) x < 1 KiB (see render()).
  static constexpr size_t kMaxComm = 64, kMaxExe = 160, kMaxContainerId = 80;
  // Histogram bounds of jankbpf_jank_duration_seconds (upper, inclusive).
  static const std::vector<double>& buckets();

  // `clock_ms`: a monotonic clock in ms (tests pass their own).
  explicit MetricsOutput(size_t max_label_sets = kDefaultMaxLabelSets, std::string version = "",
                         int64_t idle_before_reuse_ms = kDefaultIdleBeforeReuseMs,
                         std::function<int64_t()> clock_ms = {});
  void set_live(std::function<MetricsLive()> live);

  void emit(const TaskRecord& r) override;
  void emit(const ExitRecord&) override {}
  void emit(const SummaryRecord& r) override;
  void emit(const FrameBatch& b) override;  // every frame (metrics/frame_metrics.h)

  // The text exposition format (version 0.0.4), every family with HELP and
  // TYPE. Renders a copy taken under the lock: emit() waits for the copy
  // (microseconds for 500 sets), never for the rendering.
  std::string render();

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // comm, exe, container_id: escaped
  struct Series {
    uint32_t uid = 0;
    int64_t last_ms = 0;  // the last record's arrival
    uint64_t janks = 0, hangs = 0;
    // Janks by the kind of their largest cause (cause/largest.h): index 0
    // "none", then cause::kKinds[1..]. A fixed list: at most 12 series a set.
    std::array<uint64_t, JB_CAUSE_NR> janks_by_cause{};
    uint64_t rate_limited = 0;  // its records --record-rate(-uid) did not send, as its records said
    double blocked_s = 0;
    std::vector<uint64_t> bucket_counts;  // per bound, not cumulative
    uint64_t count = 0;
    double sum_s = 0;
    void add(const Series& o);
  };
  Series* slot_for(const TaskRecord& r, int64_t now);
  std::map<Key, Series>::iterator victim_for(uint32_t uid, int64_t now);

  const size_t max_label_sets_;
  const std::string version_;
  const int64_t idle_before_reuse_ms_;
  std::function<int64_t()> clock_ms_;
  Fd statm_;  // /proc/self/statm, opened once: a scrape needs no descriptor

  std::mutex mu_;  // records come on the reporter thread, scrapes on the server's
  std::map<Key, Series> series_;
  std::map<uint32_t, size_t> slots_per_uid_;
  Series other_;
  bool have_other_ = false;
  uint64_t dropped_ = 0, evicted_ = 0;
  std::function<MetricsLive()> live_;
  MetricsLive final_;  // from the summary record, once the BPF side is gone
  bool have_final_ = false;
  FrameMetrics frames_{max_label_sets_};
};

}  // namespace jankbpf
