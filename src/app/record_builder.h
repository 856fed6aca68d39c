// Turns kernel events into records: converts clocks, names the wait
// syscall, and adds who the process is from /proc.
#pragma once

#include "jankbpf/events.h"
#include "markers/markers.h"
#include "model/records.h"
#include "proc/process_info.h"
#include "util/clock.h"

namespace jankbpf {

class RecordBuilder {
 public:
  explicit RecordBuilder(const EpochClock& clock) : clock_(clock) {}
  RecordBuilder(const EpochClock& clock, const MarkerTable& markers) : clock_(clock), markers_(&markers) {}

  // JB_EV_TASK_END -> jank, JB_EV_HANG -> hang (JB_EV_CROSSING -> jank-shaped).
  // The process's executable is opened into `exe`; the record's build_id is
  // set only if it is already known (else exe.build_id() reads it later,
  // off this thread).
  TaskRecord task(const jb_task_event& e, ExeFile& exe);
  // The same with the build-id read at once (tests, one-off callers).
  TaskRecord task(const jb_task_event& e);
  ExitRecord exit(const jb_exit_event& e);

 private:
  const EpochClock& clock_;
  const MarkerTable* markers_ = nullptr;
  ExeCache exes_;
};

// A fixed-size kernel string as std::string (stops at NUL or the end).
std::string kernel_string(const char* s, size_t max);

}  // namespace jankbpf
