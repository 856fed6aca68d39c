// The scheduling events of a saved trace (trace-cmd .dat), for the Perfetto
// trace's CPU tracks: sched_switch, sched_waking and sched_wakeup as `trace-cmd report -R`
// prints them (raw fields, so prev_state stays the kernel's number). The
// parser is separate from running trace-cmd so it can be tested on text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf::report {

struct SchedEvent {
  enum class Kind { Switch, Waking, Wakeup } kind = Kind::Switch;
  uint32_t cpu = 0;
  uint64_t ts_ns = 0;   // the trace clock (jankbpf's instance: mono)
  int32_t pid = 0;      // the task running when the event fired
  // Switch: prev_* / next_*. Waking, Wakeup: comm/pid/prio of the woken task in prev_*.
  std::string prev_comm, next_comm;
  int32_t prev_pid = 0, next_pid = 0, prev_prio = 0, next_prio = 0, target_cpu = 0;
  int64_t prev_state = 0;
};

// Parses `trace-cmd report -t -R` output; lines of other events are skipped. Keeps events with from_ns <= ts <= to_ns.
std::vector<SchedEvent> parse_sched_report(std::string_view text, uint64_t from_ns, uint64_t to_ns);

// What converting one trace may cost: the .dat is named by input that may
// be hostile (a record from elsewhere), so its size, trace-cmd's time and
// output, and the events kept are all bounded.
struct SchedReadLimits {
  uint64_t max_file = 1ull << 30;     // bytes of .dat
  int timeout_ms = 20000;             // trace-cmd's run, then SIGKILL
  uint64_t max_output = 512ull << 20; // bytes of its text
  size_t max_events = 1u << 20;       // events of the window kept
};

// Runs trace-cmd (fork/execve with an argv, never a shell) on `dat` -- a
// regular file, checked and handed over as its stdin -- and parses its
// output as it comes. Empty with *error when the file is refused, or
// trace-cmd is missing, fails or passes a bound.
std::vector<SchedEvent> read_sched_events(const std::string& dat, uint64_t from_ns, uint64_t to_ns,
                                          std::string* error, const SchedReadLimits& limits = {});

}  // namespace jankbpf::report
