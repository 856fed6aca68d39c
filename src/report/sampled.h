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

// What one stack log may make `jankbpf report` hold, whoever wrote it: far
// above what jankbpf writes (128 frames of a native stack plus runtime
// frames; sample_count <= 2496 samples a window) and far below what a
// made-up log could ask for (a 20,000-deep chain of leaves is 2e8 frames).
struct StackLogLimits {
  size_t max_depth = 512;              // levels kept from the root
  size_t max_stacks = 65536;           // leaves (stacks) per log
  size_t max_frame_refs = 1u << 19;    // frames over all its stacks
  uint64_t max_count = 1u << 24;       // samples one line may claim
};

// A whole stack log: one SampledStack per leaf of the tree, with the count
// of samples that ended there (times unknown). Linear in the text: past a
// limit the rest is left out and *truncated says so.
std::vector<SampledStack> parse_stack_log(std::string_view text, const StackLogLimits& limits = {},
                                          bool* truncated = nullptr);

}  // namespace jankbpf::report
