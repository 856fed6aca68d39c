// A stack log as whoever copied it to the reporting machine likes (deep
// chains, huge counts and levels, broken frames): `jankbpf report` must
// parse it within StackLogLimits, and a Run holding it must render a
// Perfetto trace of bounded size (within SampleLimits).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "report/perfetto.h"
#include "report/run.h"
#include "report/sampled.h"

using namespace jankbpf;
using namespace jankbpf::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Small limits, so the fuzzer reaches them with small inputs.
  StackLogLimits limits;
  limits.max_depth = 64;
  limits.max_stacks = 256;
  limits.max_frame_refs = 4096;
  limits.max_count = 1u << 20;
  bool truncated = false;
  auto stacks = parse_stack_log(text, limits, &truncated);
  size_t frames = 0;
  for (const auto& s : stacks) {
    if (s.frames.size() > limits.max_depth || s.count > limits.max_count) abort();
    frames += s.frames.size();
  }
  if (stacks.size() > limits.max_stacks || frames > limits.max_frame_refs) abort();

  // The defaults too: the same text within the shipped bounds.
  auto full = parse_stack_log(text);
  Run run;
  TaskRecord r;
  r.proc.pid = r.tid = 7;
  r.begin_mono_ns = 1'000'000'000;
  r.duration_ms = 200;
  r.sampled = std::move(full);
  run.add(r);
  // Small sample bounds too, as for the parser: at the shipped 10,000 a
  // task, each input with a large count spent its time making packets.
  const SampleLimits samples{.per_task = 64, .per_trace = 64};
  std::string trace = render_perfetto(run, {}, samples);
  // 64 samples at most, each packet a few dozen bytes, plus the interned
  // stacks (bounded by the input).
  if (trace.size() > samples.per_task * 64 + 64 * size + 4096) abort();
  return 0;
}
