// The seed's trace timing as a pure state machine, driven by explicit times
// so it can be tested exactly and run from timerfd deadlines:
//
//   - checks every 150 ms, up to 20 of them, whether the main thread's task
//     has passed the trace bound: strictly more than 450 ms (a task of
//     exactly 450 ms triggers nothing, as the seed says);
//   - on the first such check (or any earlier observation of it) the trace
//     is triggered; the capture ends 3 s after the trigger, then is saved;
//   - if none of the 20 checks sees it, the checks end and nothing is saved.
//
// Times are CLOCK_MONOTONIC nanoseconds. The planner only says what to do;
// the event loop pauses and saves the ftrace instance (TraceCapture) when it
// says Save. One planner serves one watch (for one thread, or one shared
// flight recorder); reset() makes it reusable.
//
// Usage from the loop:
//   planner.start(now);                         // a task looks slow: watch it
//   arm timerfd at *planner.deadline();
//   on timer:  act = planner.on_deadline(now, task_elapsed_ns_or_-1);
//   on events: act = planner.observe(now, task_elapsed_ns);
//   act == Triggered: the trace is decided (take the trace quota here)
//   act == Save:      TraceCapture::start(pid)
//   re-arm timerfd at planner.deadline() while it has one.
#pragma once

#include <cstdint>
#include <optional>

namespace jankbpf {

struct TraceTiming {
  int64_t bound_ns = 450'000'000;          // strictly more triggers
  int64_t check_interval_ns = 150'000'000;
  int max_checks = 20;
  int64_t capture_after_ns = 3'000'000'000;  // capture end - trigger
};

class TracePlanner {
 public:
  enum class State { Idle, Checking, Capturing, Done };
  enum class Action {
    None,       // nothing to do now
    Triggered,  // a task passed the bound: the capture runs until capture_end
    Save,       // the capture window is over: save the trace now
    GaveUp,     // max_checks passed without a task over the bound
  };

  explicit TracePlanner(TraceTiming timing = {}) : timing_(timing) {}

  // Starts the checks: the first is due one interval from now. Ignored
  // unless Idle (or Done, which it restarts).
  void start(int64_t now_ns);

  // A direct observation: the current task has run for elapsed_ns (a
  // negative elapsed means no task is running). Triggers if it is over the
  // bound and no trigger happened yet, even between checks or before
  // start(). Does not count as a check.
  Action observe(int64_t now_ns, int64_t elapsed_ns);

  // Call at (or after) deadline(). In Checking it performs the due check
  // with elapsed_ns; in Capturing it returns Save once the window is over.
  Action on_deadline(int64_t now_ns, int64_t elapsed_ns = -1);

  // When the loop should call on_deadline() next; none when Idle or Done.
  std::optional<int64_t> deadline() const;

  State state() const { return state_; }
  int checks_done() const { return checks_; }
  std::optional<int64_t> trigger_ns() const { return trigger_; }
  std::optional<int64_t> capture_end_ns() const {
    if (!trigger_) return std::nullopt;
    return *trigger_ + timing_.capture_after_ns;
  }
  const TraceTiming& timing() const { return timing_; }

  void reset();

 private:
  Action trigger(int64_t now_ns);

  TraceTiming timing_;
  State state_ = State::Idle;
  int checks_ = 0;
  int64_t next_check_ = 0;
  std::optional<int64_t> trigger_;
};

}  // namespace jankbpf
