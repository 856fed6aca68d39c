// Saving the flight recorder: freeze jankbpf's ftrace instance, write its
// buffer as a trace-cmd .dat into a private temp dir, adopt that into the
// log dir (counted against the cap), clean up, re-arm the instance.
//
// Why trace-cmd runs in a private mount namespace: `trace-cmd extract -B
// INSTANCE` (checked with 3.1.6) also reads and resets the TOP-LEVEL
// instance on its way out (tracing_on, events/enable, every events/*/filter,
// the top buffer, current_tracer), drains the top buffer through
// trace_pipe_raw, removes the instance it extracted, and toggles
// /proc/sys/kernel/kptr_restrict. jankbpf must never touch anyone else's
// tracing, so trace-cmd instead gets a mount namespace of its own in which,
// at every tracefs mount, the top-level files are our instance's (bind
// mounts), instances/ is an empty read-only tmpfs, the rest of tracefs is
// read-only, and so is /proc/sys. Plain `trace-cmd extract` there reads our
// instance as if it were the top level, and its resets land on our instance
// (re-armed afterwards) or fail harmlessly. If the namespace cannot be set
// up (no CAP_SYS_ADMIN, a locked-down container) trace-cmd is not run at
// all and the text trace is saved instead.
//
// Where trace-cmd is missing (or fails) the instance's text `trace` file is
// saved as trace-PID-TIMESTAMP.txt (it opens in the Perfetto UI), and the
// result says so: format "text" and a note.
//
// A capture can run in the background: start() returns at once, wait_fd()
// becomes readable when trace-cmd exits (add it to the event loop), then
// finish(). trace-cmd extract takes about 0.2 s here; the instance is
// paused meanwhile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "logs/log_dir.h"
#include "trace/spawn.h"

namespace jankbpf {

class FtraceInstance;

struct CaptureOptions {
  std::string trace_cmd;      // empty: looked up in fixed system dirs
  std::string temp_base = "/tmp";
  int timeout_ms = 30000;     // trace-cmd is killed past this
  bool use_trace_cmd = true;  // false: always the text trace
  // The text trace keeps its newest lines up to this size (a whole ring
  // buffer as text runs to tens of MB; the seed's traces are 1-5 MB).
  size_t text_max_bytes = 4u << 20;
};

struct CaptureResult {
  bool ok() const { return log.ok(); }
  std::string format;       // "dat" or "text"; empty when nothing was saved
  LogWrite log;             // path, bytes, over_limit, aged, I/O error
  std::string error;        // why nothing was saved (capture side)
  std::string note;         // why the text trace instead of a .dat, if so
  std::string tool_output;  // trace-cmd's stdout+stderr, at most 4 KB
  int64_t duration_ms = 0;  // from start() to the end of finish()
  bool rearmed = false;     // the instance records again
};

class TraceCapture {
 public:
  TraceCapture(FtraceInstance& instance, LogDir& logs, CaptureOptions options = {});
  ~TraceCapture();  // a capture still running is killed and cleaned up
  TraceCapture(const TraceCapture&) = delete;
  TraceCapture& operator=(const TraceCapture&) = delete;

  // Begins saving the trace for process `pid` (the name of the log file).
  // Pauses the instance. False when a capture is already running.
  bool start(pid_t pid);
  bool running() const { return started_; }
  // trace-cmd was started for this capture and has not been reaped yet.
  bool tool_running() const { return tool_running_; }
  // Readable when the tool has exited; -1 when there is nothing to wait for
  // (text capture, or no pidfd): then call finish() right away.
  int wait_fd() const { return child_.wait_fd(); }

  // Completes the capture: with block=false returns nullopt while the tool
  // is still running inside its timeout; with block=true waits (up to the
  // timeout, then kills it). Adopts the file, removes the temp dir and
  // re-arms the instance.
  std::optional<CaptureResult> finish(bool block = true);
  // jankbpf is stopping: trace-cmd gets at most `ms` more, then is killed
  // and the instance's text trace is saved instead.
  void cut_short(int64_t ms);
  // jankbpf is stopping and the instance goes next: finish() neither clears
  // it nor re-arms it (each of those waits on an RCU grace period).
  void set_stopping() { stopping_ = true; }

  // start() + finish(true).
  CaptureResult run(pid_t pid);

  // The trace-cmd binary that would be used, or "" when there is none.
  static std::string find_trace_cmd(const std::string& hint = "");

 private:
  bool spawn_trace_cmd(std::string& why_not);
  void save_text(CaptureResult& r);
  void cleanup_temp();

  FtraceInstance& instance_;
  LogDir& logs_;
  CaptureOptions options_;
  Child child_;
  bool started_ = false;
  bool tool_running_ = false;
  pid_t pid_ = 0;
  int64_t start_ms_ = 0;
  std::string temp_dir_;
  std::string note_;
  bool cut_short_ = false;
  bool stopping_ = false;
  std::string temp_error_;
  Fd output_;
};

}  // namespace jankbpf
