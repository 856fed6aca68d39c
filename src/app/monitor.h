// One jankbpf run: attach, watch, report, detach. main() builds it from
// the options and returns what run() returns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "app/irq_text_loader.h"
#include "app/jvm_targets.h"
#include "app/launcher.h"
#include "app/record_builder.h"
#include "app/reporter.h"
#include "app/trace_keeper.h"
#include "bpf/detector.h"
#include "cause/evidence.h"
#include "cause/identity.h"
#include "cli/options.h"
#include "frame/frame_sampler.h"
#include "frame/frame_tracker.h"
#include "markers/markers.h"
#include "metrics/http_server.h"
#include "metrics/metrics_output.h"
#include "output/output.h"
#include "report/report_sink.h"
#include "sampling/perf_sampler.h"
#include "sampling/sampler_coverage.h"
#include "util/clock.h"
#include "util/fd.h"

namespace jankbpf {

// The kernel-side configuration the options ask for (shared with --check).
DetectorConfig detector_config(const Options& opts);

class Monitor {
 public:
  static constexpr uint64_t kTagMarkerUser = 9ULL << 40;  // epoll tag | a marker user's pidfd
  static constexpr uint64_t kTagJvmProbe = 14ULL << 40;   // the JVM look's timer (app/jvm_targets.h)
  // Frames (app/monitor_frames.cpp): the frames ring, its drain timer, a
  // frame sampler's fd.
  static constexpr uint64_t kTagFrames = 11ULL << 40, kTagFramesTick = 12ULL << 40, kTagFrameSample = 13ULL << 40;
  Monitor(Options opts, std::unique_ptr<JsonLinesOutput> out);
  ~Monitor();
  // Runs until a signal, --duration, the targets' exit or the command's
  // exit. Returns the process exit status.
  int run();

 private:
  bool check_targets();
  bool start_report();
  bool setup_loop();
  bool start_detector();
  bool attach_markers();
  bool attach_marker(const ProbeAttachment& a, std::string* error, uint64_t* link = nullptr);
  void on_tracked(pid_t pid, pid_t tid, uint64_t proc_start_ns);
  void watch_marker_user(pid_t pid, Fd pidfd);
  void on_marker_user_gone(int pidfd);
  bool start_metrics();
  bool start_stacks();
  // The trace recorder, set up on a thread of its own (its tracefs writes
  // wait on RCU grace periods, longer than the BPF load): begun before the
  // load, and finished when that thread says so through trace_ready_, or
  // at once by await_traces() when a trace is wanted or the run ends first.
  void begin_traces();
  void await_traces();
  void want_trace_recording(pid_t pid, uint64_t proc_start_ns);
  void finish_traces();
  void announce_attached();
  void loop();
  void on_record(std::span<const uint8_t> rec);
  void on_task(const jb_task_event& e);
  void keep_sampling(bool on);
  // A task's running time its sampling window had the clocks off (beyond
  // one period), counted and said once on stderr; 0 when sampled throughout.
  double unsampled_ms(const jb_task_event& e, const TaskRecord& rec);
  // Every perf sample waiting in the rings to the reporter.
  void drain_samples();
  // Announce each sample of pid at once (a Python process) or not.
  void set_eager(pid_t pid, bool on);
  void on_lease();
  void on_target_gone(pid_t pid);
  void start_jvm_probe();  // app/jvm_targets.cpp
  void probe_jvms();
  void emit_summary();
  void stop() { running_ = false; }
  // Frames of Wayland clients (issue 28): app/monitor_frames.cpp.
  bool start_frames();
  void on_frame_event(const jb_frame_event& e);
  void on_frames_epoll(uint64_t tag);
  void frames_tick(bool final);
  void frames_summary(SummaryRecord& s);

