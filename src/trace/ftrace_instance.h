// jankbpf's trace recorder: a named ftrace instance, instances/jankbpf-PID,
// that keeps the last few seconds of scheduler, interrupt, block and memory
// pressure events in an overwriting ring buffer, recording all along (a
// flight recorder: a trace saved when a task passes 450 ms also shows what
// led up to it) or only while set_recording(true) says so.
//
// Only our own instance is ever written to. The top-level instance and
// other tools' instances are left alone; stale jankbpf-PID instances whose
// owner is gone (or whose pid now belongs to something that is not a
// jankbpf started after the instance was made) are removed at start.
//
// trace_clock is "mono", so timestamps are CLOCK_MONOTONIC like jankbpf's.
// The buffer is bounded per CPU and in total (many-CPU machines would
// otherwise pin a lot of kernel memory). Events missing on this kernel are
// skipped and listed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace jankbpf {

struct FtraceOptions {
  std::string tracefs_root;           // empty: tracefs::root(), mounting if needed
  std::string name;                   // empty: "jankbpf-<getpid()>"
  unsigned buffer_kb_per_cpu = 4096;  // wanted size per CPU
  unsigned buffer_kb_total = 64 * 1024;  // cap over all CPUs
  std::vector<std::string> events;    // "system/event"; empty: default_events()
  // Whether the buffer records from create() on; false: the events are set
  // up but tracing_on stays 0 until set_recording(true).
  bool record_at_start = true;
};

class FtraceInstance {
 public:
  // Events that explain a stall: who ran instead (sched_switch, wakeups,
  // migrations), process life cycle, interrupts and softirqs stealing the
  // CPU, block I/O, direct reclaim and compaction, dirty-page throttling,
  // OOM kills, signals, CPU frequency and the D-state blocker.
  static const std::vector<std::string>& default_events();

  explicit FtraceInstance(FtraceOptions options = {});
  ~FtraceInstance();  // remove()
  FtraceInstance(const FtraceInstance&) = delete;
  FtraceInstance& operator=(const FtraceInstance&) = delete;

  // Removes stale jankbpf instances, creates ours, configures and arms it.
  // False with `error` set when tracefs or the instance cannot be had.
  bool create(std::string& error);

  // (Re)applies the configuration and tracing_on as set_recording last
  // asked. trace-cmd extract disables the events of the buffer it reads, so
  // this follows a capture.
  bool arm(std::string& error);
  // tracing_on=0: freezes the buffer so a capture ends when it was asked to,
  // until arm().
  bool pause();
  // Whether the buffer should record (tracing_on). While paused for a
  // capture only the wish is kept; arm() applies it.
  bool set_recording(bool on);
  bool recording() const { return recording_; }

  // tracing_on=0, events off, rmdir. Idempotent; the destructor calls it.
  // Retries briefly while the instance is busy (a reader still has a file
  // open). False with last_error() when the directory stays.
  bool remove();

  bool active() const { return active_; }
  const std::string& name() const { return name_; }
  const std::string& root() const { return root_; }
  const std::string& path() const { return path_; }  // root/instances/name
  unsigned buffer_kb_per_cpu() const { return buffer_kb_; }
  const std::vector<std::string>& enabled_events() const { return enabled_; }
  const std::vector<std::string>& missing_events() const { return missing_; }
  const std::string& last_error() const { return last_error_; }

  // Removes jankbpf-PID instances under root/instances whose PID is not a
  // live jankbpf that started before the instance was made. Returns the
  // names removed. `keep` is never touched (our own).
  static std::vector<std::string> remove_stale(const std::string& root, const std::string& keep = "");

  // Whether `name` (jankbpf-PID) belongs to a live jankbpf (see above).
  static bool owner_alive(const std::string& root, const std::string& name);

 private:
  bool configure(std::string& error);

  FtraceOptions options_;
  std::string root_, name_, path_;
  unsigned buffer_kb_ = 0;
  std::vector<std::string> enabled_, missing_;
  std::string last_error_;
  bool active_ = false;
  bool recording_ = true;  // tracing_on wanted
  bool paused_ = false;    // frozen for a capture
};

}  // namespace jankbpf
