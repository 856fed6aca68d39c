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

// Runs trace-cmd (fork/execve with an argv, never a shell) on `dat` and
// parses its output. Empty with *error when trace-cmd is missing or fails.
std::vector<SchedEvent> read_sched_events(const std::string& dat, uint64_t from_ns, uint64_t to_ns,
                                          std::string* error);

}  // namespace jankbpf::report