  Options opts_;
  FeatureSet features_;  // what this kernel gave us; missing ones go in the summary
  std::unique_ptr<JsonLinesOutput> out_;
  TeeOutput sinks_;                // every renderer of records: JSON lines first
  std::unique_ptr<report::ReportSink> report_;  // --report, --perfetto, --folded  // names runtime markers' tasks from their stacks
  EpochClock clock_;
  MarkerTable markers_;
  std::set<std::pair<pid_t, uint64_t>> tracked_;  // processes whose maps were looked at
  std::map<int, std::pair<pid_t, Fd>> marker_users_;  // pidfd -> process using planned marker files
  uint32_t marker_attach_delay_ms_ = 0;  // tests only: JANKBPF_TEST_MARKER_ATTACH_DELAY_MS
  RecordBuilder builder_{clock_, markers_};
  cause::EvidenceStore causes_;  // JB_EV_CAUSE / JB_EV_SUBJECT until their task's record
  cause::ProcIdentities live_ids_;  // their prefetch, on this thread
  IrqTextLoader irq_text_;  // causes: kallsyms' interrupt text, beside the load
  std::unique_ptr<Detector> detector_;
  std::unique_ptr<Reporter> reporter_;
  std::unique_ptr<TraceKeeper> traces_;
  std::thread trace_setup_;  // touches only traces_ until await_traces() joins it
  Fd trace_ready_;           // eventfd: the setup thread is done
  bool traces_ok_ = false;
  bool trace_wanted_ = false;  // a task got long before the recorder was ready
  std::string traces_error_;
  PerfSampler sampler_;
  bool sampling_ = false;   // stacks configured
  SamplerCoverage sampler_on_;  // when the clocks were on
  uint64_t unsampled_tasks_ = 0;
  std::unordered_set<pid_t> eager_;  // in the kernel's eager_pids
  Fd lease_;                // while sampling is on: checks whether it is still needed
  int capture_fd_ = -1;     // trace-cmd's pidfd while a capture runs
  Launcher launcher_;
  std::optional<int> command_status_;

  Fd epoll_, signals_, deadline_;
  std::unique_ptr<JvmTargets> jvms_;  // named targets not yet looked at enough
  Fd jvm_timer_;
  std::set<pid_t> live_targets_;  // --pid targets and the command, until they exit
  std::map<int, pid_t> pidfds_;   // pidfd -> pid
  std::vector<Fd> pidfd_owners_;
  bool running_ = true;
  bool asked_to_stop_ = false;  // a signal or --duration, not the targets' end
  uint64_t started_ns_ = 0;
  uint64_t stopped_ns_ = 0;  // when the stop began (the summary's elapsed_s ends there)

  // Counted for the summary.
  uint64_t janks_ = 0, hangs_ = 0, exits_ = 0, malformed_ = 0;
  // --record-rate(-uid): each process's refused records as last reported
  // (a record carries the ones since its process's previous record).
  std::unordered_map<pid_t, uint64_t> rate_limited_seen_;
  uint64_t rate_limited_since(pid_t pid, bool exited);
  DropNotices drop_notices_;        // the first loss of each kind, on stderr
  uint64_t drops_checked_ns_ = 0;   // last look at the kernel's loss counters

  // Frames: the tracker, the per-thread sampler, the ring's drain timer
  // (armed while frame events flow), who each process is.
  std::unique_ptr<frame::FrameTracker> frames_;
  std::unique_ptr<frame::FrameSampler> frame_sampler_;
  Fd frames_timer_;
  bool frames_polled_ = false;
  uint64_t frames_last_event_ns_ = 0;
  struct FrameProcess {
    FrameBatch::Process label;
    ExeFile exe;
    uint32_t uid = 0;
    std::string cgroup;
    bool gone = false;
  };
  std::map<pid_t, FrameProcess> frame_procs_;
  ExeCache frame_exes_;

  // --metrics: last, so the server (which reads the detector's counters)
  // stops before anything it reads is destroyed.
  std::unique_ptr<MetricsOutput> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
};

}  // namespace jankbpf
