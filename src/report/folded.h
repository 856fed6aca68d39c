// Folded stacks ("frame;frame;frame COUNT", root first), the format
// flamegraph.pl, speedscope, Perfetto, Firefox's profiler and Pyroscope all
// read. Every stack starts with a frame naming where it belongs, so one file
// holds a whole run: the process ("redis-server (pid 11567)") or, per jank,
// the jank ("jank pid 11567 tid 11567 #17 350.3 ms").
#pragma once

#include <string>
#include <string_view>

#include "report/run.h"

namespace jankbpf::report {

enum class FoldedBy { Process, Jank };

// A frame name made safe for the format: ';' separates frames and the last
// space the count, so ';' becomes ':' and control characters (newlines)
// become spaces.
std::string folded_frame(std::string_view name);

// Off-CPU samples end in an "[off-CPU: STATE]" frame. Lines in first-seen
// order; identical stacks within a block are merged.
std::string render_folded(const Run& run, FoldedBy by);

}  // namespace jankbpf::report
