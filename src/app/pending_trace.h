// A trace being captured for a task. The trace keeper fills it in and
// calls finish(); the task's record waits, parked, until then
// (app/parked_records.h), and the reporter is woken through on_done.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "model/suppressed.h"

namespace jankbpf {

struct PendingTrace {
  std::mutex mu;
  bool done = false;
  std::vector<std::string> paths;
  bool over_limit = false;
  std::string error, note;
  Suppressed suppressed = Suppressed::None;  // the trace quota held it back
  std::function<void()> on_done;  // set by the reporter while a record waits

  // Marks it done and wakes whoever waits (outside the lock).
  void finish() {
    std::function<void()> wake;
    {
      std::lock_guard lk(mu);
      done = true;
      wake = std::move(on_done);
    }
    if (wake) wake();
  }
};

}  // namespace jankbpf
