// Monitor: the steps of a start that only read options and write state
// (the ones that wire file descriptors into the loop stay in monitor.cpp),
// and the options' translation into the detector's configuration.
#include <unistd.h>

#include "app/monitor.h"

#include <algorithm>
#include "proc/process_info.h"
#include "util/log.h"
#include "version.h"

namespace jankbpf {

bool Monitor::check_targets() {
  for (pid_t pid : opts_.pids) {
    if (!process_exists(pid)) {
      log::error("--pid %d: no such process", pid);
      return false;
    }
  }
  return true;
}

bool Monitor::start_report() {
  report::ReportFiles files;
  files.html = opts_.report_html;
  files.perfetto = opts_.perfetto_path;
  files.folded = opts_.folded_path;
  files.folded_by = opts_.folded_by_jank ? report::FoldedBy::Jank : report::FoldedBy::Process;
  if (!files.any()) return true;
  report_ = std::make_unique<report::ReportSink>(files);
  std::string error;
  if (!report_->start(&error)) {
    log::error("%s", error.c_str());
    report_.reset();
    return false;
  }
  sinks_.add(*report_);
  return true;
}

DetectorConfig detector_config(const Options& opts) {
  DetectorConfig cfg;
  cfg.threshold_ns = uint64_t{opts.threshold_ms} * 1'000'000;
  cfg.hang_ns = uint64_t{opts.hang_ms} * 1'000'000;
  cfg.ignore_startup_ns = uint64_t(opts.jank.ignore_startup_time_s) * 1'000'000'000;
  if (opts.jank.stacks_enabled()) {
    // Beyond the seed: stacks from a third of the threshold on, so the
    // start of a long task is sampled too (kept only if it crosses), for
    // as long as the seed samples after the crossing.
    cfg.early_ns = cfg.threshold_ns / 3;
    cfg.sample_period_ns = uint64_t{opts.sample_period_ms} * 1'000'000;
    cfg.sample_window_ns = cfg.threshold_ns +
                           uint64_t(opts.jank.sample_count) * opts.jank.sample_interval_ms * 1'000'000;
    cfg.offcpu = true;
    cfg.offcpu_rate = opts.offcpu_rate;
  }
  if (opts.jank.trace_enabled()) cfg.trace_ns = uint64_t{opts.trace_threshold_ms} * 1'000'000;
  cfg.record_rate = opts.record_rate;
  cfg.record_rate_uid = opts.record_rate_uid;
  cfg.all_threads = opts.threads == ThreadScope::All;
  cfg.filter_pids = !opts.pids.empty() || !opts.command.empty();
  cfg.comm = opts.comm;
  cfg.loop_threads = !cfg.all_threads && (cfg.filter_pids || !cfg.comm.empty());
  cfg.self_tgid = getpid();
  cfg.watchdog = opts.watchdog;
  cfg.hooks = opts.hooks;
  cfg.markers = !opts.markers.empty();
  cfg.kernel_locks = opts.kernel_locks;
  cfg.frames = opts.frames;
  if (opts.frame_interval_ms > 0) cfg.frame_interval_ns = static_cast<uint64_t>(opts.frame_interval_ms * 1e6);
  // A few stacks of a frame a refresh late: a quarter of the refresh, at
  // most --sample-period, at least 1 ms.
  cfg.frame_sample_period_ns = std::clamp<uint64_t>(cfg.frame_interval_ns / 4, 1'000'000,
                                                    uint64_t{opts.sample_period_ms} * 1'000'000);
  return cfg;
}

// The line scripts and benchmarks wait for: everything is in place now.
void Monitor::announce_attached() {
  const char* scope = opts_.threads == ThreadScope::All ? "all threads" : "main threads";
  std::string what = !opts_.pids.empty()    ? std::to_string(opts_.pids.size()) + " process(es)"
                     : !opts_.comm.empty()  ? "processes named '" + opts_.comm + "'"
                     : !opts_.command.empty() ? "the command"
                                              : "every process";
  std::string marks;
  if (!markers_.empty())
    marks = "; " + std::to_string(markers_.markers().size()) + " marker(s) at " +
            std::to_string(detector_->marker_links().live()) + " probe site(s)";
  log::status("attached: %d BPF programs, watchdog=%s, waits by %ss; watching %s of %s, threshold %u ms%s",
              detector_->programs_attached(), detector_->watchdog_name(), detector_->hooks_name(), scope, what.c_str(),
              opts_.threshold_ms, marks.c_str());
}

bool Monitor::start_metrics() {
  if (!opts_.metrics) return true;
  metrics_ = std::make_unique<MetricsOutput>(MetricsOutput::kDefaultMaxLabelSets, JANKBPF_VERSION);
  std::string error;
  metrics_server_ = MetricsServer::start(*opts_.metrics, [m = metrics_.get()] { return m->render(); }, &error);
  if (!metrics_server_) {
    log::error("%s", error.c_str());
    return false;
  }
  sinks_.add(*metrics_);
  // A port someone else holds (any local user can bind one first) must not
  // turn detection off: the records still go out, the server retries.
  if (!error.empty())
    log::error("%s: no metrics until it can be bound (retried every %d s); detection runs on", error.c_str(),
               HttpLimits{}.bind_retry_ms / 1000);
  else
    log::status("metrics: http://%s/metrics", metrics_server_->bound().c_str());
  return true;
}

}  // namespace jankbpf
