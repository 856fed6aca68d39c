// Reads a PERF_RECORD_SAMPLE (as copied out of the perf ring buffer) into
// borrowed views, up to PERF_SAMPLE_STACK_USER, for the given
// attr.sample_type and attr.sample_regs_user; and turns it into the
// Resolver's SampleInput.
#pragma once

#include <cstdint>
#include <span>

#include "arch/arch.h"
#include "stack/stack.h"

namespace jankbpf::stack {

struct PerfSampleView {
  uint64_t id = 0, ip = 0, time = 0, addr = 0, stream_id = 0, period = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::span<const uint64_t> callchain;  // PERF_CONTEXT_* markers included
  std::span<const uint8_t> raw;
  uint64_t regs_abi = 0;
  std::span<const uint64_t> regs;
  std::span<const uint8_t> stack;
  uint64_t stack_dyn_size = 0;
};

// `record` starts at the perf_event_header and must be 8-byte aligned (a
// copy in a std::vector or malloc'd buffer is). Returns false when the
// record is not a sample, is cut short, is misaligned, or uses
// PERF_SAMPLE_READ / PERF_SAMPLE_BRANCH_STACK (whose size needs more of
// the attr than this takes).
bool parse_perf_sample(std::span<const uint8_t> record, uint64_t sample_type, uint64_t regs_mask,
                       PerfSampleView& out);

// The Resolver's input for a parsed sample (views stay borrowed).
SampleInput to_sample_input(const PerfSampleView& s, uint64_t regs_mask, Arch arch = host_arch().arch);

}  // namespace jankbpf::stack
