// How often one process may leave logs, after the seed: stack reports once
// per process by default, up to report_times_per_app (1..3) per day, per
// hour with --dev (the seed's Developer Options); traces once per process
// per day. Beyond the seed, one freeze must not fan out into many reports:
// the same stack fingerprint (the heaviest path) in the same process is not
// reported twice within the dedupe window.
//
// Windows slide: a report is allowed when fewer than the allowed number
// were taken in the last window. No calendar days, so no time zones and no
// burst at midnight. Time is a parameter (milliseconds on any clock that
// never goes back, CLOCK_MONOTONIC in jankbpf), so tests are exact.
//
// A process is its pid plus its start time, so a recycled pid starts with a
// fresh quota. A jank past a quota is still reported as a jank record, just
// without new logs; the reason names which rule held it back.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/suppressed.h"

namespace jankbpf {


struct QuotaPolicy {
  static constexpr int64_t kHourMs = 3600LL * 1000;
  static constexpr int64_t kDayMs = 24 * kHourMs;

  int stack_reports = 1;  // report_times_per_app
  bool dev = false;       // --dev: stack windows are an hour
  int trace_reports = 1;
  int64_t trace_window_ms = kDayMs;
  // -1: the stack window; 0: no dedupe.
  int64_t dedupe_window_ms = -1;
  // Processes remembered at once; past this, ones with nothing left in any
  // window are dropped first, then the least recently active.
  size_t max_processes = 4096;

  int64_t stack_window_ms() const { return dev ? kHourMs : kDayMs; }
  int64_t dedupe_ms() const { return dedupe_window_ms < 0 ? stack_window_ms() : dedupe_window_ms; }
};

struct ProcessKey {
  pid_t pid = 0;
  uint64_t start = 0;  // process start time in any fixed unit (e.g. ns or jiffies)
};

// Thread-safe: each public call holds the quota's own lock.
class ReportQuota {
 public:
  struct Counts {
    uint64_t stack_reports = 0;
    uint64_t trace_reports = 0;
    uint64_t stack_quota = 0;
    uint64_t trace_quota = 0;
    uint64_t duplicate_stack = 0;
    uint64_t evicted = 0;  // processes forgotten inside a window: over max_processes
  };

  explicit ReportQuota(QuotaPolicy policy = {});

  // Whether a stack report could be taken now, before the fingerprint is
  // known (e.g. to skip sampling). Counts and records nothing.
  Suppressed peek_stack(const ProcessKey& proc, int64_t now_ms) const;
  // Decides a stack report; when allowed it is recorded against the quota.
  // An empty fingerprint (no stack could be had) is never a duplicate.
  Suppressed take_stack(const ProcessKey& proc, std::string_view fingerprint, int64_t now_ms);

  Suppressed peek_trace(const ProcessKey& proc, int64_t now_ms) const;
  Suppressed take_trace(const ProcessKey& proc, int64_t now_ms);
  // A stack report taken at now_ms whose log could not be written (full or
  // read-only disk): it spends no quota and marks no duplicate, so the
  // process's next jank tries again.
  void give_back_stack(const ProcessKey& proc, std::string_view fingerprint, int64_t taken_ms);

  // The process exited: its entry can go (its pid may come back as
  // another process, which the start time would tell apart anyway).
  void forget(pid_t pid);

  Counts counts() const {
    std::lock_guard lk(mu_);
    return counts_;
  }
  size_t tracked() const {
    std::lock_guard lk(mu_);
    return procs_.size();
  }
  const QuotaPolicy& policy() const { return policy_; }

 private:
  mutable std::mutex mu_;  // every member below: the reporter and the trace keeper share one quota
  struct Proc {
    uint64_t start = 0;
    int64_t last_ms = 0;
    std::vector<int64_t> stacks;  // times of stack reports taken
    std::vector<int64_t> traces;  // times of traces taken
    std::vector<std::pair<uint64_t, int64_t>> fingerprints;  // hash, time
  };

  const Proc* find(const ProcessKey& proc) const;
  Proc& get(const ProcessKey& proc, int64_t now_ms);
  void prune(Proc& p, int64_t now_ms) const;
  void bound_size(int64_t now_ms);
  static int in_window(const std::vector<int64_t>& times, int64_t window, int64_t now_ms);

  QuotaPolicy policy_;
  std::unordered_map<pid_t, Proc> procs_;
  Counts counts_;
};

}  // namespace jankbpf
