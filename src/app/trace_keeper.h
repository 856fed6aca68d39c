// Trace capture for tasks past the trace bound, on the main loop's thread.
// jankbpf's ftrace instance records either all along (--trace-recorder
// always: a flight recorder, so the trace also holds what led up to a task)
// or only while some watched task is long (on-demand, the default: from a
// task's early mark or threshold crossing until the trace bound has had
// time to pass, so a machine with no long task pays for no trace events).
// When a task passes the bound (and the process's trace quota allows), the
// capture is saved 3 s after the trigger, as the seed times it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "app/reporter.h"
#include "trace/capture.h"
#include "util/fd.h"

namespace jankbpf {

class FtraceInstance;
class TraceCapture;

struct RecorderOptions {
  // false: the instance records from start() on; true: only from
  // want_recording() until hold_ns after the last such call.
  bool on_demand = false;
  uint64_t hold_ns = 0;
};

class TraceKeeper {
 public:
  explicit TraceKeeper(Reporter& reporter, CaptureOptions options = {}, RecorderOptions recorder = {});
  ~TraceKeeper();

  // Creates the instance (removing stale ones). False with *error set;
  // jankbpf then goes on without traces.
  bool start(std::string* error);
  bool active() const { return instance_ != nullptr; }

  // On demand: a watched task is long (its early mark or its crossing), so
  // the recorder records from now until hold_ns after the last such call
  // (and until a scheduled capture is saved). No-op when always on, and
  // for a process whose trace quota is spent (its trigger would be
  // suppressed: nothing to record for).
  void want_recording(pid_t pid, uint64_t proc_start_ns);
  // The same without the quota's say: the recorder was wanted before it
  // was ready, by processes no longer known.
  void want_recording();
  bool recording() const;

  // A task passed the trace bound. Returns nothing; the task's report picks
  // the result up with take().
  // begin_ns: the task's begin (CLOCK_MONOTONIC), to tell whether the
  // recorder was already running then.
  void on_trigger(pid_t pid, pid_t tid, uint64_t seq, uint64_t proc_start_ns, uint64_t begin_ns);
  // The pending trace of a task, if it had one (removes it).
  std::shared_ptr<PendingTrace> take(pid_t tid, uint64_t seq);

  // For the event loop: the save deadline and, while trace-cmd runs, its
  // pidfd. Without a pidfd the deadline timer polls the capture instead.
  int deadline_fd() const { return deadline_.get(); }
  int capture_fd() const;
  void on_deadline();
  void on_capture_done();
  // Saves a capture still scheduled, so no report waits forever; trace-cmd
  // gets at most `budget` (a stop request must end the run within a second).
  // A trigger after this gets no trace (its record says so).
  void shutdown(std::chrono::milliseconds budget);
  // After shutdown: removes the ftrace instance (its rmdir waits on a grace
  // period; the stop runs it beside the detach). The time it took, in ms.
  double remove_instance();

  uint64_t saved() const { return saved_; }
  // Pending traces dropped untaken: their tasks' records never came (lost
  // in a full ring) and the table was at kMaxPending.
  uint64_t evicted() const { return evicted_; }
  static constexpr size_t kMaxPending = 1024;

 private:
  void begin_capture();
  void finish_capture(bool block);
  void arm_deadline(int64_t ms);
  // With no capture scheduled or running, the timer waits for the hold's end.
  void arm_hold();
  void check_hold();
  bool capturing() const;

  Reporter& reporter_;
  CaptureOptions options_;
  RecorderOptions recorder_;
  uint64_t hold_until_ns_ = 0;  // on demand: recording stops at the first idle check past this
  std::unique_ptr<FtraceInstance> instance_;
  std::unique_ptr<TraceCapture> capture_;
  Fd deadline_;
  bool scheduled_ = false;
  pid_t capture_pid_ = 0;
  std::shared_ptr<PendingTrace> current_;  // the trace being saved
  std::vector<std::shared_ptr<PendingTrace>> shared_;  // later triggers sharing it
  struct ByTask {
    std::shared_ptr<PendingTrace> trace;
    uint64_t order;  // trigger count when made: the oldest goes first
  };
  std::map<std::pair<pid_t, uint64_t>, ByTask> by_task_;
  uint64_t triggers_ = 0;
  uint64_t recording_since_ns_ = 0;  // CLOCK_MONOTONIC, when the recorder last began recording
  uint64_t saved_ = 0, evicted_ = 0;
  bool stopped_ = false;
};

}  // namespace jankbpf
