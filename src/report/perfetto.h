// A Perfetto trace (protobuf, perfetto.protos.Trace) of a run, encoded by
// hand: a track per watched thread with each jank and hang as a slice (the
// state split as args, off-CPU periods as child slices with a flow from the
// thread that woke it), every stack sample as a PerfSample with interned
// frames and callstacks (selecting the thread's samples gives a flame graph),
// and the scheduling events of saved traces as ftrace bundles so the CPU
// tracks show what ran. Timestamps are CLOCK_MONOTONIC nanoseconds, the
// clock of the records (begin_monotonic_ns) and of jankbpf's ftrace instance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/run.h"
#include "report/sched_trace.h"

namespace jankbpf::report {

// PerfSample packets: a stack log's counts are claims, not packets to make.
// Past a bound every stack keeps its share, so the flame graph keeps its
// shape. Tests pass small bounds to reach them with small inputs.
struct SampleLimits {
  uint64_t per_task = 10'000, per_trace = 2'000'000;
};

std::string render_perfetto(const Run& run, const std::vector<SchedEvent>& sched, const SampleLimits& limits = {});

// The trace files (.dat) the run's records name, with the window of each
// to convert: from 2 s before its task to 1 s after.
struct TraceWindow {
  std::string path;
  uint64_t from_ns = 0, to_ns = 0;
};
std::vector<TraceWindow> trace_windows(const Run& run);

}  // namespace jankbpf::report
