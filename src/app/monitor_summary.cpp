// Monitor: the summary record written once at exit, from the kernel's
// counters, the reporter's and the process's own resource use.
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>

#include "app/monitor.h"
#include "proc/process_info.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/self_status.h"

namespace jankbpf {

namespace {

// This process's own peak RSS, kB: VmHWM of its memory map. Not
// getrusage's ru_maxrss, which exec carries over from the process it
// replaced (a 300 MB parent made a 23 MB jankbpf report 315 MB). 0 when
// /proc is not there.
long own_peak_rss_kb() { return std::strtol(self_status("VmHWM").c_str(), nullptr, 10); }

}  // namespace

void Monitor::emit_summary() {
  SummaryRecord s;
  s.time_ms = clock_.now_ms();
  s.elapsed_s = static_cast<double>((stopped_ns_ ? stopped_ns_ : monotonic_ns()) - started_ns_) / 1e9;
  auto ks = detector_->kernel_stats();
  s.kernel = ks;
  s.janks = janks_;
  s.hangs = hangs_;
  s.exits = exits_;
  s.samples_lost = sampler_.lost();
  s.unsampled_tasks = unsampled_tasks_;
  auto rs = reporter_->stats();
  s.samples_dropped = rs.dropped;
  s.stack_logs = rs.stack_logs;
  s.suppressed = rs.suppressed;
  s.failed_jobs = rs.failed_jobs;
  s.records_dropped = rs.records_dropped;
  s.stacks_evicted = rs.evicted_threads;
  s.evictions.processes = rs.process_evictions;
  s.evictions.modules = rs.module_evictions;
  s.evictions.symbol_memos = rs.memo_resets;
  s.evictions.stack_threads = rs.evicted_threads;
  s.evictions.quota_processes = rs.quota_evictions;
  s.evictions.pending_traces = traces_ ? traces_->evicted() : 0;
  s.runtime_frames_read = rs.runtime_frames_read;
  s.runtime_frames_unreadable = rs.runtime_frames_unreadable;
  frames_summary(s);
  s.budgets = rs.budgets;
  // --record-rate(-uid): the processes and uids whose records were not
  // sent, most first (processes that exited were forgotten with their count
  // on their exit record).
  auto top = [&](bool by_uid) {
    std::vector<RateLimited> out;
    for (auto [id, n] : detector_->records_rate_limited_all(by_uid)) {
      RateLimited r{id, by_uid ? "" : read_comm(static_cast<pid_t>(id)), n};
      out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
    if (out.size() > 20) out.resize(20);
    return out;
  };
  s.budgets.rate_limited_processes = top(false);
  s.budgets.rate_limited_uids = top(true);
  s.traces = traces_ ? traces_->saved() : 0;
  s.watchdog = detector_->watchdog_name();
  s.state_storage = detector_->state_storage();
  s.hooks = detector_->hooks_name();
  s.features_missing = features_.missing();
  s.marker_sites = detector_->marker_links().attached();
  s.marker_sites_released = detector_->marker_links().released();
  s.marker_files_capped = markers_.files().capped_count();
  s.marker_files_refused = markers_.files().refused_count();
  for (auto& p : detector_->program_stats()) s.bpf.push_back({p.name, p.run_cnt, p.run_time_ns, p.recursion_misses});
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
  s.cpu_sys_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
  s.max_rss_kb = own_peak_rss_kb();
  if (s.max_rss_kb <= 0) s.max_rss_kb = ru.ru_maxrss;  // no /proc: the rusage figure, an upper bound
  sinks_.emit(s);
  drop_notices_.check(ks);  // a loss first counted since the last look
  if (ks.ringbuf_drops) log::warn("%llu events lost (the events ring was full)", (unsigned long long)ks.ringbuf_drops);
  if (malformed_) log::warn("%llu malformed records ignored", (unsigned long long)malformed_);
  if (out_->stalled_lines())
    log::warn("%llu records were not written: the output's reader stopped reading",
              (unsigned long long)out_->stalled_lines());
  if (uint64_t other = out_->write_errors() - out_->stalled_lines())
    log::warn("%llu records could not be written", (unsigned long long)other);
}

}  // namespace jankbpf
