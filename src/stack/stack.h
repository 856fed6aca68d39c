// Public types of the stack library: what goes in (one captured sample, as
// perf's PERF_SAMPLE_REGS_USER / PERF_SAMPLE_STACK_USER / PERF_SAMPLE_CALLCHAIN
// give it, or the BPF off-CPU capture in the same layout) and what comes
// out (symbolized frames, leaf first).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arch/arch.h"
#include "arch/regs.h"

namespace jankbpf::stack {

// One captured sample. Spans are borrowed: they only need to live during
// Resolver::resolve().
struct SampleInput {
  pid_t pid = 0;  // process (tgid) whose maps/files are used
  pid_t tid = 0;  // thread sampled
  Arch arch = host_arch().arch;
  // PERF_SAMPLE_REGS_USER: abi (RegsAbi), then popcount(regs_mask) values
  // in ascending bit order of the mask (attr.sample_regs_user).
  uint64_t regs_abi = static_cast<uint64_t>(RegsAbi::Abi64);
  uint64_t regs_mask = 0;
  std::span<const uint64_t> regs;
  // PERF_SAMPLE_STACK_USER: the copied bytes (starting at the user SP) and
  // dyn_size, the number of them that are valid.
  std::span<const uint8_t> stack;
  uint64_t stack_dyn_size = 0;
  // Kernel part of PERF_SAMPLE_CALLCHAIN (or a BPF kernel stack), leaf
  // first. PERF_CONTEXT_* markers and user addresses are skipped, so the
  // whole perf callchain can be passed as is.
  std::span<const uint64_t> kernel_callchain;
  // Off-CPU capture: the task state at switch-out ('S' sleeping, 'D'
  // uninterruptible, ...). 0 for an on-CPU sample.
  char wait_state = 0;
};

enum FrameFlags : uint32_t {
  kFrameJit = 1u << 0,        // in anonymous executable memory (JIT code)
  kFrameKernel = 1u << 1,     // kernel address
  kFrameTruncated = 1u << 2,  // last frame of a stack the unwinder could not finish
  kFrameInlined = 1u << 3,    // an inlined call expanded from the next frame's pc
};

struct Frame {
  uint64_t pc = 0;  // absolute address (the return address for callers)
  std::string module;    // mapped path, "[vdso]", "[kernel.kallsyms]", "[ext4]"; "" unknown
  std::string build_id;  // hex GNU build-id; "" unknown
  uint64_t module_offset = 0;  // pc - load bias (the ELF vaddr addr2line takes); kernel: pc - _text
  std::string symbol;          // demangled; "" when it cannot be named
  uint64_t symbol_offset = 0;  // pc - symbol start (0 for inlined frames)
  std::string file;            // source file where DWARF line info (or a JIT map) says
  uint32_t line = 0, column = 0;
  uint32_t flags = 0;
  // An interpreter's frame placed among the native ones ("python"; "" for
  // native code): symbol, file and line are the runtime's, there is no pc.
  std::string runtime;

  bool has_module() const { return !module.empty(); }
  bool jit() const { return flags & kFrameJit; }
  bool kernel() const { return flags & kFrameKernel; }
  bool inlined() const { return flags & kFrameInlined; }
  bool is_runtime() const { return !runtime.empty(); }
};

// Why unwinding stopped.
enum class UnwindStop : uint8_t {
  Complete,        // reached the outermost frame (CFI says no return address)
  StackTruncated,  // CFI needed memory above the copied stack window
  NoUnwindInfo,    // no CFI and no usable frame pointer at some pc
  BadFrame,        // a return address outside executable memory, or SP went backwards
  MaxDepth,        // hit ResolverOptions::max_frames
  NoUserRegs,      // the sample has no user registers (kernel thread, abi NONE)
  BadRegisters,    // the register values do not match the mask, or lack PC/SP
  Unsupported,     // 32-bit (compat) ABI or unknown arch
  NoProcess,       // /proc/PID/maps unreadable (process gone)
  Error,           // anything else libdwfl reported
};
std::string_view to_string(UnwindStop s);

struct ResolvedStack {
  pid_t pid = 0, tid = 0;
  std::vector<Frame> frames;  // leaf first: kernel frames, then user frames
  size_t kernel_frames = 0;   // how many of frames[] are kernel frames
  UnwindStop stop = UnwindStop::Complete;
  bool truncated = false;     // user stack incomplete (stop != Complete)
  char wait_state = 0;        // copied from SampleInput
  std::string error;          // detail for stop != Complete, for logs
  // Budgets (util/budget.h bits) that cost this stack names, lines or
  // frames: a module or perf map of its process left out or cut.
  uint32_t budgets = 0;
};

// Human name of a task state letter ('S' -> "sleeping").
std::string_view wait_state_name(char state);

}  // namespace jankbpf::stack
