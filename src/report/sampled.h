// Turns the unwinder's stacks into the renderers' SampledStack (root first,
// one display name per frame), live from the reporter and after the fact
// from a stack log's text; both give the same names, so a report made later
// looks like the one made during the run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/records.h"
#include "stack/stack.h"

namespace jankbpf::report {

// Display name of a frame: its symbol (JIT names included); kernel symbols
// get flamegraph.pl's "_[k]" suffix; without a symbol "module+0xOFF", and
// "[jit]" / "[unknown]" when there is not even a module.
std::string frame_name(const stack::Frame& f);
SampledStack to_sampled(const stack::ResolvedStack& s, uint64_t time_ns);

// The off-CPU pseudo-frame that ends an off-CPU sample in folded stacks
// and flame graphs: "[off-CPU: sleeping]", "[off-CPU: blocked_io]", ...
std::string off_cpu_frame(char wait_state);
// 'S' -> "sleeping", 'D' -> "blocked_io", 'R' -> "runnable"; the names the
// record's state_ms uses.
const char* wait_state_label(char wait_state);

// One line of the seed's stack log without count and level (see
// stack/tree.h): the frame it names, or the wait state ('S', 'D', 'R') for
// a "wait S (sleeping)" line. False for text that is neither.
bool parse_log_frame(std::string_view text, SampledFrame* frame, char* wait_state);

// A whole stack log: one SampledStack per leaf of the tree, with the count
// of samples that ended there (times unknown).
std::vector<SampledStack> parse_stack_log(std::string_view text);

}  // namespace jankbpf::report
