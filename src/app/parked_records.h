// Records waiting for a trace to be saved. Saving a trace takes seconds
// (trace-cmd extract on a slow machine: 30 s and more), and the reporter
// must not wait for it: the samples queued behind would be unwound after
// their process exited (no maps left: every frame unknown). A task record
// whose trace is still being saved is parked here, and so is every later
// record of the same process (they stay in order); the record is written
// once the trace is done or its wait runs out. Other processes' records go
// on. Worker-thread state: only the reporter thread touches it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "app/pending_trace.h"
#include "model/records.h"

namespace jankbpf {

class ParkedRecords {
 public:
  using Clock = std::chrono::steady_clock;
  using Record = std::variant<TaskRecord, ExitRecord>;
  static constexpr std::chrono::seconds kMaxWait{60};

  // Whether a record of `pid` must queue behind a parked one.
  bool holds(pid_t pid) const;
  // Parks `rec`; with a trace not yet done, `wake` is called (on the thread
  // that finishes the trace) when it is.
  void park(pid_t pid, Record rec, std::shared_ptr<PendingTrace> trace, std::function<void()> wake,
            Clock::time_point now);
  // Records now free to go, in the order parked: each one's trace done or
  // its wait run out (every one with `all`: the run is out of time), and
  // nothing of its process still parked ahead of it.
  std::vector<Record> take_ready(Clock::time_point now, bool all);
  std::optional<Clock::time_point> next_deadline() const;
  bool empty() const { return parked_.empty(); }

 private:
  struct Parked {
    pid_t pid;
    Record rec;
    std::shared_ptr<PendingTrace> trace;  // null: waits only for its process's records ahead
    Clock::time_point deadline;
  };
  std::vector<Parked> parked_;
};

// A task record's trace files, notes and suppression; with a note when the
// trace was not saved in time.
void apply_trace(TaskRecord& rec, PendingTrace& trace, bool done);

}  // namespace jankbpf
