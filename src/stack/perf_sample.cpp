#include "stack/perf_sample.h"

#include <linux/perf_event.h>

#include <bit>
#include <cstring>

namespace jankbpf::stack {

bool parse_perf_sample(std::span<const uint8_t> record, uint64_t sample_type, uint64_t regs_mask,
                       PerfSampleView& out) {
  out = PerfSampleView{};
  if (reinterpret_cast<uintptr_t>(record.data()) % 8 != 0) return false;
  if (record.size() < sizeof(perf_event_header)) return false;
  perf_event_header h;
  std::memcpy(&h, record.data(), sizeof h);
  if (h.type != PERF_RECORD_SAMPLE || h.size < sizeof h || h.size > record.size()) return false;
  if (sample_type & (PERF_SAMPLE_READ | PERF_SAMPLE_BRANCH_STACK)) return false;
  const uint8_t* p = record.data() + sizeof h;
  const uint8_t* end = record.data() + h.size;
  auto left = [&] { return static_cast<size_t>(end - p); };
  auto u64 = [&](uint64_t& v) {
    if (left() < 8) return false;
    std::memcpy(&v, p, 8);
    p += 8;
    return true;
  };
  auto u32pair = [&](uint32_t& a, uint32_t& b) {
    uint64_t v;
    if (!u64(v)) return false;
    std::memcpy(&a, reinterpret_cast<const uint8_t*>(&v), 4);
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(&v) + 4, 4);
    return true;
  };
  uint32_t res;
  if ((sample_type & PERF_SAMPLE_IDENTIFIER) && !u64(out.id)) return false;
  if ((sample_type & PERF_SAMPLE_IP) && !u64(out.ip)) return false;
  if ((sample_type & PERF_SAMPLE_TID) && !u32pair(out.pid, out.tid)) return false;
  if ((sample_type & PERF_SAMPLE_TIME) && !u64(out.time)) return false;
  if ((sample_type & PERF_SAMPLE_ADDR) && !u64(out.addr)) return false;
  if ((sample_type & PERF_SAMPLE_ID) && !u64(out.id)) return false;
  if ((sample_type & PERF_SAMPLE_STREAM_ID) && !u64(out.stream_id)) return false;
  if ((sample_type & PERF_SAMPLE_CPU) && !u32pair(out.cpu, res)) return false;
  if ((sample_type & PERF_SAMPLE_PERIOD) && !u64(out.period)) return false;
  if (sample_type & PERF_SAMPLE_CALLCHAIN) {
    uint64_t nr;
    if (!u64(nr) || nr > left() / 8) return false;
    out.callchain = {reinterpret_cast<const uint64_t*>(p), static_cast<size_t>(nr)};
    p += nr * 8;
  }
  if (sample_type & PERF_SAMPLE_RAW) {
    if (left() < 4) return false;
    uint32_t size;
    std::memcpy(&size, p, 4);
    p += 4;
    if (size > left()) return false;
    out.raw = {p, size};
    p += size;
    // u32 size + data is padded to 8 bytes by the kernel (size counts it).
    if ((reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(record.data())) % 8 != 0) return false;
  }
  if (sample_type & PERF_SAMPLE_REGS_USER) {
    if (!u64(out.regs_abi)) return false;
    if (out.regs_abi != PERF_SAMPLE_REGS_ABI_NONE) {
      size_t n = static_cast<size_t>(std::popcount(regs_mask));
      if (n > left() / 8) return false;
      out.regs = {reinterpret_cast<const uint64_t*>(p), n};
      p += n * 8;
    }
  }
  if (sample_type & PERF_SAMPLE_STACK_USER) {
    uint64_t size;
    if (!u64(size) || size > left()) return false;
    out.stack = {p, static_cast<size_t>(size)};
    p += size;
    if (size) {
      if (!u64(out.stack_dyn_size)) return false;
      if (out.stack_dyn_size > size) out.stack_dyn_size = size;
    }
  }
  return true;
}

SampleInput to_sample_input(const PerfSampleView& s, uint64_t regs_mask, Arch arch) {
  SampleInput in;
  in.pid = static_cast<pid_t>(s.pid);
  in.tid = static_cast<pid_t>(s.tid);
  in.arch = arch;
  in.regs_abi = s.regs_abi;
  in.regs_mask = regs_mask;
  in.regs = s.regs;
  in.stack = s.stack;
  in.stack_dyn_size = s.stack_dyn_size;
  in.kernel_callchain = s.callchain;
  return in;
}

}  // namespace jankbpf::stack
